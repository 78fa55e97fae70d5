"""Grounding measured for what it is, on hand-made rows with known answers: which sessions edit the
repository before their target (the routing table's edit family), the modes compared on those rows
alone, the read class's targets that stand in their block, and which rows each model trained on
the repos of."""

import gzip
import json
import math

import pytest

from terminalworld.core.routing import edits
from terminalworld.report.grounding import (
    class_table,
    edited_rows,
    edited_sentence,
    edited_table,
    modes_on,
    ppl_by_class,
    seen_rows,
    training_repos,
    unseen_table,
)


@pytest.mark.parametrize(
    ("command", "edit"),
    [
        ("sed -i 's/a/b/' src/x.py", True),
        ("cat > test_x.py <<'EOF'\nprint(1)\nEOF", True),  # a heredoc write
        ("cat <<EOF > t.py\nx = 1\nEOF\npython t.py", True),  # a write, then its execution
        ("git apply fix.diff", True),
        ("mkdir -p a && touch a/b", True),
        ("grep -n foo src/x.py > hits.txt", True),  # a redirection into a file
        ("echo done > /dev/null", False),
        ("sed -n '1,20p' src/x.py", False),
        ("cd src && ls -la", False),
        ("git diff", False),
        ("pytest -q", False),
        ("python -c \"open('f', 'w').write('x')\"", False),  # inside an interpreter: not seen
    ],
)
def test_an_edit_is_any_simple_command_of_the_edit_family(command, edit):
    assert edits(command) is edit


def _action(command: str) -> str:
    return f"THOUGHT: next.\n\n```bash\n{command}\n```"


def _heldout(instance_id: str, repo: str, commands: list[str], target: str = "cat src/x.py") -> dict:
    return {
        "instance_id": instance_id,
        "repo": repo,
        "system": "You are a helpful assistant.",
        "task": "Fix the bug.",
        "prefix": [
            [_action(c), f"Observation: <returncode>0</returncode>\n<output>\nok {k}\n</output>"]
            for k, c in enumerate(commands)
        ],
        "target_cmd": _action(target),
        "target_env": "Observation: <returncode>0</returncode>\n<output>\nx = 1\n</output>",
    }


ROWS = [
    _heldout("reads", "pypi/a", ["ls", "cat README.md", "grep -rn foo ."]),
    _heldout("sed", "pypi/b", ["ls", "sed -i 's/x = 2/x = 1/' src/x.py", "git diff"]),
    _heldout("heredoc", "pypi/c", ["cat > tests/test_x.py <<'EOF'\nimport x\nEOF", "python -m pytest -q"]),
    _heldout("apply", "pypi/d", ["ls", "git apply fix.diff"]),
    _heldout("target-edits", "pypi/e", ["ls", "cat src/x.py"], target="sed -i 's/1/2/' src/x.py"),
    _heldout("interpreter", "pypi/a", ["python -c \"open('f', 'w').write('x')\""]),
]


def test_the_rows_whose_sessions_edit_before_the_target():
    """The edits before the target count (by their context turn); the target's own edit does not,
    nor a write inside an interpreter, which the table cannot see."""
    assert edited_rows(ROWS) == {"sed": [1], "heredoc": [0], "apply": [1]}


def _score(instance_id, ppl, n=10, **kw):
    return {"instance_id": instance_id, "ppl": ppl, "sum_nll": math.log(ppl) * n, "n_target_tokens": n, **kw}


def test_the_modes_on_the_edited_rows_alone_are_paired():
    """Only the edited rows that every compared mode scored are compared; hybrid is left out (it
    serves read targets exactly, another row set); replayed's wins and differing blocks are counted."""
    rows = {
        "none": [_score("sed", 8.0), _score("heredoc", 4.0), _score("apply", 2.0), _score("reads", 100.0)],
        "retrieved": [
            _score("sed", 2.0, grounding_tokens=50),
            _score("heredoc", 4.0, grounding_tokens=20),
            _score("apply", 1.5, grounding_tokens=30),
            _score("reads", 1.0),
        ],
        "replayed": [
            _score("sed", 1.0, grounding_tokens=52),
            _score("heredoc", 4.0, grounding_tokens=20),
            {"instance_id": "apply", "skipped": "empty target observation"},
            _score("reads", 1.0),
        ],
        "hybrid": [{"instance_id": "sed", "route": "exact", "n_target_tokens": 10}],
    }
    result = modes_on(rows, edited_rows(ROWS))
    assert (result["rows"], result["scored"], result["ids"]) == (3, 2, ["heredoc", "sed"])
    assert list(result["modes"]) == ["none", "retrieved", "replayed"]
    assert result["modes"]["none"]["ppl"] == pytest.approx(math.sqrt(8.0 * 4.0))
    assert result["modes"]["retrieved"]["median_ppl"] == pytest.approx(3.0)
    assert result["modes"]["replayed"] == {"tokens": 20, "ppl": pytest.approx(2.0), "median_ppl": 2.5}
    assert (result["replayed_below_retrieved"], result["blocks_differ"]) == (1, 1)
    table = edited_table(result).splitlines()
    assert table[2] == "| none | 2 | 20 | 5.66 | 6.00 |" and table[4] == "| replayed | 2 | 20 | 2.00 | 2.50 |"
    assert edited_sentence(result, 6) == (
        "3 of the 6 rows' sessions edit the repository before the target; 2 of them are scored in every mode. "
        "Replayed scores below retrieved on 1 of them, and its block differs in length from retrieved's on 1."
    )


def test_no_edited_rows_is_said_so():
    result = modes_on({"retrieved": [_score("reads", 1.0)], "replayed": [_score("reads", 1.0)]}, [])
    assert result["scored"] == 0 and result["modes"]["retrieved"]["ppl"] is None
    assert edited_sentence(result, 24).startswith("0 of the 24 rows' sessions edit the repository before the target:")


def test_the_read_class_counts_its_targets_in_the_block():
    """Rows that record whether their target stands in the block (the scorer's `target_in_block`)
    show it per class; rows made before the field show nothing."""
    rows = {
        "retrieved": [
            _score("r1", 1.1, target_class="read", target_in_block=True),
            _score("r2", 3.0, target_class="read", target_in_block=False),
            _score("p1", 9.0, target_class="predict", target_in_block=False),
        ],
        "none": [_score("r1", 4.0, target_class="read"), _score("p1", 9.0, target_class="predict")],
    }
    table = ppl_by_class(rows)
    assert table["retrieved"]["read"]["in_block"] == 1 and table["retrieved"]["predict"]["in_block"] == 0
    assert "in_block" not in table["none"]["read"]
    line = next(x for x in class_table(table).splitlines() if x.startswith("| read "))
    assert line.endswith("| 1.82 (2); 1 verbatim in block | 4.00 (1) |")


def _subset(path, repos: list[str | None]) -> str:
    """A training subset in SWE-ZERO's format: one real-shaped row per repo, in order (None: a bad line)."""
    lines = []
    for k, repo in enumerate(repos):
        if repo is None:
            lines.append("{not json")
            continue
        messages = [
            {"role": "system", "content": "s"},
            {"role": "user", "content": "task"},
            {"role": "assistant", "content": _action("ls")},
            {"role": "user", "content": "Observation: a"},
        ]
        lines.append(json.dumps({"instance_id": f"t{k}", "repo": repo, "messages": messages}))
    path.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    return str(path)


def test_unseen_is_per_model(tmp_path):
    """A model trained on a subset (records skip.. of it, as a tokenize step reads them) has seen the
    held-out rows of its repos; each model's training includes its init's."""
    sft = _subset(tmp_path / "subset-3.jsonl.gz", ["pypi/b", "pypi/x", "pypi/c"])
    bigger = _subset(tmp_path / "subset-6.jsonl.gz", ["pypi/b", "pypi/x", None, "pypi/a", "pypi/y", "pypi/a"])
    assert training_repos(sft) == {"pypi/b", "pypi/x", "pypi/c"}
    pretrain = training_repos(bigger, skip=3)  # the rows after the SFT ones (the bad line counts as a record)
    assert pretrain == {"pypi/a", "pypi/y"}
    repos = {"stock": set(), "base": pretrain, "full": pretrain | training_repos(sft)}
    seen = seen_rows(ROWS, repos)
    assert seen == {"stock": [], "base": ["interpreter", "reads"], "full": ["heredoc", "interpreter", "reads", "sed"]}
    assert seen_rows(ROWS, repos, ids=["reads", "sed", "apply"])["full"] == ["reads", "sed"]
    assert unseen_table(seen, len(ROWS)).splitlines()[2:] == [
        "| stock | 0 of 6 | 6 |",
        "| base | 2 of 6 | 4 |",
        "| full | 4 of 6 | 2 |",
    ]
