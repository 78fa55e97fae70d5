"""`gitpaths.configured`: what the operator's own git configuration names in a folder, asked of the
host's git. A hooks folder counts with everything under it and with what its symlinks lead to; a
script a value runs, an include target (whatever its condition, and what it includes in turn) and
the folders on the way count alone; refspecs, `safe.directory` naming the folder and a branch's
`remote = .` do not make the whole folder count; git that fails, lists too much or is absent is
told apart in one line."""

import os
import subprocess
from pathlib import Path

import pytest

from terminalworld.env import gitpaths
from terminalworld.errors import InputError


@pytest.fixture
def bare_env(workdir, monkeypatch):
    """No system or global configuration of this host."""
    monkeypatch.setenv("HOME", str(workdir))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", "/dev/null")
    monkeypatch.setenv("GIT_CONFIG_SYSTEM", "/dev/null")
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, timeout=60)


def _configured_repo(repo: Path) -> None:
    _git(repo, "init", "-q")
    for folder in (".husky", "scripts", "main"):
        (repo / folder).mkdir()
    (repo / "scripts/pc.sh").write_text("true\n")
    (repo / ".husky/pre-commit").symlink_to(os.path.join("..", "scripts", "pc.sh"))
    (repo / "evil.cfg").write_text("[core]\n\tsshCommand = sh ./ssh.sh\n[include]\n\tpath = deeper.cfg\n")
    (repo / "deeper.cfg").write_text('[diff "x"]\n\ttextconv = conv/t --flag\n')
    for key, value in [
        ("core.hooksPath", ".husky"),
        ("alias.x", "!./tools/x.sh --flag && true"),
        ("includeIf.onbranch:evil.path", os.path.join("..", "evil.cfg")),  # not active on the current branch
        ("branch.main.remote", "."),
        ("branch.main.merge", "refs/heads/main"),
        ("remote.origin.fetch", "+refs/heads/*:refs/remotes/origin/*"),
        ("safe.directory", str(repo)),
        ("init.defaultBranch", "main"),
    ]:
        _git(repo, "config", "--add", key, value)


def test_what_the_configuration_names_counts(repo, bare_env):
    _configured_repo(repo)
    named = gitpaths.configured(str(repo))
    covered = {
        (".husky",): True,
        (".husky", "post-checkout"): True,  # a hook the command would add
        ("scripts", "pc.sh"): True,  # where a hook's symlink leads
        ("scripts", "other"): False,
        ("tools", "x.sh"): True,  # the alias's script, not there yet
        ("evil.cfg",): True,
        ("ssh.sh",): True,  # named by the include whose condition does not hold now
        ("deeper.cfg",): True,
        ("conv", "t"): True,  # and by what that include includes
        ("main",): True,  # an existing entry a word names counts alone
        ("main", "f"): False,
        ("a.txt",): False,
        ("refs", "heads", "main"): False,
    }
    assert {path: named.covers(path) for path in covered} == covered


def test_a_folder_outside_a_repository_names_nothing(repo, bare_env):
    assert gitpaths.configured(str(repo)) == gitpaths.NOTHING


def test_a_global_configuration_in_the_folder_counts(repo, bare_env, monkeypatch):
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(repo / "global.cfg"))  # not there yet: git would read it
    assert gitpaths.configured(str(repo)).covers(("global.cfg",))


def test_git_that_fails_lists_too_much_or_is_absent(repo, bare_env, monkeypatch):
    _git(repo, "init", "-q")
    with (repo / ".git/config").open("a") as f:
        f.write("[broken\n")
    with pytest.raises(InputError, match=r"^git cannot list the configuration of .* \(exit 128\)$"):
        gitpaths.configured(str(repo))
    _git(repo, "init", "-q", str(repo / "fresh"))
    monkeypatch.setattr(gitpaths, "LISTING_BYTES", 16)
    with pytest.raises(InputError, match="lists more than"):
        gitpaths.configured(str(repo / "fresh"))
    monkeypatch.setenv("PATH", str(repo / "nowhere"))
    assert gitpaths.configured(str(repo / "fresh")) == gitpaths.NOTHING


def test_too_many_named_entries_are_refused(repo, bare_env, monkeypatch):
    _git(repo, "init", "-q")
    for i in range(5):
        _git(repo, "config", f"alias.a{i}", f"!./s{i}/x")
    monkeypatch.setattr(gitpaths, "MAX_NAMED", 6)
    with pytest.raises(InputError, match="names more than 6 entries"):
        gitpaths.configured(str(repo))
