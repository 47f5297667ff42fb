"""How the authoring and dataset commands grow with the number of meta-rubric items: `validate`,
`lint`, `compile`, `diff`, `export` and `import`, each run as the real command line (a fresh
process, startup included), wall time and peak memory (max RSS) per command.

Two shapes of N items: `dataset`, N/10 questions of 10 items (what people build), and
`rubric`, one question of N items (the worst case for the per-question rules). Items cycle
through the four list and fact types; texts draw on a vocabulary that grows with N, as a
real dataset's does. Beside them, the duplicate rule's near-duplicate search on the same
checks as it was (every pair compared, `testing.authoring.all_pairs_near_duplicates`) and as
it is (`rubric.lint.first_near_duplicates`), with a check that both find the same pairs.

    .venv/bin/python scripts/bench_authoring.py [--sizes 1000,10000,100000] [--shapes dataset,rubric]
        [--pairs 1000,2000]
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


def _item(i: int, rng: random.Random, vocab: int) -> dict:
    text = " ".join(f"w{rng.randrange(vocab)}" for _ in range(8))
    base = {"id": f"i{i}", "subject": f"subject {i}", "evidence": ["s1"]}
    kind = i % 4
    if kind == 0:
        return {**base, "type": "simple", "tier": "answer_critical", "fact": f"fact {text}"}
    if kind == 1:
        return {**base, "type": "strict_list", "tier": "valuable", "elements": [f"first {text}", f"second {text}"]}
    if kind == 2:
        return {**base, "type": "flexible_list", "tier": "context", "min_required": 2,
                "options": [f"option {k} {text}" for k in range(4)]}
    return {**base, "type": "process", "tier": "valuable", "steps": [{"text": f"step {k} {text}"} for k in range(3)]}


def write_dataset(path: Path, n_items: int, per_question: int, seed: int = 0) -> Path:
    rng = random.Random(seed)
    vocab = max(5000, n_items)
    with open(path, "w", encoding="utf-8") as f:
        for q in range(0, n_items, per_question):
            items = [_item(i, rng, vocab) for i in range(q, min(q + per_question, n_items))]
            f.write(json.dumps({"question_id": f"q{q}", "domain": "d", "question": f"What is shown here ({q})?",
                                "meta_rubric": {"items": items, "snippets": [{"id": "s1", "title": "Source",
                                                                              "text": "Evidence."}]}}) + "\n")
    return path


def _run(argv: list[str], cwd: Path) -> tuple[float, float, int]:
    """(seconds, peak MiB, exit code) of one command in a fresh process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "gamut_local.cli", *argv], cwd=cwd,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    return time.perf_counter() - t0, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status)


def bench_commands(root: Path, n: int, shape: str) -> list[dict]:
    data = write_dataset(root / f"{shape}-{n}.jsonl", n, 10 if shape == "dataset" else n)
    folder = root / f"{shape}-{n}.export"
    argv = {"validate": [data], "lint": [data], "compile": [data, "--out", root / f"{shape}-{n}.rubric.jsonl"],
            "diff": [data, data], "export": [data, "--out", folder],
            "import": [folder, "--out", root / f"{shape}-{n}.revised.jsonl"]}
    rows = []
    for cmd in COMMANDS:
        seconds, mib, code = _run([cmd, *map(str, argv[cmd])], root)
        # lint exits 1 when it finds errors; the rubrics here have none, so any non-zero is a failure
        rows.append({"shape": shape, "items": n, "command": cmd, "seconds": seconds, "peak_mib": mib, "exit": code})
    return rows


def bench_pairs(n: int) -> dict:
    """The near-duplicate search on the checks of a one-question rubric of n items, both ways."""
    import tracemalloc

    from gamut_local.data.records import Question
    from gamut_local.rubric.compiler import checks_for
    from gamut_local.rubric.lint import NEAR_DUPLICATE, _words, first_near_duplicates
    from gamut_local.testing.authoring import all_pairs_near_duplicates

    with tempfile.TemporaryDirectory() as tmp:
        path = write_dataset(Path(tmp) / "one.jsonl", n, n)
        question = Question.model_validate(json.loads(path.read_text()))
    # every fifth item a rewording of an earlier one, so there are near pairs to find
    checks = checks_for(question)
    words = [_words(c.text) for c in checks]
    for k in range(5, len(words), 5):
        words[k] = words[k - 3] | {f"extra{k}"}
    groups = [c.source_item for c in checks]
    out = {"items": n, "checks": len(checks)}
    for name, fn in (("all_pairs", all_pairs_near_duplicates), ("indexed", first_near_duplicates)):
        tracemalloc.start()
        t0 = time.perf_counter()
        found = fn(words, groups, NEAR_DUPLICATE)
        out[f"{name}_s"] = time.perf_counter() - t0
        out[f"{name}_peak_mib"] = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        out[f"{name}_found"] = found
    out["same"] = out.pop("all_pairs_found") == out["indexed_found"]
    out["near_pairs"] = len(out.pop("indexed_found"))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--shapes", default="dataset,rubric")
    ap.add_argument("--pairs", default="1000,2000", help="rubric sizes for the all-pairs comparison ('' for none)")
    args = ap.parse_args()
    print(f"{'near-duplicate search':<24} {'checks':>7} {'all pairs s':>12} {'indexed s':>10} "
          f"{'peak MiB (all/idx)':>19} {'near pairs':>10} same")
    for n in [int(x) for x in args.pairs.split(",") if x]:
        r = bench_pairs(n)
        print(f"{f'rubric of {n} items':<24} {r['checks']:>7} {r['all_pairs_s']:>12.2f} {r['indexed_s']:>10.3f} "
              f"{r['all_pairs_peak_mib']:>9.1f}/{r['indexed_peak_mib']:<9.1f} {r['near_pairs']:>10} {r['same']}")
        if not r["same"]:
            raise SystemExit("the indexed search found other pairs than all pairs")
    print(f"\n{'shape':<8} {'items':>7} " + " ".join(f"{c:>15}" for c in COMMANDS) + "   (seconds / peak MiB)")
    with tempfile.TemporaryDirectory() as tmp:
        for shape in args.shapes.split(","):
            for n in [int(x) for x in args.sizes.split(",")]:
                rows = bench_commands(Path(tmp), n, shape)
                cells = [f"{r['seconds']:6.1f}/{r['peak_mib']:<6.0f}" + ("" if r["exit"] == 0 else f"!{r['exit']}")
                         for r in rows]
                print(f"{shape:<8} {n:>7} " + " ".join(f"{c:>15}" for c in cells), flush=True)


if __name__ == "__main__":
    main()
