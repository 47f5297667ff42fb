"""A judge behind a server in the SLURM job graph: `backend: openai` judges run their arrays on
CPU, and a judge whose `server.serve` names weights gets a server job (`vllm serve` with the
judge's engine settings) that hands its address to the arrays, which start once it has started.

`sbatch` cannot run here: a stand-in records what it is given (conftest.py's `fake_site`). The job
scripts are real and run with bash; the server's `vllm serve` is replaced by a small HTTP
server answering /health (the real one is started in tests/engines/test_openai_vllm.py), and
the rendered `vllm serve` flags are parsed by the installed vLLM's own argument parser."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gamut_local.cluster.graph import serve_command, server_url_file
from gamut_local.cluster.slurm import dry_run_text, prepare, submit
from gamut_local.config import load_run_config
from tests.support import processes

# `squeue -h ... -o %i`: the ids in FAKE_SQUEUE_IDS (queued or running), and what it was asked.
FAKE_SQUEUE = f"""#!{sys.executable}
import json, os, sys
with open(os.environ["FAKE_SQUEUE_LOG"], "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\\n")
print("\\n".join(os.environ.get("FAKE_SQUEUE_IDS", "").split()))
"""


# The site's one GPU node, in the default partition (the request check).
NODE = "gpu-01|gpu*|64|512000|gpu:h100:4(S:0-1)|2-00:00:00"


@pytest.fixture
def served(fake_site, tmp_path):
    """A run config with one candidate, a judge the run serves and one served elsewhere."""
    fake_site.partitions(NODE)
    launcher = fake_site.launcher
    for name, config in (("small", {}), ("qwen-vl-big", {"model_type": "qwen3_vl", "vision_config": {"depth": 27}})):
        (tmp_path / "models" / name).mkdir(parents=True)
        (tmp_path / "models" / name / "config.json").write_text(json.dumps(config))
    config = {
        "name": "t", "dataset": "data.jsonl", "output_dir": "run", "variants": ["multimodal", "text_only"],
        "models": [{"name": "small", "path": "models/small"}],
        "judges": [
            {"name": "big", "path": "Qwen/Qwen3-VL-235B-A22B-Instruct", "backend": "openai", "sees_image": False,
             "engine": {"tensor_parallel_size": 4, "max_model_len": 16384, "min_pixels": 262144, "max_pixels": 1310720},
             "server": {"base_url": "http://localhost:8000/v1", "serve": "models/qwen-vl-big", "max_concurrency": 64}},
            {"name": "api", "path": "frontier-judge", "backend": "openai",
             "server": {"base_url": "https://api.example.org/v1", "api_key_env": "JUDGE_KEY"}},
        ],
        "slurm": {"partition": "gpu", "gpus_per_node": 4, "shards_judge": 2, "launcher": str(launcher)},
    }
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_the_graph_has_a_server_job_and_cpu_client_arrays_that_start_after_it(served, tmp_path):
    sub = prepare(served)
    jobs = {j.key: j for j in sub.jobs}
    server = jobs["judge.big.server"]
    # The server: one node, the judge's GPUs, `vllm serve` of the weights under the served name,
    # with the offline engine's read-out settings; after the generation its clients need.
    assert "#SBATCH --gres=gpu:4" in server.script and server.after == ["generate.small"]
    cmd = serve_command(load_run_config(served).judges[0])
    assert cmd in server.script and "--host 0.0.0.0 --port \"$PORT\"" in server.script
    args = shlex.split(cmd)
    assert args[:5] == ["python", "-m", "vllm.entrypoints.cli.main", "serve", str(tmp_path / "models" / "qwen-vl-big")]
    flags = {a: (args[i + 1] if i + 1 < len(args) and not args[i + 1].startswith("--") else True)
             for i, a in enumerate(args) if a.startswith("--")}
    assert flags["--generation-config"] == "vllm"  # no sampling defaults from generation_config.json
    assert flags["--served-model-name"] == "Qwen/Qwen3-VL-235B-A22B-Instruct"
    assert flags["--tensor-parallel-size"] == "4" and flags["--max-model-len"] == "16384"
    assert flags["--logprobs-mode"] == "processed_logprobs" and flags["--enable-prompt-tokens-details"] is True
    # One client array grading both systems, 2 shards: every marker of it counts, and the
    # server stops only when all are there.
    client = jobs["judge.big"]
    assert server.serves == ["judge.big"] and len(client.tasks) == 2
    assert client.markers == [f"judge.big.small.{v}.shard-{i}-of-2" for i in range(2) for v in ("multimodal", "text_only")]
    assert all(m in server.script for m in client.markers)
    url_file = server_url_file(Path(sub.spec.output_dir), "big")
    for c in (client, jobs["judge.api"]):
        assert "--gres" not in c.script and "#SBATCH --cpus-per-task=" in c.script and c.loads == 0
    assert f"URL_FILE={url_file}" in client.script
    assert "URL_FILE=''" in jobs["judge.api"].script  # served elsewhere: base_url
    assert (server.loads, client.loads) == (1, 0)  # the server loads the judge once; clients load nothing
    # The submission: clients wait for generation to succeed and for the server to have started.
    text = dry_run_text(sub)
    assert "--dependency=afterok:$JOB_generate_small,after:$JOB_judge_big_server" in text
    assert "--dependency=afterok:$JOB_generate_small " in text.split("JOB_judge_api=")[1]
    score = text.split("JOB_score=")[1].splitlines()[0]
    assert "JOB_judge_big_server" not in score and "$JOB_judge_big:" in score
    for j in sub.jobs:
        assert processes.run(["bash", "-n"], input=j.script, timeout=30, waiting_for="bash -n").returncode == 0, j.key
    records = {r["key"]: r for r in submit(sub, echo=lambda s: None)}
    assert any(a == f"--dependency=afterok:{records['generate.small']['job_id']},"
                    f"after:{records['judge.big.server']['job_id']}" for a in records["judge.big"]["argv"])
    # Resume: once every client task is done, the server is not submitted again.
    done = tmp_path / "run" / "slurm" / "done"
    done.mkdir(parents=True, exist_ok=True)
    for m in client.markers:
        (done / m).write_text(client.done_key + "\n")
    again = {j.key for j in prepare(served).todo}
    assert "judge.big.server" not in again and not any(k.startswith("judge.big") for k in again)


def test_the_server_job_hands_its_address_to_the_clients_and_stops_when_they_are_done(served, fake_site, tmp_path,
                                                                                       monkeypatch, vllm_serve_stand_in):
    """The rendered scripts, run with bash: the server script starts the (stand-in) server,
    writes its address once /health answers; a client task waits for it, runs the judge with
    GAMUT_SERVER_URL set to it and marks its shard done; the server leaves when all are done."""
    fake_site.add("python", vllm_serve_stand_in)
    fake_site.add("squeue", FAKE_SQUEUE)  # the client arrays stay queued while the test runs them
    monkeypatch.setenv("FAKE_SQUEUE_IDS", "5002_0 5002_1")
    monkeypatch.setenv("FAKE_SQUEUE_LOG", str(tmp_path / "squeue.log"))
    monkeypatch.setenv("FAKE_SERVE_LOG", str(tmp_path / "serve.log"))
    sub = prepare(served)
    jobs = {j.key: j for j in sub.jobs}
    # Nothing leaves 127.0.0.1: the address handed over names it (a cluster's is the node's name).
    env = {**os.environ, "SLURM_JOB_ID": "77", "TMPDIR": str(tmp_path / "tmp"), "GAMUT_SERVER_HOST": "127.0.0.1",
           "GAMUT_SERVER_POLL_S": "1"}
    (tmp_path / "tmp").mkdir()
    url_file = server_url_file(Path(sub.spec.output_dir), "big")
    log = tmp_path / "server-job.out"
    with open(log, "w") as out, subprocess.Popen(["bash", "-c", jobs["judge.big.server"].script], env=env, cwd=tmp_path,
                                                 stdout=out, stderr=subprocess.STDOUT, start_new_session=True) as server:
        try:
            processes.wait_until(url_file.exists, timeout=120, waiting_for="the server job to write its address",
                                 log=log, proc=server)
            url = url_file.read_text().strip()  # now: the server removes it once the clients are done
            for shard in range(2):
                res = processes.run(["bash", "-c", jobs["judge.big"].script], env={**env, "SLURM_ARRAY_TASK_ID": str(shard)},
                                    cwd=tmp_path, timeout=120, waiting_for="a client task")
                assert res.returncode == 0, res.stdout + res.stderr
            calls = fake_site.launches()
            assert url.startswith("http://") and url.endswith("/v1")
            assert len(calls) == 2 and all(c["env"]["GAMUT_SERVER_URL"] == url and c["argv"][0] == "judge" for c in calls)
            server.wait(timeout=120)
        finally:
            processes.kill_session(server.pid)  # the stand-in server, however the test ends
    assert server.returncode == 0, log.read_text()
    assert "every judging task of big is done" in log.read_text() and not url_file.exists()
    assert (tmp_path / "squeue.log").read_text()  # it asked while the clients ran, and kept serving
    served_args = (tmp_path / "serve.log").read_text()
    assert "--served-model-name Qwen/Qwen3-VL-235B-A22B-Instruct" in served_args


def test_the_server_job_stops_when_its_clients_left_the_queue_unfinished(served, fake_site, tmp_path, monkeypatch,
                                                                         vllm_serve_stand_in):
    """A client task that failed or was cancelled never marks its shard done: once none of the
    judge's client jobs is queued or running, the server stops instead of holding its GPUs to
    the time limit, and says why and what to do."""
    fake_site.add("python", vllm_serve_stand_in)
    fake_site.add("squeue", FAKE_SQUEUE)
    monkeypatch.setenv("FAKE_SQUEUE_LOG", str(tmp_path / "squeue.log"))
    monkeypatch.setenv("FAKE_SQUEUE_IDS", "")  # every client gone, none done
    monkeypatch.setenv("FAKE_SERVE_LOG", str(tmp_path / "serve.log"))
    sub = prepare(served)
    server_job = next(j for j in sub.jobs if j.key == "judge.big.server")
    env = {**os.environ, "SLURM_JOB_ID": "78", "TMPDIR": str(tmp_path / "tmp"), "GAMUT_SERVER_HOST": "127.0.0.1",
           "GAMUT_SERVER_POLL_S": "1"}
    (tmp_path / "tmp").mkdir()
    url_file = server_url_file(Path(sub.spec.output_dir), "big")
    with subprocess.Popen(["bash", "-c", server_job.script], env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, start_new_session=True) as server:
        try:
            out = server.communicate(timeout=120)[0]
        finally:
            processes.kill_session(server.pid)
    assert server.returncode == 0, out
    assert "no judging task of big is queued or running" in out and "gamut-local status" in out, out
    assert not url_file.exists()  # the address is gone with the server
    (asked,) = {tuple(a) for a in map(json.loads, (tmp_path / "squeue.log").read_text().splitlines())}
    names = next(a for a in asked if a.startswith("--name="))[len("--name="):].split(",")
    assert names == [next(j for j in sub.jobs if j.key == "judge.big").values["job_name"]]


def test_served_weights_not_the_node_are_the_judges_identity(served, tmp_path, monkeypatch):
    """A judge the run serves lands on any node: its settings hash follows the weights it
    serves, not the host; requests go where the server job said (GAMUT_SERVER_URL)."""
    from gamut_local.engines.served.http import SERVER_URL_ENV, served_url

    judge = load_run_config(served).judges[0]
    elsewhere = judge.model_copy(update={"server": judge.server.model_copy(update={"base_url": "http://n9:1/v1"})})
    assert judge.settings_hash() == elsewhere.settings_hash()
    (tmp_path / "models" / "other").mkdir()
    (tmp_path / "models" / "other" / "config.json").write_text('{"changed": 1}')
    other = judge.model_copy(update={"server": judge.server.model_copy(update={"serve": str(tmp_path / "models" / "other")})})
    assert judge.settings_hash() != other.settings_hash()  # other weights: other verdicts
    api = load_run_config(served).judges[1]
    monkeypatch.setenv(SERVER_URL_ENV, "http://gpu-7:41234/v1")
    assert served_url(judge) == "http://gpu-7:41234/v1"
    assert served_url(api) == "https://api.example.org/v1"  # not a run-served judge: its own base_url


def test_the_manifest_is_written_before_the_judges_server_is_up(served, tmp_path):
    """The first generation task writes the manifest, while the judge's server job waits for
    that generation: the served judge's hash is unknown then, not an error."""
    from gamut_local.rundir.manifest import build_manifest
    from tests.support.vllm_server import free_port

    cfg = yaml.safe_load(served.read_text())
    cfg["judges"][0]["server"]["base_url"] = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens
    cfg["judges"] = cfg["judges"][:1]
    served.write_text(yaml.safe_dump(cfg))
    models = {m["name"]: m for m in build_manifest(load_run_config(served), served)["models"]}
    assert models["big"]["settings_hash"] is None and models["small"]["settings_hash"]


def test_a_candidate_cannot_be_served_by_the_graph(served):
    cfg = yaml.safe_load(served.read_text())
    cfg["models"].append({"name": "m2", "path": "x", "backend": "openai",
                          "server": {"base_url": "http://h:1/v1", "serve": "models/small"}})
    served.write_text(yaml.safe_dump(cfg))
    from gamut_local.errors import InputError

    with pytest.raises(InputError, match="models.m2.server.serve"):
        prepare(served)


@pytest.mark.vllm
def test_the_server_command_parses_with_vllms_own_arguments(served):
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    args = shlex.split(serve_command(load_run_config(served).judges[0]))[4:]
    parsed = make_arg_parser(FlexibleArgumentParser()).parse_args([*args, "--host", "0.0.0.0", "--port", "8000"])
    assert parsed.served_model_name == ["Qwen/Qwen3-VL-235B-A22B-Instruct"] and parsed.tensor_parallel_size == 4
    assert parsed.logprobs_mode == "processed_logprobs" and parsed.enable_prefix_caching is True
    assert parsed.model_tag.endswith("qwen-vl-big") and parsed.generation_config == "vllm"
    assert parsed.limit_mm_per_prompt == {"image": 0, "video": 0}  # the judge does not see the image
    assert parsed.mm_processor_kwargs == {"size": {"shortest_edge": 262144, "longest_edge": 1310720}}


def test_building_and_rendering_a_served_judges_graph_loads_no_engine(served):
    """`cluster` runs on login nodes: importing every module of it and preparing a graph with a
    judge server (which renders `vllm serve`'s arguments) imports neither torch, vLLM nor
    transformers (the package docstring's promise)."""
    code = ("import importlib, pkgutil, sys, gamut_local.cluster as c\n"
            "for m in pkgutil.iter_modules(c.__path__):\n"
            "    importlib.import_module('gamut_local.cluster.' + m.name)\n"
            "from gamut_local.cluster.slurm import prepare\n"
            f"sub = prepare({str(served)!r})\n"
            "assert 'judge.big.server' in {j.key for j in sub.jobs}\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'vllm', 'transformers')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=os.getcwd())
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stdout + out.stderr
