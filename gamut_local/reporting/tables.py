"""Writing and reading the analysis files: `scores.json` with its per-response file beside it,
`agreement.json`, and the report's `tables/*.csv|json`. Full precision in every file (CSV
cells are Python's shortest round-trip repr of each double); rounding is the Markdown's job.
Whether such a file is current for its inputs: `reporting.current`.
"""

from __future__ import annotations

import csv
import io
import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gamut_local.analysis.outputs import Bootstrap, ReportTablesFile, ScoresFile
from gamut_local.analysis.scoring import (
    Coded,
    Scores,
    domain_rows,
    model_rows,
    response_columns,
)
from gamut_local import arrow
from gamut_local.data.verdict_table import VerdictTable
from gamut_local.rundir.store import write_bytes_atomic, write_json, write_text_atomic
from gamut_local.vocab import VERDICTS

RESPONSE_INT_COLUMNS = tuple(f"n_{v}" for v in VERDICTS)


def write_csv(path: Path, rows: list[dict]) -> None:
    buf = io.StringIO()
    if rows:
        w = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    write_text_atomic(path, buf.getvalue())


def write_model(path: Path, doc) -> None:
    write_json(path, doc.model_dump(mode="json"))


# ---------------------------------------------------------------- scores.json + per-response file

def scores_document(table: VerdictTable, scores: Scores, dataset: dict | None,
                    responses_file: str | None, correction: Correction | None = None) -> ScoresFile:
    doc = ScoresFile(inputs=table.inputs, dataset=dataset,
                     coverage_from="dataset" if scores.from_dataset else "verdicts", formula=scores.formula,
                     bootstrap=Bootstrap(n_boot=scores.n_boot, seed=scores.seed), judges=scores.judges,
                     responses_file=responses_file, models=model_rows(scores), domains=domain_rows(scores),
                     answers=table.answer_inputs, stale_verdicts=table.stale, compile=table.compile_settings)
    return doc if correction is None else with_correction(doc, scores, correction)


@dataclass(frozen=True)
class Correction:
    """What `--correct-with` asks for: the gold judges' pattern, and the calibration sample
    (`analysis.design.check_sample`'s result) from the design file `sample_file`."""

    gold: str
    sample: object
    sample_file: str


def with_correction(doc: ScoresFile, scores: Scores, correction: Correction) -> ScoresFile:
    """The scores document with each model judge's scores corrected by the gold judges
    (`analysis.correction.correct`) in its rows, and the `correction` block: the one place
    `score` and `report` compose a corrected scores file."""
    from gamut_local.analysis.correction import correct

    rows_by_index, block = correct(scores, correction.sample, correction.gold, correction.sample_file)
    corrected = {(scores.judges[j], *scores.systems[s]): row for (j, s), row in rows_by_index.items()}
    rows = [{**r, "corrected": corrected.get((r["judge"], r["model"], r["variant"]))}
            for r in doc.model_dump(mode="json")["models"]]
    return ScoresFile.model_validate({**doc.model_dump(mode="json"), "models": rows, "correction": block})


def write_scores_files(out: Path, table: VerdictTable, scores: Scores, dataset: dict | None,
                       correction: Correction | None = None) -> ScoresFile:
    """scores.json and its per-response file, from a scored table."""
    # The bootstrap draws (numpy lets go of the GIL) while the per-response file is written.
    with ThreadPoolExecutor(1) as pool:
        drawn = pool.submit(lambda: scores.boot)
        responses = write_responses(out, scores)
        drawn.result()
    doc = scores_document(table, scores, dataset, responses, correction)
    write_model(out, doc)
    return doc


def responses_path(scores_json: Path) -> Path:
    """`scores.json` -> the per-response file beside it: `scores.responses.parquet` (JSONL
    when pyarrow is not installed)."""
    suffix = "parquet" if _has_pyarrow() else "jsonl"
    return Path(scores_json).with_name(f"{Path(scores_json).stem}.responses.{suffix}")


def _has_pyarrow() -> bool:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


def write_responses(scores_json: Path, scores: Scores) -> str:
    """Write the per-response file beside `scores_json`; return its name."""
    cols = {k: v for k, v in response_columns(scores).items() if v is not None}
    path = responses_path(scores_json)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        arrays = [_column(v) for v in cols.values()]
        buf = pa.BufferOutputStream()  # then one atomic write: fsynced, no temp file left on failure
        # No Arrow schema in the file: every reader (pandas too) sees its strings as plain strings.
        pq.write_table(pa.Table.from_arrays(arrays, names=list(cols)), buf, store_schema=False)
        write_bytes_atomic(path, buf.getvalue().to_pybytes())
    else:
        lists = {k: v.tolist() if isinstance(v, Coded) else v for k, v in cols.items()}
        lines = (json.dumps({k: _cell(lists[k][i]) for k in lists}) for i in range(len(cols["judge"])))
        write_text_atomic(path, "".join(line + "\n" for line in lines))
    return path.name


def _column(values):
    """A per-response column as pyarrow: strings as dictionary arrays, NaN (no score) as null,
    as the JSONL form has it and the docs say (SQL's avg and count skip a null, not a NaN)."""
    if isinstance(values, Coded):
        return _dictionary(values)
    values = np.asarray(values)
    if values.dtype == bool:
        return _bools(values)
    return arrow.from_numpy(values, ~np.isnan(values) if values.dtype.kind == "f" else None)


def _dictionary(column: Coded):
    """A string column as a pyarrow dictionary array, each value once in its dictionary (as
    Parquet stores it): building each row's bytes took 0.023 s of `score` at paper scale."""
    import pyarrow as pa

    values, inverse = np.unique(np.asarray(column.values, dtype=object), return_inverse=True)
    indices = inverse.ravel().astype(np.int32)[column.codes]
    return pa.DictionaryArray.from_arrays(arrow.from_numpy(indices), arrow.strings(np.arange(len(values)), list(values)))


def _bools(data: np.ndarray):
    """A bool numpy array as a pyarrow array, from its packed bits (pa.array would import pandas)."""
    import pyarrow as pa

    bits = np.packbits(data, bitorder="little")
    return pa.Array.from_buffers(pa.bool_(), len(data), [None, pa.py_buffer(bits)])


def _cell(x):
    if isinstance(x, (np.bool_, bool)):
        return bool(x)
    if isinstance(x, (np.floating, float)):
        return None if not np.isfinite(x) else float(x)
    return int(x) if isinstance(x, np.integer) else x


# ---------------------------------------------------------------- the report's tables

def write_report_tables(tables: Path, doc: ReportTablesFile) -> None:
    """tables/*.csv and tables/*.json from the report's tables."""
    t = doc.model_dump(mode="json")
    write_csv(tables / "leaderboard.csv", t["leaderboard"])
    write_csv(tables / "tiers.csv", t["tiers"])
    write_csv(tables / "verdicts.csv", t["verdicts"])
    write_csv(tables / "neighbours.csv", [
        {**{k: v for k, v in r.items() if k != "ci95"}, "ci95_low": r["ci95"][0], "ci95_high": r["ci95"][1]}
        for r in t["neighbours"]])
    write_csv(tables / "judge_scores.csv", t["judge_scores"])
    if t["domains"] is not None:
        write_csv(tables / "domains.csv", t["domains"])
    write_csv(tables / "variants.csv", [{"judge": j, **m} for j, v in t["variants"].items() for m in v["models"]])
    write_json(tables / "variants.json", t["variants"])
    if t["agreement"] is not None:
        write_json(tables / "agreement.json", t["agreement"])
    write_json(tables / "report.json", t)
