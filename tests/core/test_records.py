"""The reader contract on generated broken files of every accepted format, the output-path check,
and the sweep of temporary files that killed writes leave."""

import gzip
import io
import json
import os
import re
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from terminalworld.core.paths import check_outputs
from terminalworld.core.records import (
    BadLine,
    Record,
    iter_records,
    read_json,
)
from terminalworld.errors import InputError

DEEP = "[" * 100_000 + "]" * 100_000  # past any recursion limit of the JSON parser


@pytest.fixture(scope="module")
def rows(fixtures):
    base = json.loads((fixtures / "adp_swe-zero-12m" / "sample_raw.json").read_text())
    return [{**base[i % 3], "instance_id": f"org{i}__repo-{i}", "repo": f"org{i}/repo"} for i in range(40)]


def jsonl(rows) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in rows)


def parquet(rows) -> bytes:
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), buf)
    return buf.getvalue()


def broken_files(rows, folder) -> dict[str, tuple[str, int]]:
    """Every way a container arrives broken, as {name: (path, complete records before the
    break)}: the count the error must be past."""
    text = jsonl(rows)
    gz = gzip.compress(text, mtime=0)
    zst = zstandard.ZstdCompressor().compress(text)
    pq_bytes = parquet(rows)
    files = {
        "not-gzip.jsonl.gz": (text, 0),
        "truncated.jsonl.gz": (gz[: len(gz) // 2], 1),
        "trailing-garbage.jsonl.gz": (gz + b"trailing bytes", len(rows)),
        "crc.jsonl.gz": (gz[:-8] + bytes(4) + gz[-4:], 1),
        "not-zstd.jsonl.zst": (text, 0),
        "bad-frame.jsonl.zst": (zst[:20] + bytes(64) + zst[84:], 0),
        "truncated.jsonl.zst": (zst[: len(zst) // 2], 0),
        "no-footer.parquet": (pq_bytes[:-12], 0),
        "not-parquet.parquet": (text, 0),
        "not-gzip.json.gz": (text, 0),
    }
    out = {}
    for name, (data, at_least) in files.items():
        path = folder / name
        path.write_bytes(data)
        out[name] = (str(path), at_least)
    return out


def test_every_broken_container_is_one_input_error_naming_file_and_position(rows, tmp_path):
    for name, (path, at_least) in broken_files(rows, tmp_path).items():
        seen = 0
        with pytest.raises(InputError) as e:
            for item in iter_records(path):
                assert isinstance(item, Record), name  # a container failure is never a counted line
                seen += 1
        message = str(e.value)
        assert message.startswith(f"{path}: "), message
        assert "\n" not in message
        assert seen >= at_least if at_least <= 1 else seen == at_least, (name, seen)
        if ".jsonl" in name:
            assert f"after line {seen} (byte " in message, message
        elif name.endswith(".parquet"):
            assert f"after row {seen}" in message, message


def test_truncated_gzip_reports_the_last_complete_line_and_its_offset(rows, tmp_path):
    text = jsonl(rows)
    gz = gzip.compress(text, mtime=0)
    path = tmp_path / "t.jsonl.gz"
    path.write_bytes(gz[: len(gz) * 3 // 4])
    got = []
    with pytest.raises(InputError) as e:
        got.extend(iter_records(str(path)))
    n, offset = map(int, re.search(r"after line (\d+) \(byte (\d+) of its text\)", str(e.value)).groups())
    assert n == len(got) > 0 and offset == len(b"".join(text.splitlines(keepends=True)[:n]))
    assert [r.value for r in got] == rows[:n]  # every complete record before the break was read


def test_deep_nesting_and_bad_bytes_are_counted_lines(rows, tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_bytes(jsonl(rows[:2]) + DEEP.encode() + b"\n\xff\xfe\n" + b'{"a": \n' + jsonl(rows[2:3]))
    items = list(iter_records(str(path)))
    assert [type(i).__name__ for i in items] == ["Record", "Record", "BadLine", "BadLine", "BadLine", "Record"]
    assert items[2] == BadLine(str(path), 3, "invalid JSON: nested too deeply to parse")
    assert items[3].line == 4 and items[3].reason.startswith("undecodable bytes")
    assert items[4].line == 5 and items[4].reason.startswith("invalid JSON")
    whole = tmp_path / "deep.json"
    whole.write_text(DEEP)
    assert list(iter_records(str(whole))) == [BadLine(str(whole), 1, "invalid JSON: nested too deeply to parse")]


def test_read_json_names_the_file(tmp_path):
    (tmp_path / "bin.json").write_bytes(b"\x89PNG\x00\xff")
    (tmp_path / "deep.json").write_text(DEEP)
    for name, pattern in [("bin.json", "undecodable"), ("deep.json", "nested too deeply"), ("none.json", "cannot")]:
        with pytest.raises(InputError, match=pattern) as e:
            read_json(str(tmp_path / name))
        assert str(tmp_path / name) in str(e.value)
    with pytest.raises(InputError, match="cannot be read"):
        read_json(str(tmp_path))


def _out(flag, path, kind="file", companions=()):
    return (flag, str(path), kind, tuple(companions))


def test_outputs_never_touch_inputs(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.jsonl.gz").write_bytes(b"")
    (tmp_path / "link").symlink_to(corpus)
    glob = ("--corpus", str(corpus / "*.jsonl.gz"))
    one = ("--train", str(corpus / "a.jsonl.gz"))
    refused = {
        "the input itself": ([_out("--out", corpus / "a.jsonl.gz")], [one]),
        "through a symlink": ([_out("--out", tmp_path / "link" / "a.jsonl.gz")], [one]),
        "through ..": ([_out("--out", corpus / "x" / ".." / "a.jsonl.gz")], [one]),
        "a companion": ([_out("--out", corpus / "a", companions=[".jsonl.gz"])], [one]),
        "matched by the glob": ([_out("--out", corpus / "b.jsonl.gz")], [glob]),
        "a folder the glob reaches": ([_out("--out", corpus, "dir")], [glob]),
        "a folder reached by **": ([_out("--out", corpus / "deep" / "er", "dir")], [("--in", f"{corpus}/**/*.gz")]),
        "a folder holding an input": ([_out("--out", tmp_path, "dir")], [one]),
        "inside an input folder": ([_out("--out", corpus / "sub", "dir")], [("--tasks", str(corpus))]),
        "a folder where a file goes": ([_out("--out", corpus)], []),
        "a file where a folder goes": ([_out("--out", corpus / "a.jsonl.gz", "dir")], []),
        "under a file": ([_out("--out", corpus / "a.jsonl.gz" / "x.jsonl")], []),
    }
    for case, (outputs, inputs) in refused.items():
        with pytest.raises(InputError) as e:
            check_outputs(outputs, inputs)
        assert str(e.value).startswith("--out "), case
    # Beside the corpus but out of the glob's reach: allowed, as is a missing folder to be made.
    check_outputs([_out("--out", corpus / "subsets", "dir"), _out("--out", corpus / "h.jsonl")], [glob, one])
    check_outputs([_out("--out", tmp_path / "new" / "deeper" / "h.jsonl")], [glob])
    check_outputs([_out("--out", tmp_path / "o")], [("--in", str(tmp_path / "missing-*.jsonl"))])


def _sleeper() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])


def _write(target) -> None:
    """`atomic_output` of `target` in a new process (each process sweeps a folder once)."""
    code = f"from terminalworld.core.records import atomic_output\nwith atomic_output({str(target)!r}) as f: f.write(b'done')"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_reruns_remove_what_killed_writes_left(tmp_path):
    target = tmp_path / "rows.jsonl"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = tmp_path / f".rows.jsonl.{dead.stdout.strip()}.abcdefgh.tmp"
    stale.write_bytes(b"half a file")
    live = _sleeper()
    try:
        running = tmp_path / f".rows.jsonl.{live.pid}.ijklmnop.tmp"
        running.write_bytes(b"another writer's file")
        other = tmp_path / ".other.jsonl.1.qrstuvwx.tmp"
        other.write_bytes(b"")
        _write(target)
        assert target.read_bytes() == b"done"
        assert not stale.exists() and running.exists() and other.exists()
    finally:
        live.kill()
        live.wait()
    _write(target)
    assert sorted(os.listdir(tmp_path)) == [".other.jsonl.1.qrstuvwx.tmp", "rows.jsonl"]
