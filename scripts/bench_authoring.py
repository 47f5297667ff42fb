"""How long the authoring commands take on the two workloads that matter: `validate`, `lint`,
`compile`, `diff`, `export` and `import`, each run as the real command line (a fresh process,
startup included), wall time and peak memory (max RSS) per command, the median of `--repeat`
runs. (`draft` and `audit` ask a model, so they are not here.)

Workloads:

- `gamut`: 10,000 questions of 7 items that compile to 15 checks each, GAMUT's shape (its
  mean is 15 checks per question);
- `rubric`: one question of 1,000 items (3,000 checks), the largest rubric anyone writes by
  hand, the worst case for the per-question rules.

Items are the four list and fact types; texts draw on a vocabulary that grows with the
number of items, as a real dataset's does. `diff` compares the dataset with a revised copy in
which every tenth item is reworded and another tenth re-tiered.

`--against REF` runs each command also as the git revision REF had it (its `gamut_local`,
extracted to a temporary folder), the two one right after the other on the same files, and
checks that both wrote the same bytes: on a shared machine only a side-by-side figure means
anything. The load average (1 min) is printed per row.

    PYTHONPATH=$PWD .venv/bin/python scripts/bench_authoring.py [--workloads gamut,rubric]
        [--repeat 3] [--against REF] [--new REF] [--commands export,import] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

COMMANDS = ("validate", "lint", "compile", "diff", "export", "import")
# name -> (questions, items per question, item types cycled through)
SIMPLE, STRICT, FLEXIBLE, PROCESS = range(4)
WORKLOADS = {
    # 1 + 2 + 5 + 4 + 1 + 1 + 1 = 15 checks (a flexible list of 4 options: coverage + 4 options;
    # a process of 3 steps: 3 + its order check)
    "gamut": (10_000, 7, (SIMPLE, STRICT, FLEXIBLE, PROCESS, SIMPLE, SIMPLE, SIMPLE)),
    "rubric": (1, 1_000, (SIMPLE, STRICT, FLEXIBLE, PROCESS)),
}


def _item(i: int, kind: int, rng: random.Random, vocab: int, revised: bool = False) -> dict:
    text = " ".join(f"w{rng.randrange(vocab)}" for _ in range(8))
    if revised and i % 10 == 3:
        text += " revised"
    base = {"id": f"i{i}", "subject": f"subject {i}", "evidence": ["s1"]}
    if kind == SIMPLE:
        tier = "valuable" if revised and i % 10 == 8 else "answer_critical"
        return {**base, "type": "simple", "tier": tier, "fact": f"fact {text}"}
    if kind == STRICT:
        return {**base, "type": "strict_list", "tier": "valuable", "elements": [f"first {text}", f"second {text}"]}
    if kind == FLEXIBLE:
        return {**base, "type": "flexible_list", "tier": "context", "min_required": 2,
                "options": [f"option {k} {text}" for k in range(4)]}
    return {**base, "type": "process", "tier": "valuable", "steps": [{"text": f"step {k} {text}"} for k in range(3)]}


def write_dataset(path: Path, workload: str, seed: int = 0, revised: bool = False) -> Path:
    n_questions, per_question, kinds = WORKLOADS[workload]
    rng = random.Random(seed)
    vocab = max(5000, n_questions * per_question)
    with open(path, "w", encoding="utf-8") as f:
        for q in range(n_questions):
            items = [_item(q * per_question + k, kinds[k % len(kinds)], rng, vocab, revised)
                     for k in range(per_question)]
            f.write(json.dumps({"question_id": f"q{q}", "domain": "d", "question": f"What is shown here ({q})?",
                                "meta_rubric": {"items": items, "snippets": [{"id": "s1", "title": "Source",
                                                                              "text": "Evidence."}]}}) + "\n")
    return path


REPO = Path(__file__).resolve().parent.parent


def _run(argv: list[str], cwd: Path, code_root: Path) -> tuple[float, float, int, float]:
    """(seconds, peak MiB, exit code, CPU seconds) of one command in a fresh process, with
    `gamut_local` imported from `code_root`. Through /usr/bin/time: a process forked from this
    one would count this one's memory in its peak (Linux keeps the high-water mark of the
    forked image across exec)."""
    env = {**os.environ, "PYTHONPATH": str(code_root)}
    with tempfile.NamedTemporaryFile("r", suffix=".time") as usage:
        t0 = time.perf_counter()
        code = subprocess.call(["/usr/bin/time", "-o", usage.name, "-f", "%M %U %S", sys.executable, "-m",
                                "gamut_local.cli", *argv], cwd=cwd, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        seconds = time.perf_counter() - t0
        kib, user, system = usage.read().split()[-3:]
    return seconds, int(kib) / 1024, code, float(user) + float(system)


def checkout(ref: str, into: Path) -> Path:
    """The `gamut_local` package as revision `ref` had it, extracted under `into`."""
    into.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", ref, "gamut_local"], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def _argv(cmd: str, data: Path, revised: Path, out: str) -> list[str]:
    return [cmd, *map(str, {"validate": [data], "lint": [data], "compile": [data, "--out", f"{out}.rubric.jsonl"],
                            "diff": [data, revised], "export": [data, "--out", f"{out}.export"],
                            "import": [f"{out}.export", "--out", f"{out}.imported.jsonl"]}[cmd])]


def bench_commands(root: Path, workload: str, versions: dict[str, Path], commands: tuple[str, ...],
                   repeat: int) -> list[dict]:
    """Every command on one workload, `repeat` times per version in `versions` (name -> code
    root), the versions of one command right after each other; one row per (command, version)
    with the medians."""
    data = write_dataset(root / f"{workload}.jsonl", workload)
    revised = write_dataset(root / f"{workload}.revised.jsonl", workload, revised=True)
    runs: dict[tuple[str, str], list[tuple]] = {}
    for cmd in commands:
        for _ in range(repeat):
            for version, code_root in versions.items():
                out = str(root / f"{workload}.{version}")
                if cmd == "export":  # export wants a new folder; the last one stays for import
                    subprocess.run(["rm", "-rf", f"{out}.export"], check=True)
                    # The removal's 10,000 deletions put on disk now: export's one sync (its files
                    # whole or absent after a crash) would otherwise write them back, as part of export.
                    os.sync()
                result = _run(_argv(cmd, data, revised, out), root, code_root)
                # lint exits 1 when it finds errors; these rubrics have none, so any non-zero is a failure
                runs.setdefault((cmd, version), []).append((*result, os.getloadavg()[0]))
        for version in versions:
            _print(_row(workload, cmd, version, runs[cmd, version]))
    rows = [_row(workload, cmd, version, rs) for (cmd, version), rs in runs.items()]
    if len(versions) > 1:
        _same_outputs(root, workload, versions, commands)
    return rows


def _row(workload: str, cmd: str, version: str, rs: list[tuple]) -> dict:
    return {"workload": workload, "command": cmd, "version": version, "runs": len(rs),
            "seconds": statistics.median(r[0] for r in rs), "min_s": min(r[0] for r in rs),
            "max_s": max(r[0] for r in rs), "peak_mib": statistics.median(r[1] for r in rs),
            "exit": max(r[2] for r in rs), "cpu": statistics.median(r[3] for r in rs),
            "load": statistics.median(r[4] for r in rs)}


def _print(r: dict) -> None:
    print(f"{r['workload']:<9} {r['command']:<9} {r['version']:<8} {r['seconds']:>15.2f} "
          f"{r['min_s']:>5.2f}-{r['max_s']:<5.2f} {r['peak_mib']:>9.0f} {r['cpu']:>6.2f} "
          f"{r['load']:>5.1f}" + ("" if r["exit"] == 0 else f"  exit {r['exit']}!"), flush=True)


def _same_outputs(root: Path, workload: str, versions: dict[str, Path], commands: tuple[str, ...]) -> None:
    """Same input, same output: the versions must write the same bytes."""
    for suffix in [s for s, c in ((".rubric.jsonl", "compile"), (".imported.jsonl", "import")) if c in commands]:
        outputs = {(root / f"{workload}.{v}{suffix}").read_bytes() for v in versions}
        if len(outputs) != 1:
            raise SystemExit(f"{workload}: the versions wrote different {suffix} files")
    if "export" in commands:
        exports = {v: sorted((root / f"{workload}.{v}.export").iterdir()) for v in versions}
        texts = {tuple(p.name for p in ps) + tuple(p.read_text().split("\n", 1)[1] for p in ps)
                 for ps in exports.values()}  # the first line names the dataset, the same here
        if len(texts) != 1:
            raise SystemExit(f"{workload}: the versions exported different YAML")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workloads", default=",".join(WORKLOADS), help="some of: " + ",".join(WORKLOADS))
    ap.add_argument("--repeat", type=int, default=3, help="runs per command; the median is shown")
    ap.add_argument("--against", metavar="REF", help="also run every command as git revision REF had it")
    ap.add_argument("--new", metavar="REF", help="measure revision REF as 'new' (default: the working tree)")
    ap.add_argument("--commands", default=",".join(COMMANDS), help="some of: " + ",".join(COMMANDS))
    ap.add_argument("--json", type=Path, help="also write every row here")
    args = ap.parse_args()
    picked = set(args.commands.split(",")) | ({"export"} if "import" in args.commands.split(",") else set())
    if picked - set(COMMANDS):
        raise SystemExit(f"unknown commands: {', '.join(sorted(picked - set(COMMANDS)))}")
    commands = tuple(c for c in COMMANDS if c in picked)
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {os.cpu_count()} cores")
    print(f"{'workload':<9} {'command':<9} {'version':<8} {'wall s (median)':>15} {'min-max':>11} "
          f"{'peak MiB':>9} {'CPU s':>6} {'load':>5}")
    all_rows = []
    with tempfile.TemporaryDirectory() as tmp:
        new = checkout(args.new, Path(tmp) / "new") if args.new else REPO
        versions = {"new": new}
        if args.against:
            versions = {"old": checkout(args.against, Path(tmp) / "old"), "new": new}
        for workload in args.workloads.split(","):
            all_rows += bench_commands(Path(tmp), workload, versions, commands, args.repeat)
    if args.json:
        args.json.write_text(json.dumps(all_rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
