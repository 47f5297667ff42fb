"""judge-ray.sbatch on a real two-node SLURM with a real Ray: two slurmd, each in its own
network and UTS namespace (its own host name and address on a private bridge this test makes
and removes; no traffic leaves the machine), and a second slurmctld on other ports with its own
config, so the one-node cluster of `real_slurm` keeps running. The job's `srun` steps run on
both nodes, each node's `ray start` gets that node's own address, and the judge's stand-in
places one GPU bundle on each node as vLLM's Ray executor does and runs a task in each. Only
the judge is a stand-in: vLLM's CPU build refuses the Ray executor (docs/slurm.md says why).

Marked `alone`: it runs in `make test`'s serial pass with nothing beside it, because Ray gives
a new node's raylet a fixed 30 s to register, which a 2-core machine busy with the other
tests' workers can exceed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml

from gamut_local.cluster.slurm import prepare
from tests.support.slurm_cluster import render_slurm_conf, skip_or_fail

pytestmark = [pytest.mark.slurm, pytest.mark.alone]

# A subnet and ports of this process's own, so two test sessions on one machine do not meet.
_N = os.getpid() % 200
NODES = {"gn1": f"10.77.{_N}.11", "gn2": f"10.77.{_N}.12"}
HOST_IP = f"10.77.{_N}.1"
CTLD_PORT, SLURMD_PORT = 6917 + 2 * _N, 6918 + 2 * _N
TOOLS = ("ip", "nsenter", "unshare")

# The judge's stand-in: as vLLM's Ray executor does (`initialize_ray_cluster`), one placement
# group of a GPU bundle per rank, spread over the nodes; then one task in each bundle reports
# the node it ran on and the GPU Ray gave it.
LAUNCHER = """#!/usr/bin/env python
import json, os, socket, sys
import ray
from ray.util.placement_group import placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy
ray.init(address="auto", logging_level="ERROR")
pg = placement_group([{"GPU": 1, "CPU": 1}] * 2, strategy="STRICT_SPREAD")
ray.get(pg.ready(), timeout=120)
@ray.remote(num_gpus=1, num_cpus=1)
def where():
    return socket.gethostname(), os.environ.get("VLLM_HOST_IP"), ray.get_gpu_ids()
ranks = ray.get([where.options(scheduling_strategy=PlacementGroupSchedulingStrategy(pg, i)).remote()
                 for i in range(2)], timeout=180)
with open(os.environ["TWO_NODE_LOG"], "a") as f:
    f.write(json.dumps({"launcher": sys.argv[1:], "host": socket.gethostname(), "ranks": sorted(ranks),
                        "nodes": sorted(n["NodeManagerAddress"] for n in ray.nodes() if n["Alive"]),
                        "RAY_ADDRESS": os.environ.get("RAY_ADDRESS"),
                        "VLLM_HOST_IP": os.environ.get("VLLM_HOST_IP")}) + "\\n")
"""


def ray_bin() -> str:
    """The folder of this interpreter's `ray` (`make test` installs Ray; the project's `ray`
    extra is for users). Without it the test is skipped, and fails on CI."""
    here = Path(sys.executable).parent
    if importlib.util.find_spec("ray") is None or not (here / "ray").exists():
        reason = f"Ray is not installed in {here}: `make test` installs it ({here}/pip install 'ray>=2.48')"
        skip_or_fail("Ray", reason)
    return str(here)


def _run(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=check)


def _kill_pidfile(path: Path, exe: str) -> None:
    """Stop the daemon whose PID the file holds, only while that PID still runs `exe`."""
    if not path.is_file():
        return
    pid = int(path.read_text().strip() or 0)
    if pid and os.path.realpath(f"/proc/{pid}/exe") == os.path.realpath(exe):
        os.kill(pid, 15)
        for _ in range(100):
            if not os.path.exists(f"/proc/{pid}"):
                break
            time.sleep(0.1)


@pytest.fixture
def two_nodes(real_slurm, monkeypatch):
    """Two slurmd in namespaces and their own slurmctld; yields the environment to use them."""
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing or os.geteuid() != 0:
        pytest.skip(f"two namespaced nodes need root and {', '.join(TOOLS)} (missing: {missing})")
    d = Path(tempfile.mkdtemp(prefix="gamut-two-nodes-"))  # under /tmp: the slurm user must reach it
    d.chmod(0o755)
    tag = f"g{os.getpid() % 100000}"
    bridge, netns = f"br{tag}", {n: f"{tag}{n}" for n in NODES}
    try:
        _run("ip", "link", "add", bridge, "type", "bridge")
        _run("ip", "addr", "add", f"{HOST_IP}/24", "dev", bridge)
        _run("ip", "link", "set", bridge, "up")
        for i, (node, addr) in enumerate(NODES.items()):
            ns, host_end, ns_end = netns[node], f"{tag}h{i}", f"{tag}n{i}"
            _run("ip", "netns", "add", ns)
            _run("ip", "link", "add", host_end, "type", "veth", "peer", "name", ns_end)
            _run("ip", "link", "set", host_end, "master", bridge, "up")
            _run("ip", "link", "set", ns_end, "netns", ns)
            for cmd in (["addr", "add", f"{addr}/24", "dev", ns_end], ["link", "set", ns_end, "up"],
                        ["link", "set", "lo", "up"]):
                _run("ip", "netns", "exec", ns, "ip", *cmd)
        for sub in ("state", "log"):  # slurmctld runs as the slurm user
            (d / sub).mkdir()
            shutil.chown(d / sub, "slurm", "slurm")
        for node in NODES:
            (d / f"gpu-{node}").symlink_to("/dev/null")
        conf = d / "slurm.conf"
        # The one-node cluster's template, on other ports and paths; %n is the node's name.
        conf.write_text(render_slurm_conf(
            CLUSTER="twonode", CTLD_HOST=_run("hostname", "-s").stdout.strip(), CTLD_ADDR=HOST_IP,
            CTLD_PORT=CTLD_PORT, SLURMD_PORT=SLURMD_PORT, DEPENDENCY_PARAMETERS="", LOG_DIR=d / "log",
            STATE_DIR=d / "state", SPOOL_DIR=d / "spool-%n", CTLD_PID_FILE=d / "slurmctld.pid",
            SLURMD_PID_FILE=d / "slurmd-%n.pid", SLURMD_LOG_FILE=d / "log" / "slurmd-%n.log", GRES_TYPES="GresTypes=gpu",
            NODES="\n".join(f"NodeName={n} NodeAddr={a} CPUs=2 RealMemory=4000 Gres=gpu:1 State=UNKNOWN"
                             for n, a in NODES.items()),
            PARTITION="two", NODE_LIST="gn[1-2]"))
        # gres.conf is read from slurm.conf's folder; each node's own line (Name=gpu, File=).
        (d / "gres.conf").write_text("".join(f"NodeName={n} Name=gpu File={d}/gpu-{n}\n" for n in NODES))
        # Each node resolves both names, as on a real cluster (Ray looks its own name up).
        (d / "hosts").write_text("127.0.0.1 localhost\n" + "".join(f"{a} {n}\n" for n, a in NODES.items()))
        _run("/usr/sbin/slurmctld", "-f", str(conf))
        for node in NODES:
            # nsenter, not `ip netns exec`: that remounts /sys, and slurmd then finds no cgroup fs.
            # A mount namespace of its own for the node's /etc/hosts; jobs inherit all three.
            _run("nsenter", f"--net=/var/run/netns/{netns[node]}", "unshare", "--uts", "--mount",
                 "--propagation", "private", "sh", "-c",
                 f"mount --bind {d}/hosts /etc/hosts && hostname {node} && exec /usr/sbin/slurmd -f {conf}")
        monkeypatch.setenv("SLURM_CONF", str(conf))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            state = _run("sinfo", "-h", "-o", "%t %D", check=False).stdout.strip()
            if state == "idle 2":
                break
            time.sleep(0.2)
        assert state == "idle 2", f"two nodes not idle: {state!r}; {(d / 'log' / 'slurmctld.log').read_text()[-2000:]}"
        yield d
    finally:
        if (d / "slurmctld.pid").is_file():  # no job step may outlive its slurmd
            subprocess.run(["scancel", "--full", "--user", "root"], capture_output=True,
                           timeout=60, env={**os.environ, "SLURM_CONF": str(d / "slurm.conf")})
            time.sleep(3)
        for node in NODES:
            _kill_pidfile(d / f"slurmd-{node}.pid", "/usr/sbin/slurmd")
        _kill_pidfile(d / "slurmctld.pid", "/usr/sbin/slurmctld")
        for i, ns in enumerate(netns.values()):
            _run("ip", "netns", "del", ns, check=False)
            _run("ip", "link", "del", f"{tag}h{i}", check=False)  # takes its peer with it
        _run("ip", "link", "del", bridge, check=False)
        shutil.rmtree(d, ignore_errors=True)


def test_judge_ray_places_one_gpu_rank_on_each_of_two_real_nodes(two_nodes, tmp_path, monkeypatch):
    ray = ray_bin()
    launcher = tmp_path / "bin" / "launcher"
    launcher.parent.mkdir()
    launcher.write_text(LAUNCHER.replace("#!/usr/bin/env python", f"#!{ray}/python"))
    launcher.chmod(0o755)
    monkeypatch.setenv("GAMUT_RAY_HEAD_WAIT", "15")  # a Ray head takes seconds on a busy machine
    log = tmp_path / "two-node.log"
    monkeypatch.setenv("TWO_NODE_LOG", str(log))
    monkeypatch.setenv("PATH", os.pathsep.join([ray, os.environ["PATH"]]))
    (tmp_path / "data.jsonl").write_text(json.dumps({
        "question_id": "q1", "domain": "d", "question": "What is this?",
        "checks": [{"check_id": "c1", "text": "It says cat.", "tier": "answer_critical"}]}) + "\n")
    (tmp_path / "ref.jsonl").write_text(json.dumps(
        {"question_id": "q1", "model": "reference", "variant": "multimodal", "response": "r"}) + "\n")
    (tmp_path / "j").mkdir()
    (tmp_path / "j" / "config.json").write_text("{}")
    cfg = tmp_path / "run.yaml"
    cfg.write_text(yaml.safe_dump({
        "name": "two", "dataset": "data.jsonl", "output_dir": str(tmp_path / "run"), "models": [],
        "extra_answers": ["ref.jsonl"],
        "judges": [{"name": "jr", "path": str(tmp_path / "j"), "nodes": 2, "engine": {
            "tensor_parallel_size": 1, "extra": {"pipeline_parallel_size": 2, "distributed_executor_backend": "ray"}}}],
        "slurm": {"gpus_per_node": 1, "cpus_per_gpu": 1, "mem_per_gpu": "500M", "cpus_score": 1, "mem_score": "500M",
                  "time_judge": "00:05:00", "time_score": "00:05:00", "launcher": str(launcher),
                  "setup": ["export GAMUT_FAKE_GPUS=1"]}}))
    job = next(j for j in prepare(cfg).jobs if j.stage == "judge")
    assert "ray start" in job.script and "#SBATCH --nodes=2" in job.script and "#SBATCH --exclusive" not in job.script
    script = tmp_path / "judge-ray.sbatch"
    script.write_text(job.script)
    (tmp_path / "run" / "slurm" / "logs").mkdir(parents=True)
    res = _run("sbatch", "--parsable", "--array=0", str(script), check=False)
    assert res.returncode == 0, res.stderr
    job_id = res.stdout.strip().split(";")[0]
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        state = _run("scontrol", "-o", "show", "job", job_id, check=False).stdout
        if "JobState=COMPLETED" in state or "JobState=FAILED" in state:
            break
        time.sleep(0.5)
    logs = "".join(p.read_text() for p in (tmp_path / "run" / "slurm" / "logs").iterdir())
    assert "JobState=COMPLETED" in state, f"{state}\n{logs}"
    (launch,) = [json.loads(x) for x in log.read_text().splitlines()]
    # The judge ran on the head node, with the head's address; one Ray cluster of both nodes,
    # each by its own address, and one GPU rank on each node, run there.
    assert launch["host"] == "gn1" and launch["VLLM_HOST_IP"] == NODES["gn1"] and launch["launcher"][0] == "judge"
    assert launch["RAY_ADDRESS"].startswith(NODES["gn1"] + ":")
    assert launch["nodes"] == sorted(NODES.values())
    assert [(host, ip, len(gpus)) for host, ip, gpus in launch["ranks"]] == [(n, a, 1) for n, a in NODES.items()]
    assert (tmp_path / "run" / "slurm" / "done" / "judge.jr.reference.multimodal.shard-0-of-1").exists()
