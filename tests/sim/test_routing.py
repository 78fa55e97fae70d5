"""The hybrid router's table on the ten probe families (their real commands), on every command of
the real SWE-ZERO fixture and on the real mini-swe-agent and mini-coder rows (which execute code),
and on the shell forms that decide a route (pipes, heredocs, wrappers, redirections)."""

import pytest

from terminalworld.core.formats import load_trajectories
from terminalworld.core.routing import family, route, simple_commands
from terminalworld.core.trajectories import extract_command

# One real command of each probe family (as sim.probes writes them), its family and route.
PROBE_COMMANDS = [
    ("ls", "ls -la deepdiff/docstrings", "navigation"),
    ("wc", "wc -l humanfriendly/compat.py", "read"),
    ("grep", 'grep -n "parse_unquoted_value" dotenv/parser.py', "read"),
    ("range", "sed -n '25,35p' smmap/test/lib.py", "read"),
    ("cat", "cat sniffio/__init__.py", "read"),
    ("git_status", "git status", "navigation"),
    ("git_diff", "git diff", "navigation"),
    ("missing_file", "head -n 20 pytimeparse/tests/testdayclock_helpers.py", "read"),
    ("traceback", "python3 -c 'import etils.epath.resource_utils; etils.epath.resource_utils.f(None)'", "execution"),
    ("test_summary", 'python3 -m unittest -v test_tags_probe.py 2>&1 | grep -v "^Ran "', "execution"),
]


@pytest.mark.parametrize(("probe_family", "command", "expected"), PROBE_COMMANDS)
def test_every_probe_family_routes_as_declared(probe_family, command, expected):
    assert family(command) == expected
    assert route(command) == ("generated" if probe_family in ("traceback", "test_summary") else "exact")


def test_the_probe_generator_covers_the_ten_families():
    from terminalworld.sim.probes import FAMILIES

    assert {f for f, _, _ in PROBE_COMMANDS} == set(FAMILIES)


def _commands(path) -> list[str]:
    return [extract_command(t.action) or "" for traj in load_trajectories(str(path)) for t in traj.turns]


def test_real_swe_zero_commands_are_all_served_exactly(fixtures):
    # SWE-ZERO is execution-free: its agents read, navigate and edit, so the shadow answers all of it.
    commands = _commands(fixtures / "adp_swe-zero-12m" / "sample_raw.json")
    assert len(commands) == 45
    families = {c: family(c) for c in commands}
    assert families["rm example/cmd/injection.go"] == "edit"
    assert families["sed -i '/injectionCmd/d' example/cmd/root.go"] == "edit"
    assert families['grep -r "injection" . --include="*.go" || echo "No injection found in tests"'] == "read"
    assert families['find . -type f -name "*.py" | grep -E "(main|cmd|cli)" | head -10'] == "navigation"
    assert families["ls -la example/cmd/_test/"] == "navigation"
    assert all(route(c) == "exact" for c in commands)


def test_real_agent_rows_that_run_code_are_generated(fixtures):
    commands = _commands(fixtures / "mini-swe-agent_b6984ac5" / "github_issue.traj.json")
    commands += _commands(fixtures / "adp-fork_mini-coder" / "sample_raw.json")
    generated = [c for c in commands if route(c) == "generated"]
    assert "python3 tests/missing_colon.py" in generated
    assert any(c.startswith('python -c "import bleach') for c in generated)
    assert all(c.startswith("python") or not c for c in generated)  # nothing else leaves the shadow
    assert family("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached") == "edit"
    heredoc = next(c for c in commands if c.startswith("cat > tests/missing_colon.py << 'EOF'"))
    assert family(heredoc) == "edit"  # the heredoc's body (Python source) is data, not commands


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("timeout 10 pytest -x tests", "execution"),
        ("FOO=1 make test", "execution"),
        ("cd src && ls", "navigation"),
        ("cat $(find . -name '*.cfg')", "read"),
        ("cat `which python3`", "read"),
        ("find . -name '*.py' -exec python3 {} \\;", "execution"),
        ("find . -name '*.py' | xargs grep -n foo", "navigation"),
        ("echo hi > notes.txt", "edit"),
        ("ls missing 2>/dev/null || echo none", "navigation"),
        ("grep -rn foo . 2>&1 | head", "read"),
        ("sed --in-place 's/a/b/' f", "edit"),
        ("frobnicate --all", "unknown"),
        ("", "unknown"),
        ("cat 'unterminated", "read"),
    ],
)
def test_shell_forms(command, expected):
    assert family(command) == expected


def test_heredoc_bodies_and_fd_duplication_are_not_commands():
    body = "cat <<'EOF' > t.py\nimport os\npython3 -c 'x'\nEOF\nls"
    assert simple_commands(body) == [["cat", "<<EOF", ">", "t.py"], ["ls"]]
    assert simple_commands("make 2>&1 | tee log") == [["make"], ["tee", "log"]]
