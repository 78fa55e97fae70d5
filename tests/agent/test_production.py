"""The production path (vLLM on a GPU, Harbor with Daytona, registry datasets) cannot run here;
what can is checked: Harbor itself accepts the job the step would launch, and the vLLM server
fails fast, in one line, when it cannot start."""

import json
import subprocess
import sys

import pytest

from terminalworld.agent.evaluate import AgentEvalConfig, job_spec
from terminalworld.agent.harbor import runtime
from terminalworld.agent.vllm import vllm_server
from terminalworld.errors import StepFailed

ENDPOINT = {"api_base": "http://127.0.0.1:8000/v1", "served_model": "full-1M"}


def _harbor_accepts(spec: dict) -> dict:
    code = (
        "import json, sys\n"
        "from terminalworld.agent.harbor.job import job_config\n"
        "print(job_config(json.loads(sys.argv[1])).model_dump_json())\n"
    )
    done = subprocess.run(
        [runtime.harbor_python(), "-c", code, json.dumps(spec)],
        capture_output=True,
        text=True,
        env=runtime.harbor_env(),
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_harbor_accepts_the_production_jobs(tmp_path):
    swe = AgentEvalConfig(tasks=str(tmp_path), out=str(tmp_path), agent="model", environment="daytona", n_attempts=3)
    job = _harbor_accepts(job_spec(swe, out=tmp_path, endpoint=ENDPOINT, bwrap=None))
    assert job["environment"]["type"] == "daytona" and job["n_attempts"] == 3
    assert job["agents"][0]["import_path"] == "terminalworld.agent.harbor.agent:SweZeroAgent"
    assert job["agents"][0]["kwargs"]["api_base"] == ENDPOINT["api_base"]
    tb = AgentEvalConfig(
        tasks="registry:terminal-bench@2.0",
        out=str(tmp_path),
        agent="terminus-2",
        environment="daytona",
        n_attempts=5,
        temperature=0.6,
    )
    job = _harbor_accepts(job_spec(tb, out=tmp_path, endpoint=ENDPOINT, bwrap=None))
    assert job["datasets"][0]["name"] == "terminal-bench" and job["datasets"][0]["version"] == "2.0"
    agent = job["agents"][0]
    assert agent["name"] == "terminus-2" and agent["model_name"] == "hosted_vllm/full-1M"
    assert agent["kwargs"]["temperature"] == 0.6 and job["n_attempts"] == 5


def test_vllm_that_cannot_start_fails_in_one_line():
    have_vllm = subprocess.run([sys.executable, "-c", "import vllm"], capture_output=True).returncode == 0
    if have_vllm:
        pytest.skip("vLLM is installed here")
    with (
        pytest.raises(StepFailed, match=r"^vLLM exited with status 1 before serving /no/model$"),
        vllm_server(model="/no/model", served_model="m", max_model_len=2048, port=18765),
    ):
        pass


def test_vllm_serves_with_its_own_sampling_defaults_not_the_checkpoints():
    from terminalworld.agent.vllm import vllm_command

    argv = vllm_command(model="/ckpt", served_model="m", max_model_len=8192, port=8000, seed=0)
    # Without it vLLM takes top-k / top-p from generation_config.json: not pure temperature sampling.
    assert argv[argv.index("--generation-config") + 1] == "vllm"
