"""The experiment entry point: the plan names the places the run uses, accelerator steps are
refused off the cluster, a failing step ends in one line naming its log, and a recipe is parsed
with draccus, an overridden one getting its own version."""

import contextlib
import io
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest
from fray.types import ResourceConfig

from terminalworld.pipeline.entry import main, overrides, parse_command_line, parse_recipe, plan
from terminalworld.pipeline.step import FAILURE_LOG, Built, config_step, describe_resources
from terminalworld.pipeline.walltime import run_walltimes
from tests.conftest import load_experiment
from tests.paths import REPO_ROOT


@dataclass(frozen=True)
class Note:
    """A test stage's config: where its file goes, what it says, and a file it reads (if any)."""

    out: str
    value: int = 0
    source: str | None = None


def write_note(cfg: Note) -> None:
    Path(cfg.out).parent.mkdir(parents=True, exist_ok=True)
    said = Path(cfg.source).read_text() if cfg.source else ""
    Path(cfg.out).write_text(f"{said}ok {cfg.value}\n")


def broken(cfg: Note) -> None:
    raise ValueError(f"boom {cfg.value}")


def note_step(name: str, run=write_note, *, value: int = 0, after=None, resources=None, local=None):
    """A step writing `{output}/done.txt`, after the file of the step `after` when given."""
    config = lambda ctx: Note(  # noqa: E731
        out=os.path.join(ctx.output_path, "done.txt"),
        value=value,
        source=Built(after).at(ctx, "done.txt") if after is not None else None,
    )
    return config_step(name, run, config, version="2026.01.01", deps=[after], resources=resources, local=local)


def test_plan_and_run_resolve_the_same_prefix(monkeypatch, tmp_path):
    monkeypatch.delenv("MARIN_PREFIX", raising=False)
    h = note_step("tw-test/fine")
    assert f"output:    {h.path()}\n" in plan([h]) + "\n"
    monkeypatch.setenv("MARIN_PREFIX", str(tmp_path))
    assert f"output:    {tmp_path}/tw-test/fine/2026.01.01\n" in plan([h]) + "\n"
    assert main([h], "test", ["--run"]) == 0
    assert (tmp_path / "tw-test/fine/2026.01.01/done.txt").read_text() == "ok 0\n"


def test_a_step_runs_the_stages_function_on_its_config_built_from_its_deps(monkeypatch, tmp_path):
    monkeypatch.setenv("MARIN_PREFIX", str(tmp_path))
    first = note_step("tw-test/first", value=1)
    second = note_step("tw-test/second", value=2, after=first, local="out")  # written in a local copy
    assert second.deps == (first,)
    assert f'"source": "{tmp_path}/tw-test/first/2026.01.01/done.txt"' in plan([second])
    assert main([second], "test", ["--run"]) == 0
    assert (tmp_path / "tw-test/second/2026.01.01/done.txt").read_text() == "ok 1\nok 2\n"
    # Each step timed its attempt, the local copy's in the output folder like the other's.
    timed = run_walltimes(str(tmp_path), "2026.01.01")
    assert [(r["step"], r["attempts"], r["finished"]) for r in timed] == [
        ("tw-test/first", 1, True),
        ("tw-test/second", 1, True),
    ]
    # The identity reads the config with its deps as name@version, not where the prefix put them.
    assert second.fingerprint() == note_step("tw-test/second", value=2, after=first).fingerprint()
    assert second.fingerprint() != note_step("tw-test/second", value=3, after=first).fingerprint()


def test_resources_travel_with_the_step_and_stay_out_of_its_identity():
    local = note_step("tw-test/r")
    tpu = note_step("tw-test/r", resources=ResourceConfig.with_tpu("v5p-8"))
    cpu = note_step("tw-test/r", resources=ResourceConfig.with_cpu())
    gpus = [note_step("tw-test/r", resources=ResourceConfig.with_gpu("H100", count=n)) for n in (1, 8)]
    described = [describe_resources(h) for h in (local, tpu, cpu, *gpus)]
    assert described == ["local process", "tpu v5p-8", "cpu", "gpu H100", "gpu H100 x8"]
    assert local.fingerprint() == tpu.fingerprint() == cpu.fingerprint() == gpus[1].fingerprint()


def test_a_failing_step_prints_one_line_and_keeps_its_traceback_in_the_log(monkeypatch, tmp_path, capfd):
    monkeypatch.setenv("MARIN_PREFIX", str(tmp_path))
    h = note_step("tw-test/broken", broken, value=7)
    assert main([h], "test", ["--run"]) == 2
    err = capfd.readouterr().err
    log = tmp_path / "tw-test/broken/2026.01.01" / FAILURE_LOG
    assert "error: step tw-test/broken" in err and f"ValueError: boom 7; traceback in {log}" in err
    assert "Traceback" not in err
    text = log.read_text()
    assert text.startswith("Traceback") and "in broken" in text and "ValueError: boom 7" in text
    assert [(r["attempts"], r["finished"]) for r in run_walltimes(str(tmp_path), "2026.01.01")] == [(1, False)]


def test_accelerator_steps_are_refused_off_the_cluster(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "MARIN_PREFIX"} | {"HOME": str(tmp_path)}
    r = subprocess.run(
        [sys.executable, "experiments/sft_echo_1m.py", "--run"], capture_output=True, text=True, cwd=REPO_ROOT, env=env
    )
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: refusing to run 1 accelerator step(s) on this machine")
    assert "checkpoints/terminalworld/full-1M (tpu v5p-32)" in lines[0] and "iris" in lines[0] and "--local" in lines[0]
    assert not any(tmp_path.iterdir())


@dataclass(frozen=True)
class _Shape:
    width: int
    depth: int = 2


@dataclass(frozen=True)
class _Recipe:
    version: str = "2026.01.01"
    size: int = 10
    rate: float = 1e-3
    arms: tuple[str, ...] = ("a", "b")
    shape: _Shape = field(default_factory=lambda: _Shape(width=8))  # no class default for width


def test_a_recipe_is_parsed_with_draccus_flags_dotted_and_yaml(tmp_path):
    assert parse_recipe(_Recipe, []) == _Recipe()
    r = parse_recipe(_Recipe, ["--size", "80", "--shape.width", "64", "--arms", "[b]"])
    assert (r.size, r.shape, r.arms, r.rate) == (80, _Shape(width=64, depth=2), ("b",), 1e-3)
    config = tmp_path / "r.yaml"
    config.write_text("size: 5\nshape:\n  depth: 7\n")
    from_yaml = parse_recipe(_Recipe, ["--config_path", str(config)])
    assert (from_yaml.size, from_yaml.shape) == (5, _Shape(width=8, depth=7))
    assert parse_recipe(_Recipe, ["--config_path", str(config), "--size", "6"]).size == 6  # flags win


def test_an_overridden_recipe_gets_its_own_version(tmp_path):
    assert parse_recipe(_Recipe, []).version == "2026.01.01"
    a, b = parse_recipe(_Recipe, ["--size", "80"]), parse_recipe(_Recipe, ["--size", "81"])
    assert re.fullmatch(r"2026\.01\.01\.\d{8}", a.version) and a.version != b.version
    assert parse_recipe(_Recipe, ["--size", "80"]).version == a.version  # the same override resumes
    config = tmp_path / "r.yaml"
    config.write_text("size: 80\n")
    assert parse_recipe(_Recipe, ["--config_path", str(config)]).version == a.version
    assert parse_recipe(_Recipe, ["--size", "80", "--version", "2026.02.01"]).version == "2026.02.01"
    assert parse_recipe(_Recipe, ["--size", "80", "--version", "x-dev"]).version == "x-dev"
    assert overrides(a, _Recipe()) == [f"version: '2026.01.01' -> '{a.version}'", "size: 10 -> 80"]


def test_bad_recipe_flags_exit_with_usage(tmp_path, capsys):
    for argv in (["--sise", "3"], ["--size", "many"], ["--config_path", str(tmp_path / "missing.yaml")]):
        with pytest.raises(SystemExit) as e:
            parse_recipe(_Recipe, argv)
        assert e.value.code == 2
        assert "error" in capsys.readouterr().err


def test_a_preset_named_on_the_command_line_is_the_first_layer(capsys):
    presets = {"small": _Recipe(), "big": _Recipe(size=99)}
    seen = []

    def targets(r):
        seen.append(r)
        return []

    assert main(targets, "x", ["--preset", "big", "--rate", "0.5"], recipe=_Recipe, presets=presets) == 0
    assert main(targets, "x", ["--rate", "0.5"], recipe=_Recipe, presets=presets) == 0
    assert [(r.size, r.rate) for r in seen] == [(99, 0.5), (10, 0.5)]
    with pytest.raises(SystemExit) as e:
        main(targets, "x", ["--preset", "huge"], recipe=_Recipe, presets=presets)
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1 and "argument --preset: invalid choice: 'huge'" in err


def test_the_demo_plan_reflects_an_override(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("MARIN_PREFIX", str(tmp_path))
    demo = load_experiment("local_demo")

    def targets(d):
        g = demo.build(d)
        return [g.report, g.eval_sets]

    assert main(targets, "demo", [], recipe=demo.Demo) == 0
    pinned = capsys.readouterr().out
    assert "terminalworld/corpus/recorded@2026.12.03\n" in pinned and "overridden" not in pinned
    assert main(targets, "demo", ["--trajectories", "80", "--tiny.hidden_dim", "64"], recipe=demo.Demo) == 0
    out = capsys.readouterr().out
    version = re.search(r"terminalworld/corpus/recorded@(2026\.12\.03\.\d{8})\n", out).group(1)
    assert out.startswith(f"recipe Demo, overridden: version: '2026.12.03' -> '{version}'; trajectories: 160 -> 80;")
    assert "@2026.12.03\n" not in out  # every artifact of the overridden recipe has its version
    assert '"trajectories": 80' in out and '"hidden_dim": 64, "intermediate_dim": 96' in out
    assert f"output:    {tmp_path}/terminalworld/corpus/recorded/{version}\n" in out


def test_every_experiment_recipe_parses_with_draccus():
    for name, cls in (("local_demo", "Demo"), ("echo_local", "EchoLocal"), ("pilot", "Pilot")):
        recipe = getattr(load_experiment(name), cls)
        assert parse_recipe(recipe, []) == recipe()
        assert "recipe=" + cls in (REPO_ROOT / "experiments" / f"{name}.py").read_text()


def test_the_pilot_recipe_takes_nested_flags_and_its_gpu_preset_has_its_own_version():
    pilot = load_experiment("pilot")
    cpu = parse_recipe(pilot.Pilot, [])
    assert cpu == pilot.PRESETS["cpu"] and cpu.version == "2026.12.07.1"
    turns = parse_recipe(pilot.Pilot, ["--harness.max_turns", "8"])
    assert turns.harness == replace(cpu.harness, max_turns=8) and turns.version != cpu.version
    assert re.fullmatch(r"2026\.12\.07\.\d{8}", turns.version)
    chosen, rest = pilot.PRESETS["gpu"], ["--harness.max_turns", "8"]
    gpu = parse_recipe(pilot.Pilot, [], default=chosen)
    assert replace(gpu, version=chosen.version) == chosen  # the preset is the first layer
    assert gpu.version not in (cpu.version, turns.version) and re.fullmatch(r"2026\.12\.07\.\d{8}", gpu.version)
    both = parse_recipe(pilot.Pilot, rest, default=chosen)
    assert (both.harness.max_turns, both.seq_len) == (8, 8192) and both.version not in (gpu.version, turns.version)
    assert parse_recipe(pilot.Pilot, [], default=chosen).version == gpu.version  # the same preset resumes
    assert f"`{gpu.version}`" in (REPO_ROOT / "README.md").read_text()  # the version the README names


def test_the_pilot_command_line_overrides_its_recipe(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "MARIN_PREFIX"} | {"MARIN_PREFIX": str(tmp_path)}
    argv = [
        sys.executable,
        "experiments/pilot.py",
        "--preset",
        "gpu",
        "--trajectories",
        "80",
        "--harness.max_turns",
        "8",
    ]
    r = subprocess.run(argv, capture_output=True, text=True, cwd=REPO_ROOT, env=env)
    assert r.returncode == 0, r.stderr
    first = r.stdout.splitlines()[0]
    assert first.startswith("recipe Pilot, overridden: version: '2026.12.07.1' -> '2026.12.07.")
    assert (
        "trajectories: 320 -> 80" in first
        and "harness.max_turns: 3 -> 8" in first
        and "seq_len" not in first  # both presets train 8,192
    )
    assert "1 GPU (H200)" in r.stdout  # the cost table still comes before the plan
    assert "@2026.12.07.1\n" not in r.stdout and '"trajectories": 80' in r.stdout and '"max_turns": 8' in r.stdout
    assert not any(tmp_path.iterdir())


def test_the_experiment_rows_name_flags_that_help_lists():
    """Each `python experiments/X.py` row of the commands table (docs/manual/running.md) shows flags its `--help`
    lists: the launch flags as spelled, `--FIELD` where a recipe has fields, `--demo.FIELD` where
    it has a nested `demo`."""
    running = (REPO_ROOT / "docs" / "manual" / "running.md").read_text()
    rows = [line.split("`")[1] for line in running.splitlines() if line.startswith("| `python experiments/")]
    assert len(rows) >= 8
    for row in rows:
        name = re.match(r"python experiments/(\w+)\.py", row).group(1)
        source = (REPO_ROOT / "experiments" / f"{name}.py").read_text()
        named = re.search(r"main\(.*recipe=([A-Z]\w*)", source)
        module = load_experiment(name) if named else None
        recipe = getattr(module, named.group(1)) if module else None
        presets = (
            getattr(module, m.group(1)) if module and (m := re.search(r"main\(.*presets=([A-Z]\w*)", source)) else None
        )
        out = io.StringIO()
        with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as e:
            parse_command_line(["--help"], name, recipe=recipe, presets=presets)
        assert e.value.code == 0
        listed = set(re.findall(r"(?<![\w-])--[a-z][\w.-]*", out.getvalue().split("\n\n", 1)[0]))  # the usage
        launch = {"--run", "--local", "--preset", "--config_path"}
        for flag in re.findall(r"(?<![\w-])--[A-Za-z][\w.-]*", row):
            if "FIELD" in flag:  # any field of the recipe (or of its nested one)
                assert recipe is not None and any(f.startswith(flag.removesuffix("FIELD")) for f in listed - launch)
            else:
                assert flag in listed, (row, flag)
