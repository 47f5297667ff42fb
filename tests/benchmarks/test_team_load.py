"""A team's load on one `view --team` (timed, bounded): a paper-scale calibration sample on disk
(14 models x 2 variants x 50 responses = 1,400 responses, ~20,000 checks, about 21,000 human
verdicts already made by five annotators) and five annotators writing at once over HTTP on
127.0.0.1, each in their own session: the queue's next item and a verdict's write each answer
within 100 ms at the 95th percentile, and every acknowledged verdict is on disk once.

The viewer runs as `gamut-local view RUN --team`, its own process, as a team starts it; the
five annotators are threads of this one. Bounded: at most WRITES verdicts each and LIMIT_S
seconds in all. Prints the measured percentiles (run with -s to see them).
"""

from __future__ import annotations

import http.cookiejar
import importlib.util
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_view.py"
TEAM = ("ann1", "ann2", "ann3", "ann4", "ann5")
LEFT = 4  # responses each annotator still has to grade when the load starts
WRITES = 60  # verdicts each annotator writes under load, at most
LIMIT_S = 120.0
P95_MS = 100.0
CELL = ("question_id", "model", "variant", "check_id")


def _build(run: Path) -> dict:
    spec = importlib.util.spec_from_file_location("bench_view", SCRIPT)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench.build(run, 50)


def _prefill(run: Path, name: str) -> int:
    """Human verdicts of the sample, as the viewer writes them, for each annotator's assignment
    but its last LEFT responses; returns how many."""
    from gamut_local.reporting.team import load
    from gamut_local.viewer.index import open_run
    from gamut_local.viewer.pages import cells_of

    index, plan = open_run(run), load(run)
    order, number, _, responses, _ = cells_of(index, name)
    design = index.samples[name]
    prob = {(s.model, s.variant): s.inclusion_probability for s in design.strata}
    files: dict[Path, list[str]] = {}
    now = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
    for who in TEAM:
        mine = [k for k, r in enumerate(responses) if who in plan.responses[r]][:-LEFT]
        for cell in order[np.isin(number, mine)].tolist():
            qid, model, variant, check_id = index.cell_names(cell)
            rec = {"question_id": qid, "model": model, "variant": variant, "judge": f"human-{who}",
                   "check_id": check_id, "tier": ["answer_critical", "valuable", "context"][int(index.cells.tier[cell])],
                   "verdict": "meets", "raw": None, "probs": None, "note": None,
                   **index.shown_identity(qid, model, variant, check_id), "annotated_at": now, "revision": 1,
                   "sample_id": design.sample_id, "inclusion_probability": prob[(model, variant)]}
            path = run / "verdicts" / f"human-{who}" / f"{model}.{variant}.jsonl"
            files.setdefault(path, []).append(json.dumps(rec) + "\n")
    for path, lines in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(lines))
    return sum(len(x) for x in files.values())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Member:
    """One annotator's browser: a cookie jar, and the times of what it asked."""

    def __init__(self, base: str, name: str, token: str):
        self.base, self.name = base, name
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
        self.opener.open(f"{base}/signin?token={token}", timeout=30).read()
        self.next_ms: list[float] = []
        self.write_ms: list[float] = []
        self.acked: list[tuple] = []
        self.errors: list[str] = []

    def _call(self, path: str, body: dict | None = None) -> dict:
        req = urllib.request.Request(self.base + path, method="POST" if body else "GET",
                                     data=json.dumps(body).encode() if body else None,
                                     headers={"Content-Type": "application/json"} if body else {})
        with self.opener.open(req, timeout=30) as r:
            return json.loads(r.read())

    def work(self, deadline: float) -> None:
        try:
            while len(self.acked) < WRITES and time.monotonic() < deadline:
                t0 = time.perf_counter()
                page = self._call("/api/sample")
                self.next_ms.append(1000 * (time.perf_counter() - t0))
                if page["sample"]["responses_done"] == page["sample"]["responses"]:
                    return
                key = tuple(page[k] for k in CELL)
                t0 = time.perf_counter()
                rec = self._call("/api/verdicts", {**dict(zip(CELL, key)), "verdict": "missing",
                                                   "sample": "calibration"})["record"]
                self.write_ms.append(1000 * (time.perf_counter() - t0))
                assert rec["judge"] == f"human-{self.name}" and rec["revision"] == 1
                self.acked.append(key)
        except (OSError, urllib.error.HTTPError, AssertionError, KeyError) as e:
            self.errors.append(f"{type(e).__name__}: {e}")


def _serve(run: Path, port: int) -> subprocess.Popen:
    gamut = Path(sys.executable).with_name("gamut-local")
    proc = subprocess.Popen([str(gamut), "view", str(run), "--team", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=os.environ.copy())
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"gamut-local view exited: {proc.stderr.read().decode()[-2000:]}")
        try:  # 401 until signed in: the server answers; then wait for the run to be read
            urllib.request.urlopen(f"http://127.0.0.1:{port}/static/style.css", timeout=5).read()
            return proc
        except OSError:
            time.sleep(0.1)
    proc.terminate()
    raise AssertionError("gamut-local view did not start within 120 s")


@pytest.mark.alone  # its latencies are the target: measured with no other test beside it
def test_five_annotators_at_once_on_a_paper_scale_sample(tmp_path, gamut):
    from gamut_local.rundir import annotators
    from gamut_local.stages.sample import draw_sample

    run = tmp_path / "run"
    run.mkdir()
    _build(run)
    draw_sample(run, 50, per="model", seed=0)
    tokens = {n: annotators.add(run, n) for n in TEAM}
    res = gamut("annotators", "assign", run, *[x for n in TEAM for x in ("--annotator", n)], "--overlap", "0.1")
    assert res.exit_code == 0, res.output
    before = _prefill(run, "calibration")
    assert before > 18_000
    port = _free_port()
    proc = _serve(run, port)
    try:
        members = [Member(f"http://127.0.0.1:{port}", n, tokens[n]) for n in TEAM]
        members[0]._call("/api/sample")  # waits for the run to be read (the first page that needs it)
        deadline = time.monotonic() + LIMIT_S
        threads = [threading.Thread(target=m.work, args=(deadline,)) for m in members]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        proc.terminate()
        proc.wait(30)
    assert not [e for m in members for e in m.errors], [e for m in members for e in m.errors]
    # Nothing lost, nothing written twice: every acknowledged verdict is on disk, once.
    on_disk: dict[tuple, list] = {}
    for p in run.glob("verdicts/human-*/*.jsonl"):
        for line in p.read_text().splitlines():
            r = json.loads(line)
            on_disk.setdefault((r["judge"], *(r[k] for k in CELL)), []).append(r)
    acked = [(f"human-{m.name}", *k) for m in members for k in m.acked]
    assert len(acked) == len(set(acked)) and sum(len(m.acked) for m in members) >= len(TEAM) * 20
    assert all(len(on_disk.get(k, [])) == 1 and on_disk[k][0]["verdict"] == "missing" for k in acked)
    assert sum(len(x) for x in on_disk.values()) == before + len(acked)
    next_p95 = float(np.percentile([x for m in members for x in m.next_ms], 95))
    write_p95 = float(np.percentile([x for m in members for x in m.write_ms], 95))
    print(f"\nteam load: {before:,} human verdicts on disk, {len(TEAM)} annotators, {len(acked)} verdicts written; "
          f"next item p95 {next_p95:.1f} ms, write p95 {write_p95:.1f} ms, cpus {os.cpu_count()}")
    assert next_p95 < P95_MS and write_p95 < P95_MS, (next_p95, write_p95)
