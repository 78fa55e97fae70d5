"""Dynamic batching changes how many requests share a `generate` call, never a greedy request's
tokens: concurrent requests of different lengths and caps, batched left-padded, get exactly the
tokens each gets alone (tiny Qwen3, float32); a sampled request runs alone, so its seed means what
it means one at a time; and the chat server answers concurrent requests as it answers them in turn."""

import json
import threading
import urllib.request

import pytest

from terminalworld.core.assets import load_tokenizer, tiny_qwen3
from terminalworld.core.batching import DynamicBatcher
from terminalworld.core.formats import load_trajectories
from tests.paths import SWE_ZERO


@pytest.fixture(scope="module")
def parts():
    import torch

    torch.set_num_threads(1)
    tok = load_tokenizer("smollm2")
    model = tiny_qwen3(len(tok), seed=1).eval()
    traj = load_trajectories(str(SWE_ZERO))[0]
    texts = [traj.task[: 40 * (k + 1)] + t.action[:200] for k, t in enumerate(traj.turns[:8])]
    prompts = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
    assert len({len(p) for p in prompts}) == len(prompts)  # every row padded differently
    return tok, model, prompts


def _concurrently(batcher, jobs):
    out = [None] * len(jobs)
    barrier = threading.Barrier(len(jobs))

    def run(k, kw):
        barrier.wait()
        out[k] = batcher.generate(**kw)

    workers = [threading.Thread(target=run, args=(k, kw)) for k, kw in enumerate(jobs)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return out


def test_greedy_batched_left_padded_equals_one_at_a_time(parts):
    tok, model, prompts = parts
    stop = [tok.eos_token_id]
    jobs = [{"ids": p, "max_new_tokens": 6 + k, "temperature": 0.0, "seed": 0} for k, p in enumerate(prompts)]
    alone = DynamicBatcher(model, pad=stop[0], stop=stop, max_batch=1)
    together = DynamicBatcher(model, pad=stop[0], stop=stop, max_batch=8, window_s=0.2)
    expected = [alone.generate(**j) for j in jobs]
    got = _concurrently(together, jobs)
    assert got == expected and max(together.batches) > 1 and set(alone.batches) == {1}
    assert [len(x) for x in got] == [6 + k for k in range(len(jobs))]  # each cut to its own cap


def test_a_sampled_request_runs_alone_with_its_seed(parts):
    tok, model, prompts = parts
    stop = [tok.eos_token_id]
    jobs = [{"ids": p, "max_new_tokens": 6, "temperature": 1.0, "seed": 5 + k} for k, p in enumerate(prompts[:4])]
    alone = DynamicBatcher(model, pad=stop[0], stop=stop, max_batch=1)
    together = DynamicBatcher(model, pad=stop[0], stop=stop, max_batch=8, window_s=0.2)
    assert _concurrently(together, jobs) == [alone.generate(**j) for j in jobs]
    assert set(together.batches) == {1}


def test_the_chat_server_answers_concurrent_requests_as_in_turn(parts, tmp_path):
    from terminalworld.agent.serve import ChatModel, serving

    tok, model, _ = parts
    folder = tmp_path / "tiny"
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    chat = ChatModel(str(folder), context_tokens=4096)
    traj = load_trajectories(str(SWE_ZERO))[0]
    bodies = [
        {"messages": [{"role": "user", "content": traj.task[: 60 * (k + 1)]}], "max_tokens": 8, "temperature": 0}
        for k in range(6)
    ]
    with serving(chat) as url:

        def post(body):
            request = urllib.request.Request(
                f"{url}/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
            )
            with urllib.request.urlopen(request, timeout=300) as r:
                return json.loads(r.read())["choices"][0]["message"]["content"]

        in_turn = [post(b) for b in bodies]
        chat.batcher.window_s = 0.2
        out = [None] * len(bodies)
        workers = [threading.Thread(target=lambda k=k: out.__setitem__(k, post(bodies[k]))) for k in range(6)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    assert out == in_turn and max(chat.batcher.batches) > 1
