"""The cost model on known answers: a step's seconds from its work, rates scaled by measured
ratios, generations decoded together at their measured batch ratio, and the per-stage projection
beside a measured run."""

from dataclasses import replace

import pytest

from terminalworld.pipeline.cost import Batched, Throughput, Work, projection_table, stage_seconds

ONE = Throughput(
    name="one",
    sft_tokens_per_s=10.0,
    score_s_per_token=0.5,
    prefill_s_per_token=0.25,
    generate_tokens_per_s=4.0,
    startup_s=100.0,
    trial_overhead_s=3.0,
    sandbox_command_s=1.0,
    source="made up",
)
WORKS = {
    "sft a": Work(sft_tokens=100),  # 100 + 10
    "sft b": Work(sft_tokens=200, models=0),  # 20
    "score a": Work(scored_tokens=10),  # 100 + 5
    "agent a": Work(models=0, prompt_tokens=8, new_tokens=8, trials=2),  # 2 + 2 + 6
}


def test_step_and_stage_seconds_by_hand():
    assert WORKS["sft a"].seconds(ONE) == 110.0
    assert stage_seconds(WORKS, ONE) == {"sft": 130.0, "score": 105.0, "agent": 10.0}


def test_measured_ratios_scale_each_stages_speed():
    fast = ONE.scaled(name="fast", source="ratios", sft=2.0, score=4.0, prefill=0.5, generate=1.0)
    assert (fast.name, fast.source) == ("fast", "ratios")
    assert fast.sft_tokens_per_s == 20.0 and fast.score_s_per_token == 0.125
    assert fast.prefill_s_per_token == 0.5 and fast.generate_tokens_per_s == 4.0
    assert (fast.startup_s, fast.trial_overhead_s) == (ONE.startup_s, ONE.trial_overhead_s)  # not precision's
    assert stage_seconds(WORKS, fast) == pytest.approx({"sft": 115.0, "score": 101.25, "agent": 12.0})


def test_the_projection_lists_every_stage_beside_the_measured_run():
    table = projection_table(WORKS, [ONE], {"record": 120.0, "sft": 3600.0}, "before").splitlines()
    rows = {line.split()[0]: line.split()[1:] for line in table[2:] if not line.startswith("-")}
    assert rows["record"] == ["2m", "0s"] and rows["sft"] == ["1h", "00m", "2m"]
    assert rows["score"] == ["-", "2m"] and rows["total"] == ["1h", "02m", "4m"]
    alone = projection_table(WORKS, [ONE]).splitlines()  # no measured run: the estimates only
    assert alone[0].split() == ["stage", ONE.name] and [line.split()[0] for line in alone[2:-2]] == [
        "sft",
        "score",
        "agent",
    ]
    assert alone[-1].split() == ["total", "4m"]


def test_generations_decoded_together_run_at_the_measured_batch_ratio():
    batched = replace(ONE, batched={4: Batched(prefill=0.5, generate=2.0)})
    work = Work(models=0, prompt_tokens=8, new_tokens=8, rows=4)
    assert work.seconds(batched) == 8 * 0.25 / 0.5 + 8 / (4.0 * 2.0) == 5.0
    assert replace(work, rows=8).seconds(batched) == 5.0  # the largest measured batch not above it
    assert replace(work, rows=2).seconds(batched) == 4.0  # below any measured batch: no gain
    assert replace(work, rows=1).seconds(batched) == work.seconds(ONE) == 4.0  # unmeasured machine: none
    assert batched.scaled(name="f", source="r", generate=2.0).batched == batched.batched  # precision keeps it
