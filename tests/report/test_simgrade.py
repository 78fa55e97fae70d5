"""The simulator grade's tables and plots from sim-eval summaries with known numbers."""

import json

import pytest

from terminalworld.errors import InputError
from terminalworld.report.simgrade import UNMEASURED, WEAK, read_sims, sim_blocks, sim_plots, sim_table
from terminalworld.report.tables import to_markdown


def _summary(tier, **kw):
    base = {"_summary": True, "tier": tier}
    if tier < 3:
        base |= {"n": 4, "exact_match": 0.25, "similarity": 0.5, "line_f1": 0.4, "degenerate_rate": 0.0}
        base |= {"degenerate_rate_long": None, "capped_rate": 0.5, "by_family": {"ls": {"similarity": 0.9}}}
    else:
        base |= {"episodes": 2, "turn_similarity": 0.3, "diverged_episodes": 2, "first_divergence": [1, 3]}
        base |= {"outcome_agreement": 0.5, "reward_against_simulator": 0.5, "reward_against_sandbox": 1.0}
        base |= {"sim_to_real_gap": 0.5, "seconds_per_simulated_turn": 2.0, "tokens_per_simulated_turn": 30}
        base |= {"seconds_per_sandbox_turn": 0.05}
    return base | kw


def _write(tmp_path, name, summary):
    path = tmp_path / name
    path.write_text(json.dumps({"instance_id": "x"}) + "\n" + json.dumps(summary) + "\n")
    return f"{name.split('.')[0]}={path}"


def test_tables_per_tier_and_the_weak_note(tmp_path):
    pairs = [
        _write(tmp_path, "full.t1", _summary(1)),
        _write(tmp_path, "full.t3", _summary(3)),
        _write(tmp_path, "base.t1", _summary(1, similarity=0.1, by_family={"cat": {"similarity": 0.2}})),
    ]
    sims = read_sims(pairs)
    assert set(sims["full"]) == {1, 3}
    t = sim_table(sims)
    assert t["checkpoints"]["full"]["tier1"]["by_family"] == {"ls": 0.9} and t["note"] == UNMEASURED
    assert t["checkpoints"]["full"]["tier3"]["first_divergence"] == [1, 3]
    md = to_markdown(sim_blocks(t))
    assert "| full | 4 | 25% | 0.500 | 0.400 | 0% | — | 50% |" in md
    assert "| base | 0.200 | — |" in md and "| full | — | 0.900 |" in md  # families: cat, ls
    assert "| full | 2 | 0.300 | 2 | 50% | 0.500 vs 1.000 |" in md
    plots = sim_plots(t, str(tmp_path))
    assert [p.rsplit("/", 1)[1] for p in plots] == [
        "sim_similarity_by_family.png",
        "sim_degeneration.png",
        "sim_divergence.png",
    ]
    weak = sim_table({"a": {1: _summary(1, similarity=0.2, degenerate_rate_long=0.0)}})
    assert weak["note"] == WEAK and WEAK in to_markdown(sim_blocks(weak))
    assert sim_table({"a": {1: _summary(1, similarity=0.6, degenerate_rate_long=0.25)}})["note"] is None


def test_bad_inputs_are_one_line_errors(tmp_path):
    with pytest.raises(InputError, match="NAME=PATH"):
        read_sims(["nopath"])
    (tmp_path / "cut.jsonl").write_text(json.dumps({"instance_id": "x"}) + "\n")
    with pytest.raises(InputError, match="no summary row last"):
        read_sims([f"a={tmp_path / 'cut.jsonl'}"])


def test_tier_three_shows_its_confusion_table_and_says_when_one_outcome_is_all_there_is(tmp_path):
    from terminalworld.report.simgrade import ONE_OUTCOME

    c = {"real_solved_sim_solved": 5, "real_solved_sim_failed": 1, "real_failed_sim_solved": 2}
    c["real_failed_sim_failed"] = 4
    b = dict.fromkeys(c, 0) | {"real_solved_sim_solved": 6, "real_failed_sim_solved": 6}
    both = _summary(3, episodes=12, wrong_share=0.5, real_outcomes_both=True, confusion=c, belief_confusion=b)
    md = to_markdown(sim_blocks(sim_table(read_sims([_write(tmp_path, "full.t3", both)]))))
    assert "| full | 50% | 5 | 1 | 2 | 4 | 6 | 6 |" in md and ONE_OUTCOME not in md
    one = both | {"real_outcomes_both": False, "wrong_share": None}
    md = to_markdown(sim_blocks(sim_table(read_sims([_write(tmp_path, "full.t3", one)]))))
    assert "| full | — | 5 |" in md and ONE_OUTCOME in md
    assert "real ✓ sim ✓" not in to_markdown(sim_blocks(sim_table(read_sims([_write(tmp_path, "a.t3", _summary(3))]))))


def test_tiers_one_and_two_show_the_headline_and_each_class(tmp_path):
    by_class = {"sentinel": {"n": 2, "exact_match": 1.0, "similarity": 1.0}, "copy": {"n": 0}}
    by_class |= {"read": {"n": 2, "exact_match": 0.0, "similarity": 0.2}}
    by_class |= {"predict": {"n": 1, "exact_match": 0.0, "similarity": 0.1}}
    headline = {"n": 3, "exact_match": 0.0, "similarity": 0.5 / 3}
    t = sim_table(read_sims([_write(tmp_path, "full.t1", _summary(1, by_class=by_class, headline=headline))]))
    md = to_markdown(sim_blocks(t))
    assert "| model | headline exact match | headline similarity | sentinel | copy | read | predict |" in md
    assert "| full | 0% | 0.167 (3) | 1.000 (2) | — (0) | 0.200 (2) | 0.100 (1) |" in md


def test_a_checkpoint_graded_as_its_own_agent_is_a_row_of_its_own(tmp_path):
    pairs = [_write(tmp_path, "full-x9.t3", _summary(3)), _write(tmp_path, "full-x9-as-agent.t3", _summary(3))]
    t = sim_table(read_sims(pairs))
    assert set(t["checkpoints"]) == {"full-x9", "full-x9-as-agent"}
    assert "| full-x9-as-agent | 2 | 0.300 | 2 | 50% |" in to_markdown(sim_blocks(t))
    assert len(sim_plots(t, str(tmp_path))) == 1  # the divergence plot, both loops in it
