"""A step's rows survive the way its process ends: on a local prefix they are written in the output
folder itself (a SIGKILL loses nothing), on a remote one the copy is put back at SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import fsspec

from terminalworld.pipeline.step import local_copy

# Appends one row, says so, and waits to be ended; `DUMP` (remote case) records what the bucket
# holds after every other cleanup has run (registered first, so it runs last).
CHILD = textwrap.dedent(
    """
    import json, sys, time
    import fsspec
    from terminalworld.core import scratch
    from terminalworld.pipeline.step import local_copy

    out, dump = sys.argv[1], sys.argv[2]
    scratch.install_cleanup()
    if dump != "-":
        def record():
            fs = fsspec.filesystem("memory")
            rows = {p: fs.cat(p).decode() for p in fs.find(out.removeprefix("memory://"))}
            with open(dump, "w") as f:
                json.dump(rows, f)
        scratch.at_termination(record)
    with local_copy(out) as folder:
        with open(folder + "/rows.jsonl.partial", "a") as f:
            f.write('{"instance_id": "a"}\\n')
            f.flush()
        print(folder, flush=True)
        time.sleep(120)
    """
)


def _run_until_written(out: str, dump: str, sig: int) -> str:
    """The folder the child wrote in, once the signal `sig` has ended it."""
    child = subprocess.Popen([sys.executable, "-c", CHILD, out, dump], stdout=subprocess.PIPE, text=True)
    try:
        folder = child.stdout.readline().strip()
        child.send_signal(sig)
        child.wait(timeout=60)
    finally:
        child.kill()
    return folder


def test_a_local_step_writes_in_its_output_folder_and_a_sigkill_loses_no_row(tmp_path):
    out = tmp_path / "probe-eval" / "probe_x" / "v1"
    assert _run_until_written(str(out), "-", signal.SIGKILL) == str(out)
    assert (out / "rows.jsonl.partial").read_text() == '{"instance_id": "a"}\n'


def test_a_remote_copy_is_put_back_at_sigterm(tmp_path):
    dump = tmp_path / "bucket.json"
    folder = _run_until_written("memory://bucket/scores/v1", str(dump), signal.SIGTERM)
    assert folder and not os.path.exists(folder)  # the copy goes with the process
    rows = json.loads(dump.read_text())
    assert rows == {"/bucket/scores/v1/rows.jsonl.partial": '{"instance_id": "a"}\n'}


def test_a_remote_copy_brings_back_what_a_preempted_run_left_and_puts_everything_back():
    fs = fsspec.filesystem("memory")
    fs.pipe("/resume/v1/rows.jsonl.partial", b'{"instance_id": "a"}\n')
    try:
        with local_copy("memory://resume/v1") as folder:
            assert not folder.startswith("memory")
            assert os.path.exists(os.path.join(folder, "rows.jsonl.partial"))
            with open(os.path.join(folder, "rows.jsonl.partial"), "a") as f:
                f.write('{"instance_id": "b"}\n')
            raise KeyboardInterrupt  # a failure still puts the rows back
    except KeyboardInterrupt:
        pass
    assert fs.cat("/resume/v1/rows.jsonl.partial") == b'{"instance_id": "a"}\n{"instance_id": "b"}\n'
    fs.rm("/resume", recursive=True)
