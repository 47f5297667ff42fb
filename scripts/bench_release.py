"""Time reading a full-size GAMUT release parquet beside the alternatives, on the same data.

    .venv/bin/python scripts/bench_release.py [--rows 1813] [--checks 15] [--repeats 3]

Builds a release file of `--rows` rows with `--checks` release-length checks each
(tests.support.release.scale_rows), then, best of `--repeats`:
- `parquet_read_s`: pyarrow's read into Python rows alone (the floor every reader pays);
- `load_release_s`: the release adapter: rows -> validated questions, warnings collected;
- `jsonl_load_s`: our JSONL reader on the same questions written as JSONL (the converted form
  fetch_data.py writes), the real alternative a run reads;
- `compile_s`: compile_dataset on the loaded questions (the release's checks pass through);
and the peak Python heap of one load_release (tracemalloc) and the process's peak RSS.
Prints JSON.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import tracemalloc
from pathlib import Path

from gamut_local.data.crag_mm import write_dataset
from gamut_local.data.dataset import load_questions
from gamut_local.data.gamut_release import load_release, read_rows
from gamut_local.rubric.compiler import compile_dataset
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, for tests.support
from tests.support.release import scale_rows, write_parquet
from tests.support.timing import best_of


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1813)
    ap.add_argument("--checks", type=int, default=15)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        parquet = write_parquet(scale_rows(args.rows, args.checks), Path(tmp) / "test.parquet")
        loaded = load_release(parquet)
        jsonl = Path(tmp) / "gamut.jsonl"
        write_dataset(loaded.questions, jsonl)
        timings = {
            "parquet_read_s": best_of(lambda: read_rows(parquet), args.repeats),
            "load_release_s": best_of(lambda: load_release(parquet), args.repeats),
            "jsonl_load_s": best_of(lambda: load_questions(jsonl, check_images=False), args.repeats),
            "compile_s": best_of(lambda: compile_dataset(loaded.questions), args.repeats),
        }
        tracemalloc.start()
        load_release(parquet)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        sizes = {"parquet_mib": parquet.stat().st_size / 2**20, "jsonl_mib": jsonl.stat().st_size / 2**20}
    checks = sum(len(q.checks) for q in loaded.questions)
    print(json.dumps({
        "rows": args.rows, "questions": len(loaded.questions), "checks": checks, "warnings": len(loaded.warnings),
        **{k: round(v, 4) for k, v in timings.items()},
        "load_release_vs_parquet_read": round(timings["load_release_s"] / timings["parquet_read_s"], 2),
        "load_release_vs_jsonl_load": round(timings["load_release_s"] / timings["jsonl_load_s"], 2),
        "checks_per_s_load_and_compile": round(checks / (timings["load_release_s"] + timings["compile_s"])),
        "load_release_peak_heap_mib": round(peak / 2**20, 1),
        "process_peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        **{k: round(v, 2) for k, v in sizes.items()},
    }, indent=2))


if __name__ == "__main__":
    main()
