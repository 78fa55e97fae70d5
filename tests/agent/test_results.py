import math

import pytest

from terminalworld.agent.results import harbor_result, pass_at_k, summarize, trial_row


def _row(task, reward, exc=None, kind=None):
    scored = reward is not None
    return {"task": task, "trial": f"{task}-{reward}-{exc}", "reward": reward, "scored": scored, "exception": exc} | {
        "error_kind": kind
    }


def test_pass_at_k_is_the_unbiased_estimator():
    assert pass_at_k(5, 0, 3) == 0.0 and pass_at_k(5, 5, 1) == 1.0
    assert pass_at_k(5, 2, 1) == pytest.approx(2 / 5)
    assert pass_at_k(5, 2, 2) == pytest.approx(1 - math.comb(3, 2) / math.comb(5, 2))  # 0.7
    assert pass_at_k(4, 1, 4) == 1.0


def test_summary_by_hand():
    rows = [
        _row("a", 1.0),
        _row("a", 0.0),
        _row("a", 1.0),
        _row("b", 0.0),
        _row("b", 0.0, "AgentTimeoutError", "agent"),
        _row("b", None, "EnvironmentStartTimeoutError", "infrastructure"),
    ]
    s = summarize(rows, n_attempts=3, n_tasks=3, dataset="d")
    rewards = [1.0, 0.0, 1.0, 0.0, 0.0]
    mean = sum(rewards) / 5
    assert s["pass_at_1"] == pytest.approx(mean) and s["mean_reward"] == pytest.approx(0.4)
    sd = math.sqrt(sum((x - mean) ** 2 for x in rewards) / 4)
    assert s["pass_at_1_stderr"] == pytest.approx(sd / math.sqrt(5))
    # Task a: 3 scored, 2 solved; task b: 2 scored, 0 solved; task c wrote nothing. k up to 2.
    assert s["pass_at_k"] == {"1": pytest.approx((2 / 3 + 0) / 2), "2": pytest.approx((1.0 + 0) / 2)}
    assert (s["attempted_trials"], s["scored_trials"], s["solved_trials"], s["unscored_trials"]) == (9, 5, 2, 4)
    assert s["errors"] == {
        "agent:AgentTimeoutError": 1,
        "infrastructure:EnvironmentStartTimeoutError": 1,
        "infrastructure:no_result_written": 3,
    }
    assert (s["agent_errors"], s["infrastructure_errors"]) == (1, 4)
    assert s["accuracy"] == pytest.approx(2 / 5) and s["valid_action_rate"] is None  # no agent metadata
    assert set(harbor_result(s)) == {
        "dataset",
        "benchmark_trials",
        "attempted_trials",
        "scored_trials",
        "solved_trials",
        "unscored_trials",
        "errors",
        "mean_reward",
        "accuracy",
    }


def test_trial_row_from_a_harbor_result():
    result = {
        "task_name": "t",
        "trial_name": "t__x",
        "verifier_result": {"rewards": {"reward": 1.0}},
        "exception_info": {"exception_type": "AgentTimeoutError"},
        "agent_result": {"n_input_tokens": 10, "n_output_tokens": 3, "metadata": {"turns": 2, "outcome": "running"}},
        "agent_execution": {"started_at": "2026-01-01T00:00:00", "finished_at": "2026-01-01T00:00:02.5"},
    }
    row = trial_row(result)
    assert row["reward"] == 1.0 and row["scored"] and row["error_kind"] == "agent"
    assert row["seconds"]["agent_execution"] == 2.5 and row["seconds"]["verifier"] is None
    # The code under test runs inside the verifier, so a verifier that failed on it is a failure,
    # scored 0 whatever reward was recorded: never a trial taken out of pass@1's denominator.
    for exc in ("RewardFileNotFoundError", "VerifierTimeoutError", "DownloadVerifierDirError"):
        result["exception_info"] = {"exception_type": exc}
        row = trial_row(result)
        assert row["reward"] == 0.0 and row["scored"] and row["error_kind"] == "submission"
        assert summarize([row], n_attempts=1, n_tasks=1, dataset="d")["pass_at_1"] == 0.0
    result["exception_info"] = {"exception_type": "EnvironmentStartTimeoutError"}
    row = trial_row(result)
    assert row["reward"] is None and not row["scored"] and row["error_kind"] == "infrastructure"


def test_only_named_machinery_failures_leave_a_trial_unscored():
    started = {"started_at": "2026-01-01T00:00:00", "finished_at": "2026-01-01T00:00:01"}
    base = {"task_name": "t", "trial_name": "t__x", "verifier_result": None, "agent_execution": started}
    # What the agent left made the verifier's setup fail (Harbor's own error types): scored 0.
    for exc in ("AddTestsDirError", "RuntimeError", "PermissionError", "VerifierError"):
        row = trial_row(base | {"exception_info": {"exception_type": exc}})
        assert (row["reward"], row["scored"], row["error_kind"]) == (0.0, True, "submission")
    for exc in ("URLError", "CancelledError", "EnvironmentStartTimeoutError"):
        row = trial_row(base | {"exception_info": {"exception_type": exc}})
        assert (row["reward"], row["scored"], row["error_kind"]) == (None, False, "infrastructure")
    # Before the agent's first command nothing it did can be the cause.
    row = trial_row(base | {"agent_execution": None, "exception_info": {"exception_type": "RuntimeError"}})
    assert (row["scored"], row["error_kind"]) == (False, "infrastructure")
