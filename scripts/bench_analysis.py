"""Benchmark: `score`, `agree` and `report` at paper scale as whole processes, beside DuckDB.

Builds a run directory in the paper's shape (seeded; size by flags): 1,813 questions x 15
checks, 14 models x 2 variants, 3 judges = 2.28 million verdict records written as the judge
stage writes them, plus the dataset (for domains) and a manifest naming it. Then times, each
as its own process, peak RSS from the kernel (`wait4` rusage of that child):

- `gamut-local score` over all three judges' files (with `--dataset`, as `score-run` does),
- `gamut-local agree` over the same files,
- `gamut-local report RUN_DIR` on a run without `scores/` (nor the agreement in it) or figures
  (computes and draws everything),
- `gamut-local report RUN_DIR` again, now that all of it is current (reuses it),
- DuckDB's SQL of the GAMUT formula (GROUP BYs) over the same files, the reference
  alternative, twice: with `read_json_auto` as the issue measured it, and with the columns
  and types given (DuckDB's fastest); one process each, same files, same machine, same run.

Each gamut-local command runs twice: "cold", with an empty columnar verdict cache
(`GAMUT_LOCAL_CACHE`, see `data/verdict_files.py`), so it parses and checks every byte, as
on files this machine has never read; and "warm", as a run is left by the judge stage,
which caches each file it writes (`verdict_files.cache_files`, called here untimed), once any
command has read it since: these files were written minutes before, so `cache_files` also
remembers their hashes, as the first read after judging does (a file written within 2 s of
being hashed is hashed again on its next read).

Prints one JSON object: seconds, peak RSS, the ratios to DuckDB and whether each target is
met (within 2x of DuckDB's `read_json_auto` time, peak RSS < 1 GB; report on a current run
< 3 s); the ratio to the column-typed DuckDB is printed beside it. Needs
`duckdb` (in the `test` extra). Run:

    .venv/bin/python scripts/bench_analysis.py [--questions 1813] [--checks 15] [--models 14]
        [--variants 2] [--judges 3] [--one-file-per-judge] [--dir /tmp/gamut-bench-run] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import zlib
from pathlib import Path

import numpy as np

from gamut_local.rundir.identity import check_hash

DOMAINS = ("plants", "food", "animals", "vehicles", "local places", "everyday objects",
           "consumer products", "books", "art", "sports", "text", "other")
TIERS = ("answer_critical", "valuable", "context")
LABELS = ("meets", "partially_meets", "missing", "contradicts")
GAMUT = Path(sys.executable).with_name("gamut-local")
CHECK_TEXT = "It says so."  # every check's text: the verdicts carry its check_hash, as the judge writes them


def _verdict_lines(judge: str, model: str, variant: str, qids, check_ids, tiers, codes, probs,
                   settings_hash: str) -> list[str]:
    """JSON lines exactly as the judge stage writes them (`store.dumps`: sorted keys, compact)."""
    lines = []
    for qi, qid in enumerate(qids):
        for c, check in enumerate(check_ids):
            code = int(codes[qi, c])
            verdict = "invalid" if code == 4 else LABELS[code]
            p = probs[qi, c]
            probs_json = "null" if code == 4 else (
                '{"contradicts":%r,"meets":%r,"missing":%r,"partially_meets":%r}'
                % (float(p[3]), float(p[0]), float(p[2]), float(p[1])))
            raw = "'%s'=%.4f" % (verdict, p.max()) if code != 4 else "I think so"
            lines.append(
                '{"answer_hash":"%012x","attempts":%d,"check_hash":"%s","check_id":"%s","judge":"%s",'
                '"method":"first_token","model":"%s","num_cached_tokens":%d,"probs":%s,"prompt_tokens":%d,'
                '"question_id":"%s","raw":%s,"settings_hash":"%s","tier":"%s","variant":"%s","verdict":"%s"}\n'
                % (zlib.crc32(f"{model}/{variant}/{qid}".encode()), 1 + (code == 4),
                   check_hash(CHECK_TEXT, tiers[c], "simple"), check, judge, model,
                   400 + c * 37, probs_json, 420 + c * 37, qid, json.dumps(raw), settings_hash,
                   tiers[c], variant, verdict))
    return lines


def build_run(root: Path, *, questions: int, checks: int, models: int, variants: int, judges: int,
              seed: int = 0, one_file_per_judge: bool = False) -> dict:
    """Write verdicts/<judge>/<model>.<variant>.jsonl (or every verdict of a judge in
    verdicts/<judge>/all.jsonl), dataset.jsonl and manifest.json."""
    rng = np.random.default_rng(seed)
    qids = [f"q{i:05d}" for i in range(questions)]
    check_ids = [f"item{c:02d}.fact" for c in range(checks)]
    tiers = [TIERS[min(c * 3 // checks, 2)] for c in range(checks)]
    names = ["gold"] + [f"judge-{j}" for j in range(1, judges)]
    quality = rng.uniform(0.25, 0.8, size=models)
    n = 0
    for m in range(models):
        for k, variant in enumerate(("multimodal", "text_only")[:variants]):
            u = rng.random((questions, checks))
            q = quality[m] + 0.05 * k
            truth = np.select([u < q, u < q + 0.1, u < 0.95], [0, 1, 2], 3)
            for j, judge in enumerate(names):
                reliability = 1.0 if j == 0 else 0.9 - 0.1 * j
                codes = np.where(rng.random(truth.shape) < reliability, truth,
                                 rng.integers(0, 4, size=truth.shape))
                if j:
                    codes[rng.random(truth.shape) < 0.01] = 4
                logits = rng.normal(size=(questions, checks, 4))
                logits[np.arange(questions)[:, None], np.arange(checks)[None, :], np.minimum(codes, 3)] += 3
                probs = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
                path = root / "verdicts" / judge / ("all.jsonl" if one_file_per_judge
                                                     else f"model-{m:02d}.{variant}.jsonl")
                path.parent.mkdir(parents=True, exist_ok=True)
                with path.open("a") as f:
                    f.write("".join(_verdict_lines(judge, f"model-{m:02d}", variant, qids, check_ids,
                                                   tiers, codes, probs, f"hash{j:08d}")))
                n += codes.size
    dataset = root / "dataset.jsonl"
    dataset.write_text("".join(json.dumps({
        "question_id": q, "domain": DOMAINS[i % len(DOMAINS)], "question": "What is this?",
        "checks": [{"check_id": c, "text": CHECK_TEXT, "tier": t, "kind": "simple",
                    "source_item": c.split(".")[0], "evidence": []} for c, t in zip(check_ids, tiers)]}) + "\n"
        for i, q in enumerate(qids)))
    (root / "manifest.json").write_text(json.dumps({"config": {"dataset": str(dataset.resolve())}}))
    return {"verdicts": n, "judges": names}


def timed_process(argv: list[str], env: dict | None = None) -> dict:
    """Wall seconds and peak RSS (MB) of one child process, from its own rusage."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(map(str, argv))} failed:\n{err}")
    # ru_maxrss is in kilobytes on Linux. CPU seconds (user + system, all threads) are the
    # figure that holds on a shared machine, where wall time also counts waiting for a core.
    return {"seconds": round(wall, 3), "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 3),
            "peak_rss_mb": round(usage.ru_maxrss / 1024, 1)}


# The GAMUT formula in SQL (READER: how DuckDB reads the files). Invalid verdicts count as
# missing; a tier without graded checks drops out and its weight goes to the others.
GAMUT_SQL = """
WITH v AS (
  SELECT judge, model, variant, question_id, tier, verdict
  FROM READER),
t AS (
  SELECT judge, model, variant, question_id, tier,
    (count(*) FILTER (verdict = 'meets') + 0.5 * count(*) FILTER (verdict = 'partially_meets')
     - 2.0 * count(*) FILTER (verdict = 'contradicts'))
    / nullif(count(*) FILTER (verdict IN ('meets', 'partially_meets', 'missing', 'invalid'))
             + 2.0 * count(*) FILTER (verdict = 'contradicts'), 0) AS s
  FROM v GROUP BY ALL),
r AS (
  SELECT judge, model, variant, question_id,
    sum(s * CASE tier WHEN 'answer_critical' THEN 0.6 WHEN 'valuable' THEN 0.3 ELSE 0.1 END)
    / sum(CASE tier WHEN 'answer_critical' THEN 0.6 WHEN 'valuable' THEN 0.3 ELSE 0.1 END) AS score
  FROM t WHERE s IS NOT NULL GROUP BY ALL)
SELECT judge, model, variant, 100 * avg(score) AS gamut FROM r GROUP BY ALL ORDER BY ALL
"""
# The DuckDB process: nothing but duckdb imported, so its time is DuckDB's own.
DUCKDB_SCRIPT = f"""
import sys, duckdb
reader, files = sys.argv[1], sys.argv[2:]
rows = duckdb.connect().execute({GAMUT_SQL!r}.replace("READER", reader), [files]).fetchall()
print(len(rows))
"""
# What the issue measured (`read_json_auto`: DuckDB types every field itself), and DuckDB
# told the columns and their types up front, its fastest way through these files.
DUCKDB_READERS = {
    "duckdb_sql_score_auto": "read_json_auto(?)",
    "duckdb_sql_score_columns": ("read_json(?, format='newline_delimited', columns={judge: 'VARCHAR', "
                                 "model: 'VARCHAR', variant: 'VARCHAR', question_id: 'VARCHAR', "
                                 "check_id: 'VARCHAR', tier: 'VARCHAR', verdict: 'VARCHAR'})"),
}


def time_commands(root: Path, files: list[str], state: str) -> dict:
    """score, agree, a fresh report and a current one, with a cold or a warm verdict cache."""
    gamut = str(GAMUT)
    cache = root / f"cache-{state}"
    shutil.rmtree(cache, ignore_errors=True)
    env = {**os.environ, "GAMUT_LOCAL_CACHE": str(cache)}
    if state == "warm":  # what the judge stage does after writing each file
        subprocess.run([sys.executable, "-c", "import sys; from pathlib import Path; "
                        "from gamut_local.data.verdict_files import cache_files; "
                        "cache_files([Path(p) for p in sys.argv[1:]])", *files], env=env, check=True)

    def fresh_env():
        if state == "cold":  # an empty cache for every command
            shutil.rmtree(cache, ignore_errors=True)
        return env

    out = {
        "score": timed_process([gamut, "score", *files, "--out", str(root / "bench-scores.json"),
                                "--dataset", str(root / "dataset.jsonl")], fresh_env()),
        "agree": timed_process([gamut, "agree", *files, "--out", str(root / "bench-agreement.json")], fresh_env()),
    }
    for made in ("scores", "figures", "tables", "report.md"):  # nothing current (agreement is in scores/)
        target = root / made
        shutil.rmtree(target) if target.is_dir() else target.unlink(missing_ok=True)
    out["report_fresh"] = timed_process([gamut, "report", str(root)], fresh_env())
    out["report_current"] = timed_process([gamut, "report", str(root)], fresh_env())
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--questions", type=int, default=1813)
    ap.add_argument("--checks", type=int, default=15)
    ap.add_argument("--models", type=int, default=14)
    ap.add_argument("--variants", type=int, choices=(1, 2), default=2)
    ap.add_argument("--judges", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dir", type=Path, default=Path("/tmp/gamut-bench-run"))
    ap.add_argument("--one-file-per-judge", action="store_true",
                    help="all of a judge's verdicts in one file (as imported from elsewhere), not one per model and variant")
    ap.add_argument("--keep", action="store_true", help="keep the run directory afterwards")
    args = ap.parse_args()

    root = args.dir
    shutil.rmtree(root, ignore_errors=True)
    t0 = time.perf_counter()
    built = build_run(root, questions=args.questions, checks=args.checks, models=args.models,
                      variants=args.variants, judges=args.judges, seed=args.seed,
                      one_file_per_judge=args.one_file_per_judge)
    build_s = time.perf_counter() - t0
    files = sorted(str(p) for p in (root / "verdicts").glob("*/*.jsonl"))
    size_mb = sum(Path(f).stat().st_size for f in files) / 2**20

    py = sys.executable
    load_before = round(os.getloadavg()[0], 2)  # other work on the machine skews every figure
    results = {name: timed_process([py, "-c", DUCKDB_SCRIPT, reader, *files])
               for name, reader in DUCKDB_READERS.items()}
    for state in ("cold", "warm"):
        results[state] = time_commands(root, files, state)
    auto, columns = (results[k] for k in DUCKDB_READERS)
    for state in ("cold", "warm"):
        for name in ("score", "agree", "report_fresh"):
            r = results[state][name]
            for ref, key in ((auto, "duckdb_auto"), (columns, "duckdb_columns")):
                r[f"ratio_to_{key}"] = round(r["seconds"] / ref["seconds"], 2)
                r[f"cpu_ratio_to_{key}"] = round(r["cpu_seconds"] / ref["cpu_seconds"], 2)
            # The target: within 2x of DuckDB as it measured it (read_json_auto).
            r["meets_target"] = r["ratio_to_duckdb_auto"] <= 2.0 and r["peak_rss_mb"] < 1024
        cur = results[state]["report_current"]
        cur["meets_target"] = cur["seconds"] < 3.0 and cur["peak_rss_mb"] < 1024
    print(json.dumps({
        "shape": {"questions": args.questions, "checks": args.checks, "models": args.models,
                  "variants": args.variants, "judges": args.judges,
                  "one_file_per_judge": args.one_file_per_judge},
        "verdicts": built["verdicts"], "files": len(files), "jsonl_mb": round(size_mb, 1),
        "build_s (not timed work)": round(build_s, 1),
        "load_average_1min_before": load_before,
        "load_average_1min_after": round(os.getloadavg()[0], 2),
        "cpus": os.cpu_count(),
        "results": results,
    }, indent=2))
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
