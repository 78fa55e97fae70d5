from terminalworld.agent.harness import (
    BROKEN_BLOCK_WARNING,
    FORMAT_WARNING,
    MALFORMED,
    UNCLOSED,
    Episode,
    HarnessConfig,
)
from terminalworld.core.trajectories import OBSERVATION_PREFIX, SUBMIT_SENTINEL, harness_spans

ACT = "THOUGHT: look.\n\n```bash\nls\n```"


def test_a_command_then_its_observation_then_submission():
    ep = Episode(system="S", task="T", config=HarnessConfig(max_turns=5))
    assert ep.act(ACT) == "ls" and ep.outcome == "running"
    ep.observe("a.py\n")
    assert ep.messages[-1] == {"role": "user", "content": OBSERVATION_PREFIX + "a.py\n"}
    assert ep.act(f"THOUGHT: done.\n\n```bash\necho {SUBMIT_SENTINEL}\n```") == f"echo {SUBMIT_SENTINEL}"
    ep.observe(f"{SUBMIT_SENTINEL}\n")
    assert ep.outcome == "submitted" and ep.turns == 2 and len(ep.messages) == 5


def test_a_reply_without_exactly_one_block_gets_the_warning_which_is_harness_text():
    ep = Episode(system="S", task="T", config=HarnessConfig(max_turns=5))
    assert ep.act("```bash\nls\n```\n```bash\npwd\n```") is None
    warning = ep.messages[-1]["content"]
    assert warning == FORMAT_WARNING.format(n=2) and ep.format_errors == 1
    assert harness_spans(warning) == [(0, len(warning))]  # ECHO's O' leaves it out


def test_turn_and_context_limits_end_the_episode():
    ep = Episode(system="S", task="T", config=HarnessConfig(max_turns=2, context_tokens=100, max_tokens_per_turn=30))
    ep.act(ACT)
    ep.observe("x")
    assert ep.outcome == "running"
    ep.act("no block")
    assert ep.outcome == "turn_limit"
    ep = Episode(system="S", task="T", config=HarnessConfig(context_tokens=100, max_tokens_per_turn=30))
    assert ep.check_context(70) and not ep.check_context(71) and ep.outcome == "context_limit"


def test_the_warning_says_what_was_wrong_with_a_reply_it_cannot_read():
    """A reply cut inside its bash block (at the token limit) gets no count of "1 actions": the
    warning says the block is never closed; a block on one line says how a block is laid out; a
    count is given only for complete blocks. Each is harness text, ECHO's O' leaves it out."""
    cases = {
        "THOUGHT: look.\n\n```bash\ngrep -rn 'def parse' src/ | hea": BROKEN_BLOCK_WARNING.format(why=UNCLOSED),
        "THOUGHT: look.\n\n```bash ls```": BROKEN_BLOCK_WARNING.format(why=MALFORMED),
        "THOUGHT: I will list the files.": FORMAT_WARNING.format(n=0),
        "```bash\nls\n```\n```bash\npwd\n```\n```bash\nca": FORMAT_WARNING.format(n=2),
    }
    for reply, want in cases.items():
        ep = Episode(system="S", task="T", config=HarnessConfig(max_turns=5))
        assert ep.act(reply) is None
        warning = ep.messages[-1]["content"]
        assert warning == want and "found 1 actions" not in warning
        assert harness_spans(warning) == [(0, len(warning))]
    assert "never closed" in BROKEN_BLOCK_WARNING.format(why=UNCLOSED)
