"""Do the job graph's requests fit the partition they go to? Read from `sinfo` where it runs.

A request larger than every node of its partition is rejected by sbatch ("Requested node
configuration is not available") or, on a site without EnforcePartLimits, stays PENDING
forever. Both are found here, before anything is submitted, with the job and the resource
named. Without `sinfo` (a laptop, a login node of another cluster) nothing is checked.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass

from gamut_local.config import mem_mb, slurm_hours


@dataclass
class Node:
    name: str
    partition: str
    cpus: int
    mem_mb: int
    gpus: int
    max_hours: float | None  # the partition's time limit; None: infinite


@dataclass
class Request:
    job: str  # the job's key in the graph
    nodes: int
    gpus: int  # per node
    cpus: int  # per node
    mem_mb: int  # per node
    time: str


def _gres_gpus(gres: str) -> int:
    """'gpu:4', 'gpu:a100:8(S:0-1)', 'gpu:2,shard:8' or '(null)' -> GPUs."""
    total = 0
    for part in gres.split(","):
        m = re.match(r"gpu(?::[^:(]+)?:(\d+)", part.strip())
        if m:
            total += int(m.group(1))
    return total


def parse_sinfo(text: str) -> list[Node]:
    """Lines of `sinfo -h -N -o '%N|%P|%c|%m|%G|%l'`; the default partition keeps its '*'."""
    nodes = []
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) != 6 or not parts[2].isdigit():
            continue
        name, part, cpus, mem, gres, limit = parts
        nodes.append(Node(name, part, int(cpus), int(re.sub(r"\D.*", "", mem) or 0), _gres_gpus(gres),
                          None if limit.strip() in ("infinite", "UNLIMITED") else slurm_hours(limit)))
    return nodes


def cluster_nodes() -> list[Node] | None:
    """Every node of every partition as `sinfo` sees it; None where sinfo is missing or fails."""
    if shutil.which("sinfo") is None:
        return None
    try:
        res = subprocess.run(["sinfo", "-h", "-N", "-o", "%N|%P|%c|%m|%G|%l"], capture_output=True,
                             text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return parse_sinfo(res.stdout) if res.returncode == 0 else None


def requests(jobs, slurm) -> list[Request]:
    """What each job of the graph asks of one node (per-GPU requests times its GPUs)."""
    out = []
    for job in jobs:
        if job.gpus:
            out.append(Request(job.key, job.nodes, job.gpus, job.gpus * slurm.cpus_per_gpu,
                               job.gpus * mem_mb(slurm.mem_per_gpu), job.values["time"]))
        else:
            out.append(Request(job.key, 1, 0, slurm.cpus_score, mem_mb(slurm.mem_score), job.values["time"]))
    return out


def _setting(req: Request) -> tuple[str, str, str]:
    """The run settings behind a request's CPUs, memory and time."""
    if req.gpus:
        stage = req.job.split(".")[0]
        return "slurm.cpus_per_gpu", "slurm.mem_per_gpu", f"slurm.time_{stage}"
    return "slurm.cpus_score", "slurm.mem_score", "slurm.time_score"


def misfits(reqs: list[Request], nodes: list[Node], partition: str | None) -> list[tuple[str, str]]:
    """(setting, message) for every request that no node of the partition can hold."""
    default = [n for n in nodes if n.partition.endswith("*")]
    mine = [n for n in nodes if n.partition.rstrip("*") == partition] if partition else default
    where = f"partition {partition}" if partition else f"the default partition ({default[0].partition.rstrip('*')})" \
        if default else "the default partition"
    if not mine:
        known = sorted({n.partition.rstrip("*") for n in nodes})
        return [("slurm.partition", f"{where} is not on this cluster (sinfo lists: {', '.join(known) or 'none'})")]
    out = []
    for r in reqs:
        cpu_key, mem_key, time_key = _setting(r)
        fit = [n for n in mine if n.gpus >= r.gpus and n.cpus >= r.cpus and n.mem_mb >= r.mem_mb]
        if len(fit) < r.nodes:
            big = max(mine, key=lambda n: (n.gpus, n.cpus, n.mem_mb))
            short = [(key, what) for key, what, need, have in (
                ("slurm.gpus_per_node", f"GPUs ({r.gpus})", r.gpus, big.gpus),
                (cpu_key, f"CPUs ({r.cpus}, {cpu_key})", r.cpus, big.cpus),
                (mem_key, f"memory ({r.mem_mb} MB, {mem_key})", r.mem_mb, big.mem_mb)) if need > have]
            on = f" on each of {r.nodes} nodes" if r.nodes > 1 else ""
            out.append((short[0][0] if short else "nodes",
                        f"job {r.job} asks for {r.gpus} GPUs, {r.cpus} CPUs and {r.mem_mb} MB{on}, but "
                        f"{len(fit)} of the {len(mine)} nodes of {where} can hold that (the largest, {big.name}, "
                        f"has {big.gpus} GPUs, {big.cpus} CPUs, {big.mem_mb} MB)"
                        + (f"; too much: {', '.join(w for _, w in short)}" if short else "")))
        limit = min((n.max_hours for n in mine if n.max_hours is not None), default=None)
        hours = slurm_hours(r.time)
        if limit is not None and hours is not None and hours > limit:
            out.append((time_key, f"job {r.job} asks for --time={r.time}, more than the {limit:g} h limit of {where}"))
    return out
