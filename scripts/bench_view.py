"""Benchmark `gamut-local view` at paper scale: app start and page times, as a user sees them.

Builds a seeded run directory in the paper's shape: N questions (default 1,990, each a copy of
one of the sample's 13 questions with its meta-rubric, image and compiled checks, 8-21 checks,
14.5 on average), 14 models x 2 variants with paper-length answers, 3 judges whose verdict
lines are written as the judge stage writes them (label probabilities, raw output, hashes):
about 2.3 million verdicts. Then starts `gamut-local view RUN_DIR` as its own process and
times, over HTTP on 127.0.0.1:

- start: from launching the process to the first answered request (imports, reading every
  verdict store unit's columns, building the queue), its CPU seconds, and the server's peak RSS
  (VmHWM); twice (there is no cache: the second start reads everything again);
- the question page of the question with the most checks (28 responses x its checks x 3
  judges), the questions list, the overview and a queue page: median and max of 20 requests.

With `--strict`, also times the alternative reader, the record-by-record loader
(`data.records.load_records`, a pydantic model per verdict) over one judge's files, in its own
process. Prints one JSON object. Run:

    .venv/bin/python scripts/bench_view.py [--questions 1990] [--dir /tmp/gamut-view-bench] [--keep] [--strict]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np

from gamut_local.data.dataset import load_questions
from gamut_local.rubric.compiler import checks_for
from gamut_local.rundir import verdict_store
from gamut_local.rundir.identity import answer_hash, check_hash
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, for tests.support
from tests.support.sample_run import SAMPLE

LABELS = ("meets", "partially_meets", "missing", "contradicts")
GAMUT = Path(sys.executable).with_name("gamut-local")


def _verdict_line(judge, model, variant, qid, check, code, p, answer: str) -> str:
    verdict = "invalid" if code == 4 else LABELS[code]
    probs = "null" if code == 4 else ('{"contradicts":%r,"meets":%r,"missing":%r,"partially_meets":%r}'
                                      % (float(p[3]), float(p[0]), float(p[2]), float(p[1])))
    raw = json.dumps(f"'{verdict}'") if code != 4 else '"I think so"'
    # The hashes a current verdict carries (rundir.identity), so the viewer counts none as stale.
    return ('{"answer_hash":"%s","attempts":1,"check_hash":"%s","check_id":"%s","judge":"%s",'
            '"method":"first_token","model":"%s","num_cached_tokens":412,"probs":%s,"prompt_tokens":655,'
            '"question_id":"%s","raw":%s,"settings_hash":"5d41402abc4b2a76","tier":"%s","variant":"%s",'
            '"verdict":"%s"}\n'
            % (answer, check_hash(check.text, check.tier, check.kind), check.check_id, judge, model, probs, qid,
               raw, check.tier, variant, verdict))


def build(run: Path, n_questions: int, seed: int = 0) -> dict:
    """The dataset, answers and verdict files of a paper-shaped run; returns counts."""
    rng = np.random.default_rng(seed)
    templates = load_questions(SAMPLE / "questions.jsonl", check_images=False)
    answers = {json.loads(x)["question_id"]: json.loads(x)["response"]
               for x in (SAMPLE / "answers" / "reference.jsonl").read_text().splitlines()
               if '"reference-complete"' in x}
    questions = []
    with open(run / "questions.jsonl", "w", encoding="utf-8") as f:
        for k in range(n_questions):
            t = templates[k % len(templates)]
            d = t.model_dump(mode="json", exclude_none=True)
            d["question_id"] = f"{t.question_id}-{k:05d}"
            if d.get("image", "").startswith(".") or (d.get("image") and not d["image"].startswith("pkg:")):
                d["image"] = str((SAMPLE / d["image"]).resolve())
            f.write(json.dumps(d) + "\n")
            questions.append((d["question_id"], checks_for(t), answers.get(t.question_id, "An answer.")))
    systems = [(f"model-{m:02d}", v) for m in range(14) for v in ("multimodal", "text_only")]
    (run / "answers").mkdir()
    n_verdicts = 0
    for model, variant in systems:
        with open(run / "answers" / f"{model}.{variant}.jsonl", "w", encoding="utf-8") as f:
            for qid, _, text in questions:
                f.write(json.dumps({"question_id": qid, "model": model, "variant": variant, "response": text,
                                    "finish_reason": "stop", "settings_hash": "bench"}) + "\n")
        quality = rng.uniform(0.3, 0.9)
        for judge, noise in (("judge-a", 0.1), ("judge-b", 0.2), ("judge-c", 0.3)):
            out = run / "verdicts" / judge / f"{model}.{variant}.parquet"
            lines = []
            for qid, checks, text in questions:
                truth = np.where(rng.random(len(checks)) < quality, 0, rng.integers(1, 4, len(checks)))
                codes = np.where(rng.random(len(checks)) < noise, rng.integers(0, 5, len(checks)), truth)
                p = rng.dirichlet(np.ones(4), len(checks))
                lines += [_verdict_line(judge, model, variant, qid, ch, int(c), pp, answer_hash(text))
                          for ch, c, pp in zip(checks, codes, p)]
            verdict_store.replace_unit(out, [json.loads(x) for x in lines])  # the store, as the judge leaves it
            n_verdicts += len(lines)
    manifest = {"run": "bench-view", "config": {"dataset": str(run / "questions.jsonl")}}
    (run / "manifest.json").write_text(json.dumps(manifest))
    biggest = max(questions, key=lambda q: len(q[1]))
    size = sum(p.stat().st_size for p in (run / "verdicts").glob("*/*.parquet"))
    return {"questions": n_questions, "systems": len(systems), "judges": 3, "verdicts": n_verdicts,
            "verdict_bytes": size, "page_question": biggest[0], "page_checks": len(biggest[1])}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str) -> tuple[int, float]:
    t0 = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as r:
        r.read()
        return r.status, time.perf_counter() - t0


def _times(url: str, n: int = 20) -> dict:
    ts = [_get(url)[1] for _ in range(n)]
    return {"median_ms": 1000 * float(np.median(ts)), "max_ms": 1000 * max(ts)}


def serve_and_time(run: Path, question: str, cache: Path) -> dict:
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    t0 = time.perf_counter()
    proc = subprocess.Popen([str(GAMUT), "view", str(run), "--port", str(port), "--annotator", "bench"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env={**os.environ, "XDG_CACHE_HOME": str(cache)})
    try:
        while True:
            if proc.poll() is not None:
                raise SystemExit(f"gamut-local view exited: {proc.stderr.read().decode()[-2000:]}")
            try:
                if _get(base + "/api/overview")[0] == 200:
                    break
            except OSError:
                time.sleep(0.05)
        start = time.perf_counter() - t0
        # CPU seconds the server used to get there (user + system): less sensitive than wall
        # time to whatever else the machine is running.
        stat = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        start_cpu = (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")
        pages = {"question": _times(f"{base}/question/{question}"), "questions": _times(f"{base}/questions"),
                 "overview": _times(f"{base}/"), "queue": _times(f"{base}/queue?pos=1000")}
        hwm = next(int(x.split()[1]) for x in Path(f"/proc/{proc.pid}/status").read_text().splitlines()
                   if x.startswith("VmHWM"))
    finally:
        proc.terminate()
        proc.wait(30)
    return {"start_s": start, "start_cpu_s": start_cpu, "peak_rss_mb": hwm / 1024, "pages": pages}


STRICT = """
import resource, sys, time
from pathlib import Path
from gamut_local.data.records import Verdict, load_records, verdict_key
t0 = time.perf_counter()
n = len(load_records(sorted(Path(sys.argv[1]).glob("*.parquet")), Verdict, verdict_key))
print(n, time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""


def strict_reader(run: Path) -> dict:
    out = subprocess.run([sys.executable, "-c", STRICT, str(run / "verdicts" / "judge-a")],
                         capture_output=True, text=True, check=True).stdout.split()
    return {"judge": "judge-a", "verdicts": int(out[0]), "seconds": float(out[1]), "peak_rss_mb": float(out[2])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--questions", type=int, default=1990)
    ap.add_argument("--dir", type=Path, default=Path("/tmp/gamut-view-bench"))
    ap.add_argument("--keep", action="store_true", help="Keep the run directory (and reuse it next time).")
    ap.add_argument("--strict", action="store_true", help="Also time the record-by-record loader on one judge.")
    args = ap.parse_args()
    run = args.dir
    meta = run / "bench.json"
    if not meta.is_file():
        shutil.rmtree(run, ignore_errors=True)
        run.mkdir(parents=True)
        t0 = time.perf_counter()
        shape = build(run, args.questions)
        shape["build_s"] = time.perf_counter() - t0
        meta.write_text(json.dumps(shape))
    shape = json.loads(meta.read_text())
    try:
        with tempfile.TemporaryDirectory() as cache:  # no cache exists; the second start repeats the first
            cold = serve_and_time(run, shape["page_question"], Path(cache))
            warm = serve_and_time(run, shape["page_question"], Path(cache))
        result = {"run": shape, "view": cold, "view_reopened": warm, "cpus": os.cpu_count()}
        if args.strict:
            result["strict_loader_one_judge"] = strict_reader(run)
        v = result["view"]
        result["targets"] = {"start_under_10_s": v["start_s"] < 10,
                             "question_page_under_300_ms": v["pages"]["question"]["max_ms"] < 300}
        print(json.dumps(result, indent=2))
    finally:
        if not args.keep:
            shutil.rmtree(run, ignore_errors=True)


if __name__ == "__main__":
    main()
