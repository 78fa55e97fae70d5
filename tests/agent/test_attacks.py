"""Attacks on the grade through a real Harbor job: each scripted agent tries one way to forge its
verdict (the reflog, the instruction's example, planted bytecode, a forged diff), drop its trial
from pass@1 (verifier-folder modes, planted test paths) or flood the host, on a copy of the same
generated task. Every trial ends scored 0, counted in pass@1's denominator, with the host's own
diff and capped logs."""

import base64
import json
import shutil
import tomllib

from terminalworld.agent.evaluate import AgentEvalConfig, agent_eval
from terminalworld.core.trajectories import SUBMIT_SENTINEL
from terminalworld.tasks.layout import DROPPED_NOTE, VERIFIER_BYTES, VERIFIER_FILES
from tests.tasks.test_forgery import GATES, PLANT, _hard_coded, _original

SUBMIT = f"THOUGHT: done.\n\n```bash\necho {SUBMIT_SENTINEL}\n```"


def _bash(command: str) -> str:
    return f"THOUGHT: try.\n\n```bash\n{command}\n```"


def _payload(path: str, code: str) -> str:
    """A command that makes the bug's module run `code` when the verifier imports it."""
    lines = "\\n".join(["import os", "try:", f"    {code}", "except Exception:", "    pass", ""])
    return f"printf '{lines}' | cat - {path} > /tmp/m && cat /tmp/m > {path}"


def test_no_agent_action_forges_or_drops_its_grade(generated_tasks, tmp_path):
    entry = json.loads((generated_tasks / "manifest.json").read_text())["tasks"][0]
    source = generated_tasks / entry["task_id"]
    path = tomllib.loads((source / "task.toml").read_text())["metadata"]["path"]
    flood = '[open(f"/logs/verifier/flood{i}", "wb").write(bytes(60 << 20)) for i in range(7)]'
    forge = 'open("/logs/verifier/submission.diff", "w").write("FORGED")'
    example = next(c for c in json.loads((source / "tests" / "cases.json").read_text()) if c["kind"] == "FAIL_TO_PASS")
    fixed = base64.b64encode(_original(entry)).decode()
    attacks = {
        "reflog": ["git checkout HEAD@{1} -- . ; git checkout ORIG_HEAD -- ."],
        "verifier-555": ["chmod 555 /logs/verifier"],
        "verifier-000": ["chmod 000 /logs/verifier /logs"],
        "tests-sh-folder": ["mkdir -p /tests/test.sh/x && chmod 000 /tests/test.sh"],
        "check-py-folder": ["mkdir -p /tests/check.py/x && chmod 555 /tests"],
        "log-flood": [_payload(path, flood)],
        "name-flood": [_payload(path, '[os.makedirs(f"/logs/verifier/d{i}/e") for i in range(2000)]')],
        "forged-diff": [_payload(path, forge)],
        "hard-coded": [f"cat >> {path} <<'TW'\n{_hard_coded(entry, example, GATES['hard-coded'])}TW"],
        "argv": [f"cat >> {path} <<'TW'\n{_hard_coded(entry, example, GATES['argv'])}TW"],
        "planted-pyc": [PLANT.format(path=path, fixed=fixed)],
    }
    tasks = tmp_path / "tasks"
    for name in [*attacks, "nop"]:
        shutil.copytree(source, tasks / name, symlinks=True)
    replies = tmp_path / "replies.json"
    replies.write_text(
        json.dumps({name: [*map(_bash, cmds), SUBMIT] for name, cmds in attacks.items()} | {"*": [SUBMIT]})
    )
    out = tmp_path / "out"
    cfg = AgentEvalConfig(tasks=str(tasks), out=str(out), agent="scripted", replies=str(replies), n_concurrent=4)
    s = agent_eval(cfg)
    rows = {r["task"]: r for r in map(json.loads, (out / "trials.jsonl").read_text().splitlines())}
    assert {t: (r["reward"], r["scored"]) for t, r in rows.items()} == {t: (0.0, True) for t in [*attacks, "nop"]}
    assert (s["scored_trials"], s["unscored_trials"], s["pass_at_1"], s["infrastructure_errors"]) == (12, 0, 0.0, 0)
    verifier = {p.parent.parent.name.split("__")[0]: p.parent for p in (out / "jobs").rglob("verifier/reward.txt")}
    # The host's caps held, and said what they dropped; the diff is the host's, not the forged one.
    flooded = verifier["log-flood"]
    assert sum(f.stat().st_size for f in flooded.rglob("*") if f.is_file()) <= VERIFIER_BYTES + (1 << 20)
    assert "flood" in (flooded / DROPPED_NOTE).read_text()
    names = verifier["name-flood"]
    assert len(list(names.rglob("*"))) <= VERIFIER_FILES + 4
    assert "entries left out" in (names / DROPPED_NOTE).read_text()
    forged = (verifier["forged-diff"] / "submission.diff").read_text()
    assert forged.startswith(f"diff --git a/{path} b/{path}\n") and 'open("/logs/verifier/submission.diff"' in forged
    assert (verifier["nop"] / "submission.diff").read_text() == ""
    assert rows["forged-diff"]["process"]["edited_file"] and not rows["nop"]["process"]["diff"]
