"""The renderer against an independent, character-by-character implementation of the rule."""

import bisect
import json

import numpy as np
import pytest

from terminalworld.core.assets import load_tokenizer
from terminalworld.core.formats import load_trajectories, to_trajectory
from terminalworld.core.render import ARMS, NOBODY, Renderer, build_renderer, token_owners
from terminalworld.core.trajectories import harness_spans
from terminalworld.core.views import agent_messages
from terminalworld.errors import InputError, RenderError
from terminalworld.train.render_rows import RenderConfig, render_file

TOKENIZERS = ["qwen3", "smollm2"]


def reference_owners(tokenizer, messages, exclude_harness):
    """The rule spelled out with plain loops: spans by in-order search, one owner per character,
    then each token by its last character, then one end-of-turn token per message."""
    text = tokenizer.apply_chat_template([{"role": m.role, "content": m.content} for m in messages], tokenize=False)
    char_owner = [NOBODY] * len(text)
    cursor, ends = 0, []
    for i, m in enumerate(messages):
        # Both tokenizers use ChatML: an empty content sits right after its "<|im_start|>role\n".
        at = (
            text.index(m.content, cursor)
            if m.content
            else text.index(f"<|im_start|>{m.role}\n", cursor) + len(m.role) + 13
        )
        excluded = set()
        if exclude_harness and m.kind == "observation":
            for s, e in harness_spans(m.content):
                excluded.update(range(s, e))
        for k in range(len(m.content)):
            if k not in excluded:
                char_owner[at + k] = i
        cursor = at + len(m.content)
        ends.append(cursor)
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    owners = [char_owner[e - 1] if e > s else NOBODY for s, e in enc["offset_mapping"]]
    starts = [s for s, _ in enc["offset_mapping"]]
    for i, end in enumerate(ends):
        j = bisect.bisect_left(starts, end)
        if j < len(owners) and owners[j] == NOBODY:
            owners[j] = i
    roles = [messages[o].role if o != NOBODY else "none" for o in owners]
    return enc["input_ids"], {
        "assistant": [r == "assistant" for r in roles],
        "user": [r == "user" for r in roles],
        "full": [r in ("assistant", "user") for r in roles],
    }


FIXTURE_FILES = [
    "adp_swe-zero-12m/sample_raw.json",
    "mini-swe-agent/github_issue.traj.json",
    "mini-swe-agent/local.traj.json",
    "mini-swe-agent_b6984ac5/github_issue.traj.json",
    "adp-fork_nebius-swe-agent-trajectories/sample_raw.json",
    "adp_agenttuning_os/sample_raw.json",
    "adp-fork_mini-coder/sample_raw.json",
]


@pytest.mark.parametrize("tokenizer_name", TOKENIZERS)
@pytest.mark.parametrize("exclude_harness", [False, True])
def test_all_arms_equal_the_reference_on_every_token(fixtures, tokenizer_name, exclude_harness):
    tok = load_tokenizer(tokenizer_name)
    renderer = Renderer(tok, exclude_harness_text=exclude_harness)
    n = 0
    for path in FIXTURE_FILES:
        for traj in load_trajectories(str(fixtures / path)):
            r = renderer.render(traj)
            ids, ref = reference_owners(tok, agent_messages(traj), exclude_harness)
            assert r.input_ids.tolist() == ids
            for arm in ARMS:
                assert r.mask(arm).tolist() == ref[arm], (path, traj.instance_id, arm)
            n += 1
    assert n == 17


@pytest.mark.parametrize("tokenizer_name", TOKENIZERS)
def test_sim_view_equals_the_reference(fixtures, tokenizer_name):
    from terminalworld.core.views import sim_messages

    tok = load_tokenizer(tokenizer_name)
    for traj in load_trajectories(str(fixtures / "adp_swe-zero-12m/sample_raw.json")):
        r = Renderer(tok, view="sim").render(traj)
        ids, ref = reference_owners(tok, sim_messages(traj), False)
        assert r.input_ids.tolist() == ids and all(r.mask(a).tolist() == ref[a] for a in ARMS)
        assert r.messages[1].content.startswith(f"Task context:\n{traj.task}\n\nCommand:\nfind . -type f")
        assert [m.role for m in r.messages[1:3]] == ["user", "assistant"] and r.messages[2].kind == "observation"


def test_partition_is_exact_and_system_untrained(fixtures):
    r = Renderer(load_tokenizer("qwen3")).render(
        load_trajectories(str(fixtures / "adp_swe-zero-12m/sample_raw.json"))[0]
    )
    a, b, c = (r.mask(x) for x in ("assistant", "full", "user"))
    assert not (a & c).any() and np.array_equal(a | c, b)
    sys_tokens = r.owner == 0
    assert sys_tokens.sum() > 600 and not b[sys_tokens].any()
    # Every observation's end-of-turn token is trained in the user arm.
    im_end = load_tokenizer("qwen3").convert_tokens_to_ids("<|im_end|>")
    ends = np.flatnonzero(r.input_ids == im_end)
    assert len(ends) == 32 and not b[ends[0]] and c[ends[1::2]].all() and a[ends[2::2]].all()


def _first(r, message, where):
    """The first token owned by `message` (or NOBODY) whose text satisfies `where(start, end)`."""
    return next(
        j for j, ((s, e), o) in enumerate(zip(r.offsets.tolist(), r.owner, strict=True)) if o == message and where(s, e)
    )


def _tamper(r, j, new_owner):
    """A copy of a real render with token j's owner changed by hand."""
    from dataclasses import replace

    owner = r.owner.copy()
    owner[j] = new_owner
    return replace(r, owner=owner)


@pytest.fixture(scope="module")
def qwen3_rendered(fixtures):
    traj = load_trajectories(str(fixtures / "adp_swe-zero-12m/sample_raw.json"))[0]
    tok = load_tokenizer("qwen3")
    return Renderer(tok).render(traj), Renderer(tok, exclude_harness_text=True).render(traj)


def _eot(r, m):
    """Message m's end-of-turn token: the first token starting at or after its content's end."""
    return int(np.searchsorted(r.offsets[:, 0], r.spans[m][1]))


@pytest.mark.parametrize(
    ("case", "why"),
    [
        ("task token given to the next message", "lies in message 1 but is owned by 2"),
        ("system token given to the task", "lies in message 0 but is owned by 1"),
        ("scaffolding token given an owner", "is owned by 1 but is neither its content nor its end of turn"),
        ("observation token owned by nobody", "lies in message 3 but is owned by -1"),
        ("end of turn given to the next message", "is owned by 3 but is neither its content nor its end of turn"),
        ("end of turn owned by nobody", "an end-of-turn token has no owner"),
        ("harness text owned under O'", "is owned by 3 but is neither its content nor its end of turn"),
        ("system message trained as a user turn", "the arms are not"),
    ],
)
def test_partition_check_rejects_inconsistent_ownership(qwen3_rendered, case, why):
    """Hand-made faults in a real Qwen3 render: each one keeps `a | c == b` and `a & c == 0`
    (masks are derived from the same owners), so only a check against the rule itself fails."""
    from dataclasses import replace

    r, echo = qwen3_rendered
    r.check_partition()
    echo.check_partition()
    assert [m.kind for m in r.messages[:4]] == ["system", "task", "action", "observation"]
    task_end = r.spans[1][1]
    if case == "task token given to the next message":
        bad = _tamper(r, _first(r, 1, lambda s, e: e < task_end), 2)
    elif case == "system token given to the task":
        bad = _tamper(r, _first(r, 0, lambda s, e: True), 1)
    elif case == "scaffolding token given an owner":
        # The newline after the task's <|im_end|>: outside every content and not an end of turn.
        bad = _tamper(r, _eot(r, 1) + 1, 1)
    elif case == "observation token owned by nobody":
        bad = _tamper(r, _first(r, 3, lambda s, e: e < r.spans[3][1]), NOBODY)
    elif case == "end of turn given to the next message":
        bad = _tamper(r, _eot(r, 2), 3)
    elif case == "end of turn owned by nobody":
        bad = _tamper(r, _eot(r, 2), NOBODY)
    elif case == "harness text owned under O'":
        j = _first(echo, NOBODY, lambda s, e: s == echo.spans[3][0])  # "Observ", of "Observation: "
        assert echo.text[echo.spans[3][0] :].startswith("Observation: ") and r.owner[j] == 3
        bad = _tamper(echo, j, 3)
    else:
        bad = replace(r, messages=[replace(r.messages[0], role="user"), *r.messages[1:]])
    a, b, c = (bad.mask(x) for x in ("assistant", "full", "user"))
    assert not (a & c).any() and np.array_equal(a | c, b)  # the old check's conditions still hold
    with pytest.raises(RenderError, match=rf"do not partition the tokens: (token \d+ )?{why}"):
        bad.check_partition()


def test_header_newline_merged_with_content_newline_goes_to_the_content():
    tok = load_tokenizer("qwen3")
    traj = to_trajectory(
        {
            "instance_id": "nl",
            "messages": [
                {"role": "system", "content": "s"},
                {"role": "user", "content": "\nleading newline"},
                {"role": "assistant", "content": "ok"},
                {"role": "user", "content": "Observation: x"},
            ],
        },
        "nl",
    )
    r = Renderer(tok).render(traj)
    merged = next(i for i, (s, e) in enumerate(r.offsets.tolist()) if r.text[s:e] == "\n\n")
    assert r.owner[merged] == 1 and r.mask("user")[merged]


def test_qwen3_think_block_on_a_final_assistant_turn_is_scaffolding():
    tok = load_tokenizer("qwen3")
    traj = to_trajectory(
        {
            "instance_id": "t",
            "messages": [
                {"role": "system", "content": "s"},
                {"role": "user", "content": "task"},
                {"role": "assistant", "content": "THOUGHT: go\n\n```bash\nls\n```"},
            ],
        },
        "t",
    )
    r = Renderer(tok).render(traj)
    assert "<think>\n\n</think>\n\n" in r.text
    think = [i for i, (s, e) in enumerate(r.offsets.tolist()) if "think>" in r.text[s:e]]
    assert think and all(r.owner[i] == NOBODY for i in think)
    owned = "".join(r.text[s:e] for (s, e), o in zip(r.offsets.tolist(), r.owner, strict=False) if o == 2)
    assert owned == "THOUGHT: go\n\n```bash\nls\n```<|im_end|>"


def test_empty_observation_owns_its_end_of_turn_token(fixtures):
    traj = load_trajectories(str(fixtures / "mini-swe-agent/local.traj.json"))[0]
    assert traj.turns[-1].observation == ""
    r = Renderer(load_tokenizer("qwen3")).render(traj)
    last = len(r.messages) - 1
    owned = [r.text[s:e] for (s, e), o in zip(r.offsets.tolist(), r.owner, strict=False) if o == last]
    assert owned == ["<|im_end|>"]


def test_template_that_rewrites_content_fails_naming_the_message(fixtures):
    nemotron = load_trajectories(str(fixtures / "adp_nemotron-terminal-corpus/sample_raw.json"))[0]
    with pytest.raises(RenderError, match=r"message 1 \(assistant, action\).*strips <think> reasoning"):
        Renderer(load_tokenizer("qwen3")).render(nemotron)
    trimming = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content | trim }}<|im_end|>\n{% endfor %}"
    traj = load_trajectories(str(fixtures / "mini-swe-agent/local.traj.json"))[0]
    with pytest.raises(RenderError, match="trims whitespace"):
        Renderer(load_tokenizer("qwen3"), chat_template=trimming).render(traj)
    # A message rendered at the very start of the text is found, and the one rewritten is named.
    bare = "{% for m in messages %}{{ m.content if loop.index0 != 2 else m.content | upper }}\n{% endfor %}"
    with pytest.raises(RenderError, match=r"message 2 \(assistant, action\) does not appear verbatim.*transforms"):
        Renderer(load_tokenizer("qwen3"), chat_template=bare).render(traj)


def test_custom_verbatim_template_and_smollm2_chatml(fixtures):
    plain = "{% for m in messages %}### {{ m.role }}:\n{{ m.content }}\n\n{% endfor %}"
    traj = load_trajectories(str(fixtures / "adp_swe-zero-12m/sample_raw.json"))[0]
    r = Renderer(load_tokenizer("smollm2"), chat_template=plain).render(traj)
    r.check_partition()
    # Without an end-of-turn token, each message owns the first token of the next header.
    assert r.mask("full").sum() > r.mask("user").sum() > r.mask("assistant").sum() > 0


def test_exclude_harness_text_drops_only_the_prefix(fixtures):
    tok = load_tokenizer("qwen3")
    traj = load_trajectories(str(fixtures / "adp_swe-zero-12m/sample_raw.json"))[0]
    full, echo = Renderer(tok).render(traj), Renderer(tok, exclude_harness_text=True).render(traj)
    dropped = full.mask("user") & ~echo.mask("user")
    text = "".join(full.text[s:e] for (s, e), d in zip(full.offsets.tolist(), dropped, strict=False) if d)
    assert text == "Observation:" * 15 and np.array_equal(full.mask("assistant"), echo.mask("assistant"))


def test_truncation_keeps_masks_aligned_and_is_reported(fixtures, tmp_path):
    tok = load_tokenizer("qwen3")
    traj = load_trajectories(str(fixtures / "adp_swe-zero-12m/sample_raw.json"))[0]
    full, cut = Renderer(tok).render(traj), Renderer(tok, max_len=1000).render(traj)
    assert len(cut.input_ids) == 1000 and cut.truncated_tokens == len(full.input_ids) - 1000
    for arm in ARMS:
        assert np.array_equal(cut.mask(arm), full.mask(arm)[:1000])
    stats = render_file(
        RenderConfig(
            tokenizer="qwen3",
            inputs=[str(fixtures / "adp_swe-zero-12m/sample_raw.json")],
            out=str(tmp_path / "r.jsonl"),
            arm="full",
            max_len=1000,
        )
    )
    assert (stats["examples"], stats["truncated_examples"]) == (3, 3) and stats["tokens"] == 3000


@pytest.mark.parametrize("suffix", [".jsonl.gz", ".parquet"])
def test_render_file_one_row_per_trajectory_in_order(fixtures, tmp_path, suffix):
    from terminalworld.core.records import iter_records

    src = str(fixtures / "adp-fork_nebius-swe-agent-trajectories/sample_raw.json")
    out = str(tmp_path / f"rows{suffix}")
    render_file(RenderConfig(tokenizer="smollm2", inputs=[src], out=out, arm="assistant"))
    rows = [r.value for r in iter_records(out)]
    trajs = load_trajectories(src)
    assert [r["instance_id"] for r in rows] == [t.instance_id for t in trajs]
    stats = render_file(RenderConfig(tokenizer="smollm2", inputs=[src], out=out + ".again" + suffix, arm="full"))
    assert stats["arm"] == "full" and stats["out"] == out + ".again" + suffix
    r0 = Renderer(load_tokenizer("smollm2")).render(trajs[0])
    assert list(rows[0]["input_ids"]) == r0.input_ids.tolist()
    assert list(rows[0]["loss_weights"]) == r0.mask("assistant").astype(int).tolist()


def test_nebius_mask_matches_the_datasets_own_per_message_mask(fixtures):
    """nebius ships `mask: true` on exactly the ai messages: our assistant arm trains exactly
    the tokens of those messages (plus their end-of-turn tokens)."""
    raw = json.loads((fixtures / "adp-fork_nebius-swe-agent-trajectories/sample_raw.json").read_text())
    for rec, traj in zip(
        raw, load_trajectories(str(fixtures / "adp-fork_nebius-swe-agent-trajectories/sample_raw.json")), strict=False
    ):
        r = Renderer(load_tokenizer("qwen3")).render(traj)
        trained_msgs = sorted({int(o) for o, t in zip(r.owner, r.mask("assistant"), strict=False) if t})
        masked = [i for i, m in enumerate(rec["trajectory"]) if m["mask"]]
        assert trained_msgs == masked


def test_cli_render_and_show_mask(fixtures, tmp_path, capsys):
    """The two commands through the CLI's entry point, in this process (a real interpreter's run of
    the CLI is tests/test_bad_input.py's; each one here would cost an interpreter's imports)."""
    from terminalworld.cli import main

    src = str(fixtures / "mini-swe-agent/local.traj.json")
    code = main(["show-mask", "--tokenizer", "qwen3", "--in", src, "--arm", "assistant", "--color", "never"])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "[[Here be some dummy command:" in out.out and "| assistant |" in out.out
    bad = tmp_path / "bad.jsonl"
    good = json.dumps(json.loads((fixtures / "adp_swe-zero-12m" / "sample_raw.json").read_text())[0])
    bad.write_text('{"instance_id": "x", "messages": [{"role": "assistant", "content": "a"}]}\n' + good + "\n")
    argv = ["render", "--tokenizer", "qwen3", "--arm", "full", "--in", str(bad), "--out", str(tmp_path / "o.jsonl")]
    code = main(argv)
    r = capsys.readouterr()
    # A record that is not a trajectory is counted and named with file and line; the pass goes on.
    assert code == 0 and "Traceback" not in r.err, r.err
    stats = json.loads(r.out[r.out.index("{") :])
    assert stats["examples"] == 1 and stats["failed"] == {"malformed record": 1}
    assert (stats["failures"][0]["file"], stats["failures"][0]["line"]) == (str(bad), 1)
    assert len((tmp_path / "o.jsonl").read_text().splitlines()) == 1


def test_token_owners_rule_on_hand_made_offsets():
    starts = np.array([0, 2, 2, 5, 9])
    ends = np.array([2, 2, 5, 9, 10])  # token 1 is empty; token 4 starts at content 0's end
    owners = token_owners(starts, ends, [(0, 9)])
    assert owners.tolist() == [0, NOBODY, 0, 0, 0]  # an empty token owns nothing; 4 is the end of turn
    assert token_owners(starts, ends, []).tolist() == [NOBODY] * 5  # no content: all scaffolding


def test_both_template_sources_at_once_is_a_clear_error():
    with pytest.raises(InputError, match=r"^give a chat template file or a model to take the template from, not both$"):
        build_renderer(tokenizer="smollm2", chat_template="t.jinja", template_from="smollm2")


def test_unowned_tokens_have_the_role_none(qwen3_rendered):
    r, _ = qwen3_rendered
    roles = r.role_of_tokens()
    assert set(roles.tolist()) == {"system", "user", "assistant", "none"}
    assert (roles == "none").sum() == (r.owner == NOBODY).sum() > 0
