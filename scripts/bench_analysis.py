"""Benchmark: `score`, `agree`, `report` and `view` at paper scale as whole processes, beside DuckDB.

Builds a run directory in the paper's shape (seeded; size by flags): 1,813 questions x 15
checks, 14 models x 2 variants, 3 judges = 2.28 million verdicts, in the verdict store as the
judge stage leaves it (one compacted Parquet file per judge, model and variant), the same
verdicts as JSON Lines beside it (`jsonl/`, exactly as the judge stage once wrote them), the
answers they graded (`answers/`, as the generate stage writes them: 50,764 of ANSWER_CHARS
characters, ~130 MB), the dataset (for domains) and a manifest naming it. There is no cache
anywhere: the first read is every read. Then times, each as its own process, with its peak
RSS from the kernel (`wait4` rusage of that child):

- `gamut-local score RUN/verdicts --dataset ... --answers ...` (as `score-run` reads them: the
  verdicts checked against the dataset's 1,813 validated and compiled meta-rubrics and the
  answers' hashes, stale ones left out, the domains from the dataset), the same with the
  dataset alone, and `gamut-local score RUN/verdicts` (the formula over the verdicts alone,
  which is all DuckDB's SQL below computes),
- `gamut-local agree RUN/verdicts`,
- `gamut-local report RUN` with nothing current (computes and draws everything, the answers
  read as `score-run` reads them), then again with scores and agreement current (read, not
  computed; the tables and figures are made again),
- `gamut-local view RUN`: from launching the process to its first page answered (the
  overview, served while the run is read in the background),
- DuckDB's SQL of the GAMUT formula (GROUP BYs) over the same Parquet files (`read_parquet`)
  and over the equivalent JSON Lines (`read_json_auto`), one process each,
- and DuckDB doing what `score` does with its inputs beyond the formula (`_dataset_sql`: each
  verdict's check looked up in the dataset by its hash and, with the answers, its answer by
  the hash of its text; stale ones left out, unbacked ones counted, scores per system and per
  domain), with the dataset alone and with the answers too.

Every command runs `--rounds` times (3), DuckDB's and ours in turn, each process after 1 GB
of memory touched and freed (`--prime-mb`; PRIME_MB says why), and each figure is the median
of its rounds (peak RSS the largest). Prints one JSON object: seconds, CPU seconds (and of
them system seconds), peak RSS, the ratios and whether each of the issue's targets is met
(score and agree within 2x of DuckDB over the Parquet and at most 0.5x of DuckDB's
read_json_auto over the JSONL, `score` with and without its inputs alike, and `score` with
them against DuckDB doing that work too; a fresh report within 1.5x of DuckDB
over the JSONL, one with scores and agreement current too; the first page of `view` under 3 s; peak RSS under
1 GB each), and the store's size on disk against the JSONL's. Needs `duckdb` (the `test` extra).

`--jsonl` times the same verdicts given as JSON Lines instead (an old run's files, verdicts
from elsewhere: `jsonl/`), each beside DuckDB's `read_json_auto` over those files:
`gamut-local score RUN/jsonl`, `gamut-local agree RUN/jsonl`, `gamut-local verdicts import
RUN/jsonl/*/*.jsonl --into` a new run, a fresh `gamut-local report` of a copy of the run
whose `verdicts/` holds the JSONL (an old run, answers and dataset as before), and the reader
they all read the JSONL through (`verdict_table.read_verdicts`) alone in a process; the
target: within 2x of DuckDB over the JSONL and under 1 GB each. `verdicts import` and `report`
do more than read, so each is also set beside DuckDB doing that work: the JSONL written as
Parquet, a file per judge, model and variant (`COPY ... PARTITION_BY`), and the JSONL read
with the dataset and the answers and looked up in them (`_dataset_sql`).
Run:

    .venv/bin/python scripts/bench_analysis.py [--questions 1813] [--checks 15] [--models 14]
        [--variants 2] [--judges 3] [--rounds 3] [--prime-mb 1024] [--dir /tmp/gamut-bench-run] [--keep]
        [--jsonl]
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import shutil
import subprocess
import sys
import socket
import tempfile
import time
import urllib.request
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from gamut_local.rundir import verdict_store
from gamut_local.rundir.identity import HASH_CHARS, answer_hash, check_hash

DOMAINS = ("plants", "food", "animals", "vehicles", "local places", "everyday objects",
           "consumer products", "books", "art", "sports", "text", "other")
TIERS = ("answer_critical", "valuable", "context")
LABELS = ("meets", "partially_meets", "missing", "contradicts")
GAMUT = Path(sys.executable).with_name("gamut-local")


def check_text(qid: str, check: str) -> str:
    """A check's text: its own, as in a real dataset, so the verdicts carry as many check hashes
    as there are checks (27,195 at paper scale), as the judge writes them."""
    return f"It says so ({qid}, {check})."


ANSWER_CHARS = 2400  # about 400 words: a long-form answer
_WORDS = ("the", "plant", "grows", "in", "temperate", "climates", "and", "its", "leaves", "are", "broad", "with",
          "serrated", "edges", "while", "flowers", "appear", "in", "spring", "before", "fruit", "ripens")


def answer_texts(rng, n: int) -> list[str]:
    """`n` answers of ANSWER_CHARS characters, each its own text (so each its own hash)."""
    words = np.asarray(_WORDS)[rng.integers(0, len(_WORDS), size=(n, ANSWER_CHARS // 5))]
    return [f"Answer {i}: " + " ".join(row)[:ANSWER_CHARS] for i, row in enumerate(words.tolist())]


def _verdict_lines(judge: str, model: str, variant: str, qids, check_ids, tiers, codes, probs,
                   settings_hash: str, hashes: list[list[str]], answers: list[str]) -> list[str]:
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
                '{"answer_hash":"%s","attempts":%d,"check_hash":"%s","check_id":"%s","judge":"%s",'
                '"method":"first_token","model":"%s","num_cached_tokens":%d,"probs":%s,"prompt_tokens":%d,'
                '"question_id":"%s","raw":%s,"settings_hash":"%s","tier":"%s","variant":"%s","verdict":"%s"}\n'
                % (answers[qi], 1 + (code == 4),
                   hashes[qi][c], check, judge, model,
                   400 + c * 37, probs_json, 420 + c * 37, qid, json.dumps(raw), settings_hash,
                   tiers[c], variant, verdict))
    return lines


def _store_table(judge: str, model: str, variant: str, qids, check_ids, tiers, codes, probs,
                 settings_hash: str, hashes: list[list[str]], answers: list[str]):
    """The same verdicts as `_verdict_lines`, as the store's Arrow table (built from the arrays)."""
    import pyarrow as pa

    nq, nc = codes.shape
    flat = codes.ravel()
    invalid = flat == 4
    verdicts = [*LABELS, "invalid"]

    def coded(indices, dictionary):
        return pa.DictionaryArray.from_arrays(pa.array(np.asarray(indices, dtype=np.int32)), pa.array(dictionary))

    def const(value):
        return coded(np.zeros(nq * nc), [value])

    p = probs.reshape(-1, 4)
    raw = ["I think so" if bad else "'%s'=%.4f" % (verdicts[k], m)
           for bad, k, m in zip(invalid.tolist(), flat.tolist(), p.max(axis=1).tolist())]
    tier_names = sorted(set(tiers))
    columns = {
        "question_id": coded(np.repeat(np.arange(nq), nc), list(qids)), "model": const(model),
        "variant": const(variant), "judge": const(judge),
        "check_id": coded(np.tile(np.arange(nc), nq), list(check_ids)),
        "tier": coded(np.tile([tier_names.index(t) for t in tiers], nq), tier_names),
        "verdict": coded(flat, verdicts), "raw": pa.array(raw, pa.string()),
        **{name: pa.array(p[:, k], pa.float64(), mask=invalid) for k, name in enumerate(verdict_store.PROB_COLUMNS)},
        "method": const("first_token"),
        "settings_hash": const(settings_hash),
        "check_hash": coded(np.arange(nq * nc), [h for row in hashes for h in row]),
        "answer_hash": coded(np.repeat(np.arange(nq), nc), list(answers)),
        "prompt_tokens": pa.array(np.tile(420 + np.arange(nc) * 37, nq), pa.int64()),
        "num_cached_tokens": pa.array(np.tile(400 + np.arange(nc) * 37, nq), pa.int64()),
        "attempts": pa.array(1 + invalid.astype(np.int64), pa.int64()),
        "extra": pa.nulls(nq * nc, pa.string()),
    }
    schema = verdict_store.schema({"through_part": 0})
    return pa.Table.from_arrays([columns[f.name] for f in schema], schema=schema)


def _write_answers(root: Path, model: str, variant: str, qids: list[str], rng) -> list[str]:
    """A system's answers file; returns each answer's hash, as its verdicts carry it."""
    texts = answer_texts(rng, len(qids))
    path = root / "answers" / f"{model}.{variant}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({
        "question_id": q, "model": model, "variant": variant, "response": text, "finish_reason": "stop",
        "prompt_tokens": 620, "completion_tokens": 540, "settings_hash": "0123456789abcdef",
        "prompt_hash": "fedcba9876543210"}) + "\n" for q, text in zip(qids, texts)))
    return [answer_hash(text) for text in texts]


def build_run(root: Path, *, questions: int, checks: int, models: int, variants: int, judges: int,
              seed: int = 0) -> dict:
    """Write the store (verdicts/<judge>/<model>.<variant>.parquet), the same verdicts as
    jsonl/<judge>/<model>.<variant>.jsonl, the answers they graded (answers/<model>.<variant>.jsonl,
    as the generate stage writes them), dataset.jsonl and manifest.json."""
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    qids = [f"q{i:05d}" for i in range(questions)]
    check_ids = [f"item{c:02d}.fact" for c in range(checks)]
    tiers = [TIERS[min(c * 3 // checks, 2)] for c in range(checks)]
    names = ["gold"] + [f"judge-{j}" for j in range(1, judges)]
    hashes = [[check_hash(check_text(q, c), t, "simple") for c, t in zip(check_ids, tiers)] for q in qids]
    quality = rng.uniform(0.25, 0.8, size=models)
    n = 0
    for m in range(models):
        for k, variant in enumerate(("multimodal", "text_only")[:variants]):
            answers = _write_answers(root, f"model-{m:02d}", variant, qids, rng)
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
                args = (judge, f"model-{m:02d}", variant, qids, check_ids, tiers, codes, probs, f"hash{j:08d}", hashes,
                        answers)
                path = root / "jsonl" / judge / f"model-{m:02d}.{variant}.jsonl"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text("".join(_verdict_lines(*args)))
                unit = root / "verdicts" / judge / f"model-{m:02d}.{variant}.parquet"
                unit.parent.mkdir(parents=True, exist_ok=True)
                pq.write_table(_store_table(*args), unit, compression=verdict_store.COMPRESSION)
                n += codes.size
    dataset = root / "dataset.jsonl"
    dataset.write_text("".join(json.dumps({
        "question_id": q, "domain": DOMAINS[i % len(DOMAINS)], "question": "What is this?",
        "checks": [{"check_id": c, "text": check_text(q, c), "tier": t, "kind": "simple",
                    "source_item": c.split(".")[0], "evidence": []} for c, t in zip(check_ids, tiers)]}) + "\n"
        for i, q in enumerate(qids)))
    (root / "manifest.json").write_text(json.dumps({"config": {"dataset": str(dataset.resolve())}}))
    return {"verdicts": n, "judges": names}


# Fresh memory on a VM whose host takes freed memory back (free page reporting: the CI kind of
# machine) costs up to ~13 ms per MB to touch, and ~0.2-0.8 ms per MB where another process
# freed it within the last two seconds. A process's time would then depend on how much the
# one before it happened to free (`score --dataset`: 1.0-2.6 s). So before each timed process
# a process touches PRIME_MB and exits: DuckDB's processes and ours all start with that much
# recently freed memory, as on a machine that keeps its memory (`--prime-mb 0`: not). A
# process of its own, not this one: a child's peak RSS starts at its parent's (Linux carries
# the high-water mark across fork and exec).
PRIME_MB = 1024
prime_mb = PRIME_MB


def prime() -> None:
    """Touch `prime_mb` of memory in a process of its own, which frees it (see PRIME_MB)."""
    if prime_mb:
        subprocess.run([sys.executable, "-c", f"import numpy; numpy.ones({prime_mb << 17})"], check=True)


def _figures(seconds: float, usage) -> dict:
    """A timed process's figures from its wall seconds and its rusage (`os.wait4`)."""
    # ru_maxrss is in kilobytes on Linux. CPU seconds (user + system, all threads) are the
    # figure that holds on a shared machine, where wall time also counts waiting for a core.
    # System seconds apart: on a VM whose host takes freed memory back, they are the price of
    # fresh memory, which swings between runs (docs/performance.md, "fresh memory").
    return {"seconds": round(seconds, 3), "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 3),
            "system_seconds": round(usage.ru_stime, 3), "peak_rss_mb": round(usage.ru_maxrss / 1024, 1)}


def timed_process(argv: list[str], env: dict | None = None) -> dict:
    """Wall seconds and peak RSS (MB) of one child process, from its own rusage."""
    prime()
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(map(str, argv))} failed:\n{err}")
    return _figures(wall, usage)


# The GAMUT formula in SQL (READER: how DuckDB reads the files). Invalid verdicts count as
# missing; a tier without graded checks drops out and its weight goes to the others.
def _formula(keys: str = "") -> str:
    """The formula as two CTEs over `v`: `t`, each (response, tier)'s score, and `r`, each
    response's; `keys`: columns a response carries beside its system and question."""
    return f"""t AS (
  SELECT judge, model, variant, question_id{keys}, tier,
    (count(*) FILTER (verdict = 'meets') + 0.5 * count(*) FILTER (verdict = 'partially_meets')
     - 2.0 * count(*) FILTER (verdict = 'contradicts'))
    / nullif(count(*) FILTER (verdict IN ('meets', 'partially_meets', 'missing', 'invalid'))
             + 2.0 * count(*) FILTER (verdict = 'contradicts'), 0) AS s
  FROM v GROUP BY ALL),
r AS (
  SELECT judge, model, variant, question_id{keys},
    sum(s * CASE tier WHEN 'answer_critical' THEN 0.6 WHEN 'valuable' THEN 0.3 ELSE 0.1 END)
    / sum(CASE tier WHEN 'answer_critical' THEN 0.6 WHEN 'valuable' THEN 0.3 ELSE 0.1 END) AS score
  FROM t WHERE s IS NOT NULL GROUP BY ALL)"""


GAMUT_SQL = f"""
WITH v AS (
  SELECT judge, model, variant, question_id, tier, verdict
  FROM READER),
{_formula()}
SELECT judge, model, variant, 100 * avg(score) AS gamut FROM r GROUP BY ALL ORDER BY ALL
"""
# The DuckDB process: nothing but duckdb imported, so its time is DuckDB's own.
DUCKDB_SCRIPT = f"""
import sys, duckdb
reader, files = sys.argv[1], sys.argv[2:]
rows = duckdb.connect().execute({GAMUT_SQL!r}.replace("READER", reader), [files]).fetchall()
print(len(rows))
"""
# DuckDB over the store's Parquet (the same files `score` reads), and over the equivalent JSONL
# with `read_json_auto` (DuckDB types every field itself), as the issue measures them.
DUCKDB_READERS = {"duckdb_parquet": ("read_parquet(?)", "verdicts/*/*.parquet"),
                  "duckdb_json_auto": ("read_json_auto(?)", "jsonl/*/*.jsonl")}

# What `score --dataset` does beyond the formula, in SQL over the same store and dataset: each
# verdict's check looked up in the dataset (question, check id, tier); those worded otherwise
# now (the check hash of text, tier and kind, as `rundir.identity.check_hash` makes it) left
# out as stale; those the dataset does not back counted (score refuses them); the scores per
# system and per system and domain. With `answers` (what `score-run` adds: `--answers`), each
# verdict's answer looked up too, and those that graded another text of it (the answer hash
# of its response, as `rundir.identity.answer_hash` makes it) left out as stale.
def _dataset_sql(answers: bool, verdicts: str = "read_parquet") -> str:
    answer_cte = f"""
answers AS (
  SELECT question_id, model, variant, left(sha256(response), {HASH_CHARS}) AS answer_hash FROM read_json_auto(?)),"""
    return f"""
WITH checks AS (
  SELECT question_id, domain, c.check_id AS check_id, c.tier AS tier,
    left(sha256(c.text || chr(0) || c.tier || chr(0) || c.kind), {HASH_CHARS}) AS check_hash
  FROM (SELECT question_id, domain, unnest(checks) AS c FROM read_json_auto(?))),{answer_cte if answers else ""}
every AS (
  SELECT judge, model, variant, question_id, check_id, tier, verdict, check_hash{", answer_hash" if answers else ""}
  FROM {verdicts}(?)),
v AS (
  SELECT judge, model, variant, question_id, tier, verdict, domain
  FROM every JOIN checks USING (question_id, check_id, tier, check_hash){
    " JOIN answers USING (question_id, model, variant, answer_hash)" if answers else ""}),
{_formula(', domain')}
SELECT judge, model, variant, domain, 100 * avg(score) AS gamut,
  (SELECT count(*) FROM every ANTI JOIN checks USING (question_id, check_id, tier)) AS unbacked
FROM r GROUP BY GROUPING SETS ((judge, model, variant), (judge, model, variant, domain)) ORDER BY ALL
"""


GAMUT_DATASET_SQL, GAMUT_RUN_SQL = _dataset_sql(False), _dataset_sql(True)
DATASET_READER, RUN_READER = "duckdb_parquet_with_dataset", "duckdb_parquet_with_dataset_and_answers"
# argv: the dataset, the answers files as a JSON list ([]: none), the store's files.
DUCKDB_DATASET_SCRIPT = f"""
import json, sys, duckdb
dataset, answers, files = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3:]
sql, params = ({GAMUT_RUN_SQL!r}, [dataset, answers, files]) if answers else ({GAMUT_DATASET_SQL!r}, [dataset, files])
if files[0].endswith(".jsonl"):  # an old run's verdicts: what `report` of it reads
    sql = {_dataset_sql(True, "read_json_auto")!r}
print(len(duckdb.connect().execute(sql, params).fetchall()))
"""
# What `verdicts import` does, in DuckDB: the JSONL read and written as Parquet, one file per
# (judge, model, variant) as the store holds them, LZ4 as the store compresses.
# argv: the output folder, then the JSONL files.
DUCKDB_TO_STORE_SCRIPT = """
import sys, duckdb
out, files = sys.argv[1], sys.argv[2:]
duckdb.connect().execute(f"COPY (SELECT * FROM read_json_auto(?)) TO '{out}' "
                         "(FORMAT parquet, PARTITION_BY (judge, model, variant), COMPRESSION lz4)", [files])
"""
# Our reader alone over the JSONL, in a process: what `score`, `agree`, `report` and `verdicts
# import` each read them through (`verdict_table`), every column `report` reads.
READER_SCRIPT = """
import sys
from gamut_local.data.verdict_table import read_verdicts
print(len(read_verdicts(sys.argv[1:])))
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def time_view(root: Path) -> dict:
    """`gamut-local view RUN`: seconds from launch to the first page answered, and the server's
    peak RSS (its rusage once stopped)."""
    port = _free_port()
    prime()
    t0 = time.perf_counter()
    proc = subprocess.Popen([str(GAMUT), "view", str(root), "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    first = None
    while first is None and proc.poll() is None and time.perf_counter() - t0 < 600:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as r:
                r.read()
                first = time.perf_counter() - t0
        except OSError:
            time.sleep(0.05)
    proc.terminate()
    _, _, usage = os.wait4(proc.pid, 0)
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    if first is None:
        raise SystemExit(f"gamut-local view never answered:\n{err}")
    return _figures(first, usage)


def time_commands(root: Path) -> dict:
    """score (as score-run reads: the dataset and the answers), score with the dataset alone, score
    without either, agree, a fresh report, a current one and view's first page, each a process."""
    gamut, store = str(GAMUT), str(root / "verdicts")
    # score's and agree's files go beside the run, not into it: the report computes its own.
    beside = Path(f"{root}-outputs")
    beside.mkdir(exist_ok=True)
    dataset = ["--dataset", str(root / "dataset.jsonl")]
    answers = [a for p in sorted((root / "answers").glob("*.jsonl")) for a in ("--answers", str(p))]
    out = {
        "score": timed_process([gamut, "score", store, "--out", str(beside / "bench-scores.json"), *dataset, *answers]),
        "score_dataset": timed_process([gamut, "score", store, "--out", str(beside / "bench-scores-d.json"), *dataset]),
        "score_no_dataset": timed_process([gamut, "score", store, "--out", str(beside / "bench-scores-nd.json")]),
        "agree": timed_process([gamut, "agree", store, "--out", str(beside / "bench-agreement.json")]),
    }
    shutil.rmtree(beside)
    for made in ("scores", "figures", "tables", "report.md"):  # nothing current (agreement is in scores/)
        target = root / made
        shutil.rmtree(target) if target.is_dir() else target.unlink(missing_ok=True)
    out["report_fresh"] = timed_process([gamut, "report", str(root)])
    out["report_current"] = timed_process([gamut, "report", str(root)])
    out["view_first_page"] = time_view(root)
    return out


def old_run(root: Path) -> Path:
    """A copy of the run as an old one left it: its verdicts JSON Lines in `verdicts/` (hard
    links to `jsonl/`), its answers, dataset and manifest as they are."""
    old = Path(f"{root}-old")
    shutil.rmtree(old, ignore_errors=True)
    for path in [*root.glob("jsonl/*/*.jsonl"), *root.glob("answers/*.jsonl"), root / "dataset.jsonl",
                 root / "manifest.json"]:
        rel = path.relative_to(root)
        target = old / ("verdicts" / rel.relative_to("jsonl") if rel.parts[0] == "jsonl" else rel)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.link(path, target)
    return old


# A command as `gamut-local` runs it, with the time its verdict read takes (every reader of
# verdict files goes through `verdict_table._read_checked`) appended to $BENCH_READ_PHASE as
# JSON: wall seconds and this process's CPU seconds (all its threads) from entering it to leaving.
READ_PHASE_SCRIPT = """
import json, os, sys, time
from gamut_local.data import verdict_table
read = verdict_table._read_checked
def timed(*args, **kwargs):
    t, c = time.perf_counter(), time.process_time()
    try:
        return read(*args, **kwargs)
    finally:
        with open(os.environ["BENCH_READ_PHASE"], "a") as f:
            f.write(json.dumps({"seconds": time.perf_counter() - t, "cpu_seconds": time.process_time() - c}) + "\\n")
verdict_table._read_checked = timed
from gamut_local.cli.main import main
sys.argv = ["gamut-local", *sys.argv[1:]]
main()
"""


def timed_command(argv: list[str]) -> dict:
    """`timed_process` of `gamut-local ARGV`, with `read_phase`: the seconds and CPU seconds its
    verdict read took inside it (summed where it reads twice)."""
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "read.jsonl"
        out = timed_process([sys.executable, "-c", READ_PHASE_SCRIPT, *argv], env={**os.environ, "BENCH_READ_PHASE": str(log)})
        phases = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    if not phases:
        raise SystemExit(f"gamut-local {' '.join(argv)} read no verdicts through verdict_table._read_checked")
    out["read_phase"] = {k: sum(p[k] for p in phases) for k in ("seconds", "cpu_seconds")}
    return out


def time_jsonl_commands(root: Path, old: Path) -> dict:
    """score, agree and verdicts import over the run's JSONL, and a fresh report of the old run
    (`old_run`), each a process, with the time its read of the JSONL took (`timed_command`)."""
    jsonl = str(root / "jsonl")
    beside = Path(f"{root}-outputs")
    shutil.rmtree(beside, ignore_errors=True)
    beside.mkdir()
    out = {"score_jsonl": timed_command(["score", jsonl, "--out", str(beside / "scores.json")]),
           "agree_jsonl": timed_command(["agree", jsonl, "--out", str(beside / "agreement.json")]),
           "import_jsonl": timed_command(["verdicts", "import", *map(str, sorted((root / "jsonl").glob("*/*.jsonl"))),
                                          "--into", str(beside / "run")])}
    shutil.rmtree(beside)
    for made in ("scores", "figures", "tables", "report.md"):
        target = old / made
        shutil.rmtree(target) if target.is_dir() else target.unlink(missing_ok=True)
    out["report_jsonl_fresh"] = timed_command(["report", str(old)])
    return out


def jsonl_rounds(root: Path, rounds: int) -> list[dict]:
    """`--jsonl`'s rounds: DuckDB's read_json_auto and our commands over the JSONL in turn,
    round after round (a load spike hits one round, not one side)."""
    old, out = old_run(root), []
    jsonl = sorted(str(p) for p in root.glob("jsonl/*/*.jsonl"))
    answers = json.dumps(sorted(str(p) for p in root.glob("answers/*.jsonl")))
    copied = Path(f"{root}-duckdb-store")
    for _ in range(rounds):
        r = {"duckdb_json_auto": timed_process([sys.executable, "-c", DUCKDB_SCRIPT, "read_json_auto(?)", *jsonl])}
        shutil.rmtree(copied, ignore_errors=True)
        r["duckdb_json_to_store"] = timed_process([sys.executable, "-c", DUCKDB_TO_STORE_SCRIPT, str(copied), *jsonl])
        r["duckdb_json_with_dataset_and_answers"] = timed_process(
            [sys.executable, "-c", DUCKDB_DATASET_SCRIPT, str(root / "dataset.jsonl"), answers, *jsonl])
        r["gamut_local"] = time_jsonl_commands(root, old)
        r["gamut_local"]["reader_jsonl"] = timed_process([sys.executable, "-c", READER_SCRIPT, *jsonl])
        out.append(r)
    shutil.rmtree(copied, ignore_errors=True)
    shutil.rmtree(old, ignore_errors=True)
    return out


def jsonl_targets(results: dict) -> None:
    """Each JSONL command's ratios to DuckDB's read_json_auto over the same files, and whether
    it is within 2x of it and under 1 GB; `verdicts import` and `report` also against DuckDB
    doing their work (writing the store's files; reading the dataset and the answers beside
    the verdicts, with the lookups `score` makes), the target for those being the same 2x."""
    ours = results["gamut_local"]
    for r in ours.values():
        _ratios(r, results["duckdb_json_auto"], "duckdb_json_auto")
        r["meets_target"] = r["ratio_to_duckdb_json_auto"] <= 2.0 and r["peak_rss_mb"] < 1024
        if "read_phase" in r:  # the command's read of the JSONL, inside it: the target's "read"
            _ratios(r["read_phase"], results["duckdb_json_auto"], "duckdb_json_auto")
            r["read_meets_target"] = r["read_phase"]["ratio_to_duckdb_json_auto"] <= 2.0 and r["peak_rss_mb"] < 1024
    for name, same in (("import_jsonl", "duckdb_json_to_store"), ("report_jsonl_fresh", "duckdb_json_with_dataset_and_answers")):
        _ratios(ours[name], results[same], same)
        ours[name]["meets_target_against_the_same_work"] = (
            ours[name][f"ratio_to_{same}"] <= 2.0 and ours[name]["peak_rss_mb"] < 1024)


def median_of(runs: list[dict]) -> dict:
    """Each figure's median over the rounds (peak RSS: the largest)."""
    return {"seconds": float(np.median([r["seconds"] for r in runs])),
            "cpu_seconds": float(np.median([r["cpu_seconds"] for r in runs])),
            "system_seconds": float(np.median([r["system_seconds"] for r in runs])),
            "peak_rss_mb": max(r["peak_rss_mb"] for r in runs), "rounds": len(runs),
            **({"read_phase": {k: float(np.median([r["read_phase"][k] for r in runs])) for k in ("seconds", "cpu_seconds")}}
               if all("read_phase" in r for r in runs) else {})}


def _ratios(r: dict, ref: dict, key: str) -> None:
    r[f"ratio_to_{key}"] = round(r["seconds"] / ref["seconds"], 2)
    r[f"cpu_ratio_to_{key}"] = round(r["cpu_seconds"] / ref["cpu_seconds"], 2)


def targets(results: dict) -> None:
    """Each measurement's ratios to DuckDB and whether it meets the issue's target."""
    parquet, jsonl = results["duckdb_parquet"], results["duckdb_json_auto"]
    ours = results["gamut_local"]
    for name in ("score", "score_dataset", "score_no_dataset", "agree", "report_fresh", "report_current"):
        _ratios(ours[name], parquet, "duckdb_parquet")
        _ratios(ours[name], jsonl, "duckdb_json_auto")
    small = all(r["peak_rss_mb"] < 1024 for r in ours.values())
    for name in ("score", "score_dataset", "score_no_dataset", "agree"):
        r = ours[name]
        r["meets_target"] = r["ratio_to_duckdb_parquet"] <= 2.0 and r["ratio_to_duckdb_json_auto"] <= 0.5 and small
    # `score` with its inputs against DuckDB doing the same work with them (_dataset_sql).
    for name, reader in (("score", RUN_READER), ("score_dataset", DATASET_READER)):
        r = ours[name]
        _ratios(r, results[reader], reader)
        r["meets_target_against_the_same_work"] = (
            r[f"ratio_to_{reader}"] <= 2.0 and r["ratio_to_duckdb_json_auto"] <= 0.5 and small)
    ours["report_fresh"]["meets_target"] = ours["report_fresh"]["ratio_to_duckdb_json_auto"] <= 1.5 and small
    ours["report_current"]["meets_target"] = ours["report_current"]["ratio_to_duckdb_json_auto"] <= 1.5 and small
    ours["view_first_page"]["meets_target"] = ours["view_first_page"]["seconds"] < 3.0 and small


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--questions", type=int, default=1813)
    ap.add_argument("--checks", type=int, default=15)
    ap.add_argument("--models", type=int, default=14)
    ap.add_argument("--variants", type=int, choices=(1, 2), default=2)
    ap.add_argument("--judges", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dir", type=Path, default=Path("/tmp/gamut-bench-run"))
    ap.add_argument("--rounds", type=int, default=3, help="rounds of every command; each figure is the median")
    ap.add_argument("--keep", action="store_true", help="keep the run directory afterwards")
    ap.add_argument("--prime-mb", type=int, default=PRIME_MB,
                    help="memory touched and freed before each timed process (0: none; see PRIME_MB)")
    ap.add_argument("--jsonl", action="store_true",
                    help="time score, agree, verdicts import and report over the verdicts as JSON Lines instead")
    args = ap.parse_args()
    if args.rounds < 1:
        ap.error(f"--rounds must be at least 1, not {args.rounds}")
    if args.prime_mb < 0:
        ap.error(f"--prime-mb must be 0 or more, not {args.prime_mb}")
    global prime_mb
    prime_mb = args.prime_mb

    root = args.dir
    shutil.rmtree(root, ignore_errors=True)
    t0 = time.perf_counter()
    # Built in a process of its own: a child's peak RSS starts at its parent's (Linux carries the
    # high-water mark across fork and exec), and building takes this process to ~190 MB.
    with ProcessPoolExecutor(1) as pool:
        built = pool.submit(build_run, root, questions=args.questions, checks=args.checks, models=args.models,
                            variants=args.variants, judges=args.judges, seed=args.seed).result()
    build_s = time.perf_counter() - t0
    size = {kind: sum(p.stat().st_size for p in root.glob(pattern)) / 2**20
            for kind, pattern in (("store", "verdicts/*/*.parquet"), ("jsonl", "jsonl/*/*.jsonl"),
                                  ("answers", "answers/*.jsonl"))}

    # Bytecode compiled once, as an installed package has it: where PYTHONDONTWRITEBYTECODE is
    # set (this machine), every command would otherwise compile the package again (~0.04 s).
    compileall.compile_dir(Path(verdict_store.__file__).parents[1], quiet=1)
    load_before = round(os.getloadavg()[0], 2)  # other work on the machine skews every figure
    store = sorted(str(p) for p in root.glob("verdicts/*/*.parquet"))
    answers = json.dumps(sorted(str(p) for p in root.glob("answers/*.jsonl")))
    dataset_sql = {reader: [sys.executable, "-c", DUCKDB_DATASET_SCRIPT, str(root / "dataset.jsonl"), given, *store]
                   for reader, given in ((DATASET_READER, "[]"), (RUN_READER, answers))}
    rounds = jsonl_rounds(root, args.rounds) if args.jsonl else []
    for _ in range(0 if args.jsonl else args.rounds):  # DuckDB and ours in turn (see jsonl_rounds)
        r = {name: timed_process([sys.executable, "-c", DUCKDB_SCRIPT, reader, *sorted(str(p) for p in root.glob(pattern))])
             for name, (reader, pattern) in DUCKDB_READERS.items()}
        r |= {reader: timed_process(argv) for reader, argv in dataset_sql.items()}
        r["gamut_local"] = time_commands(root)
        rounds.append(r)
    results = {name: median_of([r[name] for r in rounds]) for name in rounds[0] if name != "gamut_local"}
    results["gamut_local"] = {name: median_of([r["gamut_local"][name] for r in rounds]) for name in rounds[0]["gamut_local"]}
    jsonl_targets(results) if args.jsonl else targets(results)
    print(json.dumps({
        "shape": {"questions": args.questions, "checks": args.checks, "models": args.models,
                  "variants": args.variants, "judges": args.judges},
        "verdicts": built["verdicts"], "store_mb": round(size["store"], 1), "jsonl_mb": round(size["jsonl"], 1),
        "store_to_jsonl": round(size["store"] / size["jsonl"], 3), "answers_mb": round(size["answers"], 1),
        "build_s (not timed work)": round(build_s, 1),
        "rounds": args.rounds, "load_average_1min_before": load_before,
        "load_average_1min_after": round(os.getloadavg()[0], 2),
        "cpus": os.cpu_count(), "prime_mb": prime_mb,
        "results": results,
    }, indent=2))
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
