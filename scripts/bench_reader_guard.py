"""What the columnar-reader guard (data.arrow.jsonl_lines) costs beside the read it
guards: verdict-shaped JSONL, N lines, the guard vs pyarrow's JSON parse of the same bytes,
best of 3, and peak memory of each.

    .venv/bin/python scripts/bench_reader_guard.py [--lines 1000000]
"""

from __future__ import annotations

import argparse
import json
import time
import tracemalloc

from gamut_local.data.arrow import jsonl_lines


def _best(fn, repeat: int = 3) -> tuple[float, int]:
    times, peak = [], 0
    for _ in range(repeat):
        tracemalloc.start()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        peak = max(peak, tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    return min(times), peak


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=1_000_000)
    n = ap.parse_args().lines
    rec = {"question_id": "q0001", "model": "qwen3-vl-8b", "variant": "multimodal", "judge": "qwen3-vl-30b",
           "check_id": "identity.fact", "tier": "answer_critical", "verdict": "meets", "raw": "meets",
           "probs": {"meets": 0.9, "partially_meets": 0.05, "missing": 0.04, "contradicts": 0.01},
           "settings_hash": "0123456789ab"}
    raw = (json.dumps(rec) + "\n").encode() * n
    import pyarrow as pa
    import pyarrow.json as pj

    guard, guard_mem = _best(lambda: jsonl_lines(raw))
    parse, parse_mem = _best(lambda: pj.read_json(pa.BufferReader(raw)))
    print(json.dumps({"lines": n, "mb": round(len(raw) / 1e6, 1), "guard_s": round(guard, 3),
                      "pyarrow_parse_s": round(parse, 3), "guard_over_parse": round(guard / parse, 3),
                      "guard_peak_mb": round(guard_mem / 1e6, 1), "parse_peak_mb_python": round(parse_mem / 1e6, 1)}))


if __name__ == "__main__":
    main()
