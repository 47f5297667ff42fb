"""judge-ray.sbatch's choice of each node's address, run by bash as rendered, with stand-ins for
the commands it asks (scontrol, srun, hostname, ip, ray, python) on PATH: a loopback address is
refused with a message that names the fix, and `slurm.network_interface` picks each node's
address on that interface and tells NCCL and Gloo to use it."""

from __future__ import annotations

import json
import os
import shutil
import sys

import pytest
import yaml

from gamut_local.cluster.slurm import prepare
from gamut_local.errors import InputError
from tests.support import processes

BASH = shutil.which("bash")
JOB = str(os.getpid())  # the array's job id: no other test's task shares its /tmp/g-<job>-<task>
pytestmark = pytest.mark.skipif(BASH is None, reason="bash not installed")

# srun [opts] -w HOST CMD...: runs CMD "on" HOST, as that node's own step.
FAKE_SRUN = """#!/bin/bash
while [[ $# -gt 0 && "$1" != "-w" ]]; do shift; done
host=$2; shift 2
FAKE_NODE="$host" SLURMD_NODENAME="$host" exec "$@"
"""
# Each node's name resolves as FAKE_RESOLVES says (node-a=ADDR,node-b=ADDR).
FAKE_HOSTNAME = """#!/bin/bash
tr ',' '\\n' <<<"$FAKE_RESOLVES" | sed -n "s/^$FAKE_NODE=//p"
"""
# `ip -4 -o addr show dev IFACE` as iproute2 prints it, from FAKE_IB0 (node-a=ADDR,...) for ib0.
FAKE_IP = """#!/bin/bash
[ "$*" = "-4 -o addr show dev ib0" ] || { echo "Device \\"${*: -1}\\" does not exist." >&2; exit 1; }
addr=$(tr ',' '\\n' <<<"$FAKE_IB0" | sed -n "s/^$FAKE_NODE=//p")
[ -z "$addr" ] ||
  echo "3: ib0    inet $addr/16 brd 10.1.255.255 scope global ib0\\       valid_lft forever"
"""
# `ray` and the judge's launcher record where they ran and the network settings they were given.
RECORDER = f"""#!{sys.executable}
import json, os, sys
with open(os.environ["FAKE_RAY_LOG"], "a") as f:
    f.write(json.dumps({{"argv": sys.argv[1:], "node": os.environ.get("FAKE_NODE"), **{{
        k: os.environ.get(k) for k in ("VLLM_HOST_IP", "NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME",
                                       "RAY_ADDRESS", "VLLM_RPC_BASE_PATH")}}}}) + "\\n")
"""


def two_node_job(fake_site, tmp_path, **slurm) -> str:
    (tmp_path / "jr").mkdir()
    (tmp_path / "jr" / "config.json").write_text("{}")
    # The site's nodes, for the request check (not this machine's own SLURM, if it runs one).
    fake_site.partitions(*(f"gpu-0{i}|gpu*|64|512000|gpu:h100:4(S:0-1)|2-00:00:00" for i in (1, 2)))
    launcher = fake_site.add("judge-recorder", RECORDER)
    config = {"name": "t", "dataset": "data.jsonl", "output_dir": "run", "models": [],
              "judges": [{"name": "jr", "path": str(tmp_path / "jr"), "nodes": 2,
                          "engine": {"tensor_parallel_size": 4, "extra": {
                              "pipeline_parallel_size": 2, "distributed_executor_backend": "ray"}}}],
              "extra_answers": ["ref.jsonl"],
              "slurm": {"gpus_per_node": 4, "launcher": str(launcher), **slurm}}
    (tmp_path / "ref.jsonl").write_text(
        json.dumps({"question_id": "q1", "model": "reference", "variant": "multimodal",
                    "response": "r"}) + "\n")
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(config))
    (job,) = [j for j in prepare(tmp_path / "run.yaml").jobs if j.template == "judge-ray.sbatch"]
    for name, text in (("scontrol", "#!/bin/bash\nprintf 'node-a\\nnode-b\\n'\n"), ("srun", FAKE_SRUN),
                       ("hostname", FAKE_HOSTNAME), ("ip", FAKE_IP), ("ray", RECORDER),
                       ("python", "#!/bin/bash\necho 2\n")):
        fake_site.add(name, text)
    return job.script


def run_job(script: str, tmp_path, **env):
    path = tmp_path / "judge-ray.sh"
    path.write_text(script)
    env = {**os.environ, "SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_JOB_ID": JOB, "SLURM_JOB_ID": "12345",
           "SLURM_JOB_NODELIST": "node-[a-b]", "TMPDIR": str(tmp_path), "GAMUT_RAY_HEAD_WAIT": "0",
           "FAKE_RAY_LOG": str(tmp_path / "ray.log"), "FAKE_NODE": "node-a", **env}
    # 60 s: a job script against stand-ins, no model.
    res = processes.run([BASH, str(path)], env=env, timeout=60, waiting_for="the job script")
    log = tmp_path / "ray.log"
    calls = [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []
    return res, calls


@pytest.mark.parametrize("head", ["127.0.1.1", "127.0.0.1"])
def test_a_loopback_head_address_is_refused_with_the_fix_named(fake_site, tmp_path, head):
    """Debian-style hosts resolve their own name to 127.0.1.1: the job stops before Ray starts."""
    res, calls = run_job(two_node_job(fake_site, tmp_path), tmp_path,
                         FAKE_RESOLVES=f"node-a={head},node-b=10.0.0.2")
    assert res.returncode == 1
    assert f"node node-a's address is '{head}', a loopback address" in res.stderr
    assert "Set slurm.network_interface" in res.stderr
    assert calls == []  # no `ray start`, no judge
    assert not (tmp_path / f"gamut-{JOB}-0").exists() and not os.path.exists(f"/tmp/g-{JOB}-0")


def test_without_an_interface_each_node_uses_its_resolved_address(fake_site, tmp_path):
    res, calls = run_job(two_node_job(fake_site, tmp_path), tmp_path,
                         FAKE_RESOLVES="node-a=10.0.0.1,node-b=10.0.0.2")
    assert res.returncode == 0, res.stderr
    starts = sorted((c for c in calls if c["argv"][0] == "start"), key=lambda c: c["node"])
    assert [(c["node"], c["VLLM_HOST_IP"]) for c in starts] == [("node-a", "10.0.0.1"),
                                                                 ("node-b", "10.0.0.2")]
    assert all(c["NCCL_SOCKET_IFNAME"] is None and c["GLOO_SOCKET_IFNAME"] is None for c in calls)


def test_the_network_interface_picks_each_nodes_address_on_it(fake_site, tmp_path):
    """With `slurm.network_interface: ib0` the names' (loopback) resolution is never used: each
    node's Ray and vLLM get its ib0 address, NCCL and Gloo the interface, the judge the head's."""
    script = two_node_job(fake_site, tmp_path, network_interface="ib0")
    res, calls = run_job(script, tmp_path, FAKE_RESOLVES="node-a=127.0.1.1,node-b=127.0.1.1",
                         FAKE_IB0="node-a=10.1.0.1,node-b=10.1.0.2")
    assert res.returncode == 0, res.stderr
    starts = sorted((c for c in calls if c["argv"][0] == "start"), key=lambda c: c["node"])
    assert [(c["node"], c["VLLM_HOST_IP"]) for c in starts] == [("node-a", "10.1.0.1"),
                                                                 ("node-b", "10.1.0.2")]
    assert "--node-ip-address=10.1.0.1" in starts[0]["argv"]
    assert "--address=10.1.0.1:32345" in starts[1]["argv"]
    (judge,) = [c for c in calls if c["argv"][0] == "judge"]
    assert (judge["VLLM_HOST_IP"], judge["RAY_ADDRESS"]) == ("10.1.0.1", "10.1.0.1:32345")
    assert all((c["NCCL_SOCKET_IFNAME"], c["GLOO_SOCKET_IFNAME"]) == ("=ib0", "ib0")
               for c in [*starts, judge])
    assert all(c["VLLM_RPC_BASE_PATH"] == f"/tmp/g-{JOB}-0" for c in calls)


def test_a_node_without_an_address_on_the_interface_stops_the_job(fake_site, tmp_path):
    script = two_node_job(fake_site, tmp_path, network_interface="ib0")
    res, calls = run_job(script, tmp_path, FAKE_RESOLVES="node-a=10.0.0.1,node-b=10.0.0.2",
                         FAKE_IB0="node-a=10.1.0.1")
    assert res.returncode == 1
    assert "node node-b has no IPv4 address on interface 'ib0' (slurm.network_interface)" in res.stderr
    assert calls == []


def test_an_interface_that_is_not_a_name_is_refused_in_the_config(fake_site, tmp_path):
    with pytest.raises(InputError) as e:
        two_node_job(fake_site, tmp_path, network_interface="ib0; rm -rf /")
    assert "slurm.network_interface" in str(e.value)
