"""A rollout's ids are what the policy saw, token in, token out, and its ECHO masks select exactly
the observation text the rule says, with the real Qwen3 tokenizer and template."""

import numpy as np
import pytest

from terminalworld.agent.harness import FORMAT_WARNING
from terminalworld.core.assets import load_tokenizer
from terminalworld.core.render import Renderer
from terminalworld.core.trajectories import OBSERVATION_PREFIX
from terminalworld.core.views import Message
from terminalworld.train.rollout import Rollout

ACTION = "THOUGHT: list the files.\n\n```bash\nls\n```"
OUTPUTS = [OBSERVATION_PREFIX + "a.py\nb.py\n", FORMAT_WARNING.format(n=2), OBSERVATION_PREFIX + "x = 1\n"]


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer("qwen3")


def _tokens(tok, ids, mask):
    return tok.decode([i for i, m in zip(ids, mask, strict=True) if m])


def test_ids_are_the_policys_and_the_masks_select_terminal_output(tok):
    end = tok.convert_tokens_to_ids("<|im_end|>")
    # A sampled tokenization that re-tokenizing the text would not give: "ls" as "l" + "s".
    sampled = tok(ACTION.replace("ls\n", ""), add_special_tokens=False)["input_ids"]
    sampled = sampled[:-1] + tok.convert_tokens_to_ids(["l", "s"]) + tok("\n```", add_special_tokens=False)["input_ids"]
    assert tok.decode(sampled) == ACTION and tok(ACTION, add_special_tokens=False)["input_ids"] != sampled
    r = Rollout(Renderer(tok))
    r.start("SYS", "TASK")
    prompt_len = len(r.ids)
    for out in OUTPUTS:
        assert r.act([*sampled, end]) == ACTION
        r.observe(out)
    n = len(r.ids)
    assert len(r.action_mask) == len(r.env_mask) == n
    # Every sampled id is there, at its place, masked for GRPO; nothing else is.
    assert r.action_mask.count(1) == 3 * len(sampled) + 3 and r.ids[prompt_len : prompt_len + len(sampled)] == sampled
    text = tok.decode(r.ids)
    assert text.startswith(
        "<|im_start|>system\nSYS<|im_end|>\n<|im_start|>user\nTASK<|im_end|>\n<|im_start|>assistant\n"
    )
    assert text.count(ACTION + "<|im_end|>\n<|im_start|>user\n") == 3 and text.endswith("<|im_start|>assistant\n")
    # O': terminal output only (no "Observation: " prefix, no format warning), by the last-character
    # rule (" a" ends in output, so it is output), exactly as the renderer's ECHO view owns it.
    assert _tokens(tok, r.ids, r.env_mask) == " a.py\nb.py\n x = 1\n"
    messages = [Message("system", "SYS", "system"), Message("user", "TASK", "task")]
    for out in OUTPUTS:
        messages += [Message("assistant", ACTION, "action"), Message("user", out, "observation")]
    echo = Renderer(tok, exclude_harness_text=True).render_messages(messages, "rollout")
    eot = {int(np.searchsorted(echo.offsets[:, 0], e)) for _, e in echo.spans}
    owned = [j for j, o in enumerate(echo.owner) if o >= 0 and messages[o].kind == "observation" and j not in eot]
    assert tok.decode(echo.input_ids[owned].tolist()) == _tokens(tok, r.ids, r.env_mask)
    full = Renderer(tok).render_messages(messages, "rollout")  # |O|: every observation content token
    content = [j for j, o in enumerate(full.owner) if o >= 0 and messages[o].kind == "observation" and j not in eot]
    assert r.observation_count == len(content) > sum(r.env_mask)
    assert not any(a and e for a, e in zip(r.action_mask, r.env_mask, strict=True))
