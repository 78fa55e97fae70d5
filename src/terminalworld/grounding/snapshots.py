"""Pinned repository snapshots, one per SWE-ZERO instance: the grounding source in production.

A store is a folder (any fsspec URL: `gs://...`, a local path):

    index.json                 {"instances": {ID: {repo, base_commit, archive, sha256, files}}}
    archives/ID.tar.gz         `git archive` of the repository at its base commit

`build_store` clones each instance's repository (`clone_url` formats `{repo}`; GitHub in
production, any git URL in a test) and archives its base commit; the gzip header carries no time,
so the same commit gives the same bytes. An instance already in the index with its archive
present is kept: an interrupted build resumes. `SnapshotSource` reads a store: it checks the
archive's digest, extracts it with tarfile's `data` filter (no absolute paths, no links out, no
devices) and commits it once with fixed identity and dates, so `git status` and `git diff` in the
shadow start clean, as in the instance's container.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
import subprocess
import tarfile
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from terminalworld.errors import InputError

INDEX = "index.json"
GITHUB = "https://github.com/{repo}.git"
_SAFE_ID = re.compile(r"[^A-Za-z0-9._-]+")


def archive_name(instance_id: str) -> str:
    """The archive's path inside the store."""
    return f"archives/{_SAFE_ID.sub('_', instance_id)}.tar.gz"


def _join(root: str, rel: str) -> str:
    return root.rstrip("/") + "/" + rel


def _read_index(store: str) -> dict[str, Any]:
    import fsspec

    fs, path = fsspec.core.url_to_fs(_join(store, INDEX))
    if not fs.exists(path):
        return {"instances": {}}
    with fs.open(path, "r") as f:
        return json.load(f)


def _write_atomic(url: str, data: bytes) -> None:
    import fsspec

    fs, path = fsspec.core.url_to_fs(url)
    fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
    tmp = path + ".tmp"
    with fs.open(tmp, "wb") as f:
        f.write(data)
    fs.mv(tmp, path)


def snapshot_bytes(*, repo: str, base_commit: str, clone_url: str = GITHUB) -> tuple[bytes, int]:
    """A gzipped `git archive` of `repo` at `base_commit` (no time in the gzip header) and its file count."""
    with tempfile.TemporaryDirectory(prefix="tw-snap-") as tmp:
        run = {"cwd": tmp, "check": True, "capture_output": True}
        env = {"GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null"}
        import os

        env = {**os.environ, **env}
        subprocess.run(["git", "init", "-q", "clone"], **run, env=env)
        clone = {**run, "cwd": f"{tmp}/clone"}
        subprocess.run(["git", "remote", "add", "origin", clone_url.format(repo=repo)], **clone, env=env)
        try:
            subprocess.run(["git", "fetch", "-q", "--depth", "1", "origin", base_commit], **clone, env=env)
        except subprocess.CalledProcessError:  # a server that refuses fetching by sha: fetch everything
            subprocess.run(["git", "fetch", "-q", "origin"], **clone, env=env)
        tar = subprocess.run(["git", "archive", "--format=tar", base_commit], **clone, env=env).stdout
    with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
        files = sum(1 for m in archive if m.isfile())
    return gzip.compress(tar, mtime=0), files


@dataclass(frozen=True)
class Instance:
    """One SWE-ZERO instance to snapshot: its id, its repository (`owner/name`) and base commit."""

    instance_id: str
    repo: str
    base_commit: str


def read_instances(path: str) -> list[Instance]:
    """Instances from a JSON Lines file of `{instance_id, repo, base_commit}`; a bad line is an
    error naming file and line."""
    import fsspec

    out = []
    with fsspec.open(path, "r") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                d = json.loads(line)
                out.append(Instance(str(d["instance_id"]), str(d["repo"]), str(d["base_commit"])))
            except (json.JSONDecodeError, KeyError, TypeError) as e:
                raise InputError(f"{path}:{n}: not an instance row ({e})") from e
    return out


@dataclass(frozen=True)
class StoreConfig:
    """A snapshot store to build: the instances file (JSON Lines of `{instance_id, repo,
    base_commit}`), the store's folder (any fsspec URL) and where each repository is cloned from."""

    instances: str
    store: str
    clone_url: str = GITHUB


def build_store_from(cfg: StoreConfig) -> dict[str, Any]:
    """`build_store` of the instances in `cfg.instances` (a bad line is an error naming it)."""
    return build_store(instances=read_instances(cfg.instances), store=cfg.store, clone_url=cfg.clone_url)


def build_store(*, instances: Iterable[Instance], store: str, clone_url: str = GITHUB) -> dict[str, Any]:
    """Snapshot every instance not yet in the store; the index is rewritten after each, so a
    rerun resumes. Returns the index."""
    import fsspec
    from tqdm import tqdm

    index = _read_index(store)
    todo = list(instances)
    for inst in tqdm(todo, desc="snapshots", unit="instance"):
        entry = index["instances"].get(inst.instance_id)
        if entry and entry["base_commit"] == inst.base_commit:
            fs, path = fsspec.core.url_to_fs(_join(store, entry["archive"]))
            if fs.exists(path):
                continue
        data, files = snapshot_bytes(repo=inst.repo, base_commit=inst.base_commit, clone_url=clone_url)
        name = archive_name(inst.instance_id)
        _write_atomic(_join(store, name), data)
        index["instances"][inst.instance_id] = {
            "repo": inst.repo,
            "base_commit": inst.base_commit,
            "archive": name,
            "sha256": hashlib.sha256(data).hexdigest(),
            "files": files,
        }
        _write_atomic(_join(store, INDEX), json.dumps(index, indent=1, sort_keys=True).encode())
    return index


@dataclass
class SnapshotSource:
    """The grounding source over a snapshot store, by `instance_id`."""

    store: str
    _index: dict[str, Any] | None = field(default=None, repr=False)

    def index(self) -> dict[str, Any]:
        """The store's index (read once)."""
        if self._index is None:
            self._index = _read_index(self.store)["instances"]
        return self._index

    def has(self, row: dict[str, Any]) -> bool:
        """Whether the store holds `row`'s instance."""
        return str(row.get("instance_id")) in self.index()

    def materialize(self, row: dict[str, Any], dest: Path) -> None:
        """The instance's repository at its base commit, with one fixed commit."""
        import fsspec

        from terminalworld.env.codetrees import git

        entry = self.index()[str(row["instance_id"])]
        with fsspec.open(_join(self.store, entry["archive"]), "rb") as f:
            data = f.read()
        if hashlib.sha256(data).hexdigest() != entry["sha256"]:
            raise InputError(f"{self.store}: the archive of {row['instance_id']} does not match its digest")
        dest.mkdir(parents=True)
        with tarfile.open(fileobj=io.BytesIO(gzip.decompress(data))) as tar:
            tar.extractall(dest, filter="data")
        git(dest, "init", "-q", "-b", "main")
        git(dest, "add", "-A")
        git(dest, "commit", "-q", "--allow-empty", "-m", f"Snapshot {entry['repo']}@{entry['base_commit']}")
