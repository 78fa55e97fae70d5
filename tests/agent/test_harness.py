from terminalworld.agent.harness import FORMAT_WARNING, Episode, HarnessConfig
from terminalworld.core.trajectories import OBSERVATION_PREFIX, SUBMIT_SENTINEL, harness_spans

ACT = "THOUGHT: look.\n\n```bash\nls\n```"


def test_a_command_then_its_observation_then_submission():
    ep = Episode(system="S", task="T", config=HarnessConfig(max_turns=5))
    assert ep.act(ACT) == "ls" and ep.outcome == "running"
    ep.observe("a.py\n")
    assert ep.messages[-1] == {"role": "user", "content": OBSERVATION_PREFIX + "a.py\n"}
    assert ep.act(f"THOUGHT: done.\n\n```bash\necho {SUBMIT_SENTINEL}\n```") == f"echo {SUBMIT_SENTINEL}"
    ep.observe(f"{SUBMIT_SENTINEL}\n")
    assert ep.outcome == "submitted" and ep.turns == 2 and len(ep.messages) == 5


def test_a_reply_without_exactly_one_block_gets_the_warning_which_is_harness_text():
    ep = Episode(system="S", task="T", config=HarnessConfig(max_turns=5))
    assert ep.act("```bash\nls\n```\n```bash\npwd\n```") is None
    warning = ep.messages[-1]["content"]
    assert warning == FORMAT_WARNING.format(n=2) and ep.format_errors == 1
    assert harness_spans(warning) == [(0, len(warning))]  # ECHO's O' leaves it out


def test_turn_and_context_limits_end_the_episode():
    ep = Episode(system="S", task="T", config=HarnessConfig(max_turns=2, context_tokens=100, max_tokens_per_turn=30))
    ep.act(ACT)
    ep.observe("x")
    assert ep.outcome == "running"
    ep.act("no block")
    assert ep.outcome == "turn_limit"
    ep = Episode(system="S", task="T", config=HarnessConfig(context_tokens=100, max_tokens_per_turn=30))
    assert ep.check_context(70) and not ep.check_context(71) and ep.outcome == "context_limit"
