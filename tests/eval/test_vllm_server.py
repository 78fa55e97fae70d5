"""Scoring through a vLLM server refuses, with the reason, an endpoint that does not answer or does
not serve the named model (the real server's scores: tests/agent/test_vllm_cpu.py)."""

import pytest

from terminalworld.agent.serve import ChatModel, serving
from terminalworld.agent.vllm import free_port
from terminalworld.errors import InputError
from terminalworld.eval.vllm_server import VLLMServerScorer


def test_an_endpoint_that_does_not_answer_is_refused():
    with pytest.raises(InputError, match="no vLLM server answers"):
        VLLMServerScorer(f"http://127.0.0.1:{free_port()}/v1", "model")


def test_an_endpoint_serving_another_model_is_refused(tmp_path):
    from terminalworld.core.assets import load_tokenizer, tiny_qwen3

    tok = load_tokenizer("smollm2")
    tiny_qwen3(len(tok)).save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    with (
        serving(ChatModel(str(tmp_path), context_tokens=512), "tiny") as url,
        pytest.raises(InputError, match="does not serve 'smollm2'"),
    ):
        VLLMServerScorer(url, "smollm2")
