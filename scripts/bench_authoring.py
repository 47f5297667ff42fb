"""How the authoring and dataset commands grow with the number of meta-rubric items: `validate`,
`lint`, `compile`, `diff`, `export` and `import`, each run as the real command line (a fresh
process, startup included), wall time and peak memory (max RSS) per command.

Two shapes of N items: `dataset`, N/10 questions of 10 items (what people build), and
`rubric`, one question of N items (the worst case for the per-question rules). Items cycle
through the four list and fact types; texts draw on a vocabulary that grows with N, as a
real dataset's does. Beside them, the duplicate rule's near-duplicate search on the same
checks as it was (every pair compared, `testing.authoring.all_pairs_near_duplicates`) and as
it is (`rubric.near_duplicates.first_near_duplicates`, words included), with a check that both
find the same pairs.

`diff` compares the dataset with a revised copy in which every tenth item is reworded and
another tenth re-tiered (so no question is equal on both sides, the worst case for `diff`).

`--against REF` runs each command also as the git revision REF had it (its `gamut_local`,
extracted to a temporary folder), one right after the other on the same files, and prints
both and their ratio: on a shared machine only a side-by-side figure means anything. The
load average (1 min) is printed per row.

`--commands` picks some of the commands (`import` reads what `export` wrote, so it brings
`export` along); `--new REF` measures revision REF instead of the working tree as "new". Each
cell is wall seconds / peak MiB, and CPU seconds (user + system) after a comma: on a shared
machine the CPU figure moves less with the load than the wall time.

    .venv/bin/python scripts/bench_authoring.py [--sizes 1000,10000,100000] [--shapes dataset,rubric]
        [--pairs 1000,2000] [--against REF] [--new REF] [--commands export,import]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

COMMANDS = ("validate", "lint", "compile", "diff", "export", "import")


def _item(i: int, rng: random.Random, vocab: int, revised: bool = False) -> dict:
    text = " ".join(f"w{rng.randrange(vocab)}" for _ in range(8))
    if revised and i % 10 == 3:
        text += " revised"
    base = {"id": f"i{i}", "subject": f"subject {i}", "evidence": ["s1"]}
    kind = i % 4
    if kind == 0:
        tier = "valuable" if revised and i % 10 == 8 else "answer_critical"
        return {**base, "type": "simple", "tier": tier, "fact": f"fact {text}"}
    if kind == 1:
        return {**base, "type": "strict_list", "tier": "valuable", "elements": [f"first {text}", f"second {text}"]}
    if kind == 2:
        return {**base, "type": "flexible_list", "tier": "context", "min_required": 2,
                "options": [f"option {k} {text}" for k in range(4)]}
    return {**base, "type": "process", "tier": "valuable", "steps": [{"text": f"step {k} {text}"} for k in range(3)]}


def write_dataset(path: Path, n_items: int, per_question: int, seed: int = 0, revised: bool = False) -> Path:
    rng = random.Random(seed)
    vocab = max(5000, n_items)
    with open(path, "w", encoding="utf-8") as f:
        for q in range(0, n_items, per_question):
            items = [_item(i, rng, vocab, revised) for i in range(q, min(q + per_question, n_items))]
            f.write(json.dumps({"question_id": f"q{q}", "domain": "d", "question": f"What is shown here ({q})?",
                                "meta_rubric": {"items": items, "snippets": [{"id": "s1", "title": "Source",
                                                                              "text": "Evidence."}]}}) + "\n")
    return path


REPO = Path(__file__).resolve().parent.parent


def _run(argv: list[str], cwd: Path, code_root: Path) -> tuple[float, float, int, float]:
    """(seconds, peak MiB, exit code, CPU seconds) of one command in a fresh process, with
    `gamut_local` imported from `code_root`."""
    env = {**os.environ, "PYTHONPATH": str(code_root)}
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "gamut_local.cli", *argv], cwd=cwd, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    return (time.perf_counter() - t0, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status),
            usage.ru_utime + usage.ru_stime)


def checkout(ref: str, into: Path) -> Path:
    """The `gamut_local` package as revision `ref` had it, extracted under `into`."""
    into.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", ref, "gamut_local"], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def bench_commands(root: Path, n: int, shape: str, versions: dict[str, Path],
                   commands: tuple[str, ...] = COMMANDS) -> list[dict]:
    """Every command on one input, once per version in `versions` (name -> code root), the
    versions of one command right after each other."""
    per_question = 10 if shape == "dataset" else n
    data = write_dataset(root / f"{shape}-{n}.jsonl", n, per_question)
    revised = write_dataset(root / f"{shape}-{n}.revised.jsonl", n, per_question, revised=True)
    rows = []
    for cmd in commands:
        for version, code_root in versions.items():
            out = root / f"{shape}-{n}.{version}"
            argv = {"validate": [data], "lint": [data], "compile": [data, "--out", f"{out}.rubric.jsonl"],
                    "diff": [data, revised], "export": [data, "--out", f"{out}.export"],
                    "import": [f"{out}.export", "--out", f"{out}.imported.jsonl"]}[cmd]
            seconds, mib, code, cpu = _run([cmd, *map(str, argv)], root, code_root)
            # lint exits 1 when it finds errors; the rubrics here have none, so any non-zero is a failure
            rows.append({"shape": shape, "items": n, "command": cmd, "version": version, "seconds": seconds,
                         "cpu": cpu, "peak_mib": mib, "exit": code, "load": os.getloadavg()[0]})
    if len(versions) > 1:  # same input, same output: the faster code must not write other bytes
        for suffix in [s for s, c in ((".rubric.jsonl", "compile"), (".imported.jsonl", "import")) if c in commands]:
            outputs = {(root / f"{shape}-{n}.{v}{suffix}").read_bytes() for v in versions}
            if len(outputs) != 1:
                raise SystemExit(f"{shape} {n}: the versions wrote different {suffix} files")
        if "export" in commands:
            exports = {v: sorted((root / f"{shape}-{n}.{v}.export").iterdir()) for v in versions}
            texts = {tuple(p.name for p in ps) + tuple(p.read_text().split("\n", 1)[1] for p in ps)
                     for ps in exports.values()}  # the first line names the dataset, the same here
            if len(texts) != 1:
                raise SystemExit(f"{shape} {n}: the versions exported different YAML")
    return rows


def bench_pairs(n: int) -> dict:
    """The near-duplicate search on the checks of a one-question rubric of n items, both ways."""
    import tracemalloc

    from gamut_local.data.records import Question
    from gamut_local.rubric.compiler import checks_for
    from gamut_local.rubric.lint import NEAR_DUPLICATE
    from gamut_local.rubric.near_duplicates import content_words, first_near_duplicates
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, for tests.support
    from tests.support.authoring import all_pairs_near_duplicates

    with tempfile.TemporaryDirectory() as tmp:
        path = write_dataset(Path(tmp) / "one.jsonl", n, n)
        question = Question.model_validate(json.loads(path.read_text()))
    # every fifth item a rewording of an earlier one, so there are near pairs to find
    checks = checks_for(question)
    texts = [c.text for c in checks]
    for k in range(5, len(texts), 5):
        texts[k] = f"{texts[k - 3]} extra{k}"
    groups = [c.source_item for c in checks]
    out = {"items": n, "checks": len(checks)}
    # the old search was given the words; the new one splits the texts itself, in its time
    ways = (("all_pairs", lambda: all_pairs_near_duplicates([content_words(t) for t in texts], groups, NEAR_DUPLICATE)),
            ("indexed", lambda: first_near_duplicates(texts, groups, NEAR_DUPLICATE)))
    for name, fn in ways:
        tracemalloc.start()
        t0 = time.perf_counter()
        found = fn()
        out[f"{name}_s"] = time.perf_counter() - t0
        out[f"{name}_peak_mib"] = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        out[f"{name}_found"] = found
    out["same"] = out.pop("all_pairs_found") == out["indexed_found"]
    out["near_pairs"] = len(out.pop("indexed_found"))
    return out


def _cell(r: dict) -> str:
    return (f"{r['seconds']:6.1f}/{r['peak_mib']:<5.0f},{r['cpu']:5.1f}"
            + ("" if r["exit"] == 0 else f"!{r['exit']}"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--shapes", default="dataset,rubric")
    ap.add_argument("--pairs", default="1000,2000", help="rubric sizes for the all-pairs comparison ('' for none)")
    ap.add_argument("--against", metavar="REF", help="also run every command as git revision REF had it")
    ap.add_argument("--new", metavar="REF", help="measure revision REF as 'new' (default: the working tree)")
    ap.add_argument("--commands", default=",".join(COMMANDS), help="some of: " + ",".join(COMMANDS))
    args = ap.parse_args()
    picked = set(args.commands.split(",")) | ({"export"} if "import" in args.commands.split(",") else set())
    if picked - set(COMMANDS):
        raise SystemExit(f"unknown commands: {', '.join(sorted(picked - set(COMMANDS)))}")
    commands = tuple(c for c in COMMANDS if c in picked)
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{'near-duplicate search':<24} {'checks':>7} {'all pairs s':>12} {'indexed s':>10} "
          f"{'peak MiB (all/idx)':>19} {'near pairs':>10} same")
    for n in [int(x) for x in args.pairs.split(",") if x]:
        r = bench_pairs(n)
        print(f"{f'rubric of {n} items':<24} {r['checks']:>7} {r['all_pairs_s']:>12.2f} {r['indexed_s']:>10.3f} "
              f"{r['all_pairs_peak_mib']:>9.1f}/{r['indexed_peak_mib']:<9.1f} {r['near_pairs']:>10} {r['same']}")
        if not r["same"]:
            raise SystemExit("the indexed search found other pairs than all pairs")
    with tempfile.TemporaryDirectory() as tmp:
        new = checkout(args.new, Path(tmp) / "new") if args.new else REPO
        versions = {"new": new}
        if args.against:
            versions = {"old": checkout(args.against, Path(tmp) / "old"), "new": new}
        print(f"\n{'shape':<8} {'items':>7} {'version':>7} " + " ".join(f"{c:>21}" for c in commands)
              + "   (seconds / peak MiB, CPU seconds; load = 1-min load average after the command)")
        for shape in args.shapes.split(","):
            for n in [int(x) for x in args.sizes.split(",")]:
                rows = bench_commands(Path(tmp), n, shape, versions, commands)
                for version in versions:
                    mine = [r for r in rows if r["version"] == version]
                    loads = " ".join(f"{r['load']:.1f}" for r in mine)
                    print(f"{shape:<8} {n:>7} {version:>7} " + " ".join(f"{_cell(r):>21}" for r in mine)
                          + f"   load {loads}", flush=True)
                if args.against:
                    by = {(r["version"], r["command"]): r for r in rows}
                    print(f"{shape:<8} {n:>7} {'old/new':>7} " + " ".join(
                        f"{by['old', c]['seconds'] / by['new', c]['seconds']:>9.1f}x,"
                        f"{by['old', c]['cpu'] / by['new', c]['cpu']:>5.1f}x cpu" for c in commands), flush=True)


if __name__ == "__main__":
    main()
