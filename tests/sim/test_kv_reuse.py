"""KV-cache reuse in the HF simulator backend changes the cost of a turn, never its tokens: on a
real SWE-ZERO session and a seeded tiny Qwen3, greedy and seeded sampling give the same tokens with
and without reuse, turn after turn, while reuse prefills fewer tokens; a prompt that goes back to
an earlier, shorter session cuts the cache correctly."""

import dataclasses

import pytest

from terminalworld.core.assets import load_tokenizer, tiny_qwen3
from terminalworld.core.formats import load_trajectories
from terminalworld.core.render import Renderer
from terminalworld.core.trajectories import OBSERVATION_PREFIX, Turn
from terminalworld.sim.backend import HFGenerator, Simulator, stop_ids
from tests.paths import SWE_ZERO

TURNS = 6
NEW = 8


@pytest.fixture(scope="module")
def parts():
    import torch

    torch.set_num_threads(1)  # two shared cores: one thread is the fastest and the least noisy
    tok = load_tokenizer("smollm2")
    model = tiny_qwen3(len(tok), seed=0).eval()
    traj = load_trajectories(str(SWE_ZERO))[0]
    assert len(traj.turns) >= TURNS
    return tok, model, traj, stop_ids(tok)


def _generators(model, stop):
    return HFGenerator(model, stop=stop, pad=stop[0], reuse_cache=True), HFGenerator(model, stop=stop, pad=stop[0])


@pytest.mark.parametrize(("temperature", "seed"), [(0.0, 0), (1.0, 5)])
def test_reuse_gives_the_same_tokens_on_the_recorded_turns_and_prefills_less(parts, temperature, seed):
    tok, model, traj, stop = parts
    sim = Simulator(Renderer(tok, view="sim"), None)
    prompts = [sim.prompt(traj, t)[0] for t in range(TURNS)]
    reuse, plain = _generators(model, stop)
    decoding = {"max_new_tokens": NEW, "temperature": temperature, "seed": seed}
    for p in prompts:
        assert reuse.generate([p], **decoding) == plain.generate([p], **decoding)
    # Each later turn extends the session: only what follows the previous prompt is prefilled.
    assert reuse.prefilled[0] == len(prompts[0])
    for k in range(1, TURNS):
        assert reuse.prefilled[k] <= len(prompts[k]) - len(prompts[k - 1])
    assert sum(reuse.prefilled) < sum(map(len, prompts)) / 2
    # Back to an earlier, shorter prompt (not an extension): the cache is cut, the tokens are the same.
    assert reuse.generate([prompts[2]], **decoding) == plain.generate([prompts[2]], **decoding)


def test_a_session_on_its_own_simulated_outputs_matches_without_reuse(parts):
    """Tier 3's use: each turn's prompt holds the earlier turns' simulated outputs, so the cache
    holds the previous prompt and its generated tokens; a simulator with reuse and one without
    answer every turn of the session identically, and reuse prefills only the new turn."""
    tok, model, traj, stop = parts
    reuse, plain = _generators(model, stop)
    sims = [Simulator(Renderer(tok, view="sim"), g, max_new_tokens=NEW) for g in (reuse, plain)]
    sessions = [list(traj.turns[:TURNS]), list(traj.turns[:TURNS])]
    prompts = []
    for t in range(TURNS):
        answers = []
        for sim, turns in zip(sims, sessions, strict=True):
            session = dataclasses.replace(traj, turns=tuple(turns))
            [out] = sim.simulate([(session, t)])
            turns[t] = Turn(turns[t].action, OBSERVATION_PREFIX + out.text)
            answers.append(out)
        assert answers[0] == answers[1]
        prompts.append(answers[0].prompt_tokens)
    assert reuse.prefilled[0] == prompts[0]
    assert all(reuse.prefilled[k] < prompts[k] - prompts[k - 1] + NEW for k in range(1, TURNS))
    assert sum(reuse.prefilled) < sum(prompts) / 2
