"""Writing and reading the analysis files: `scores.json` with its per-response file beside it,
`agreement.json`, and the report's `tables/*.csv|json`. Full precision in every file (CSV
cells are Python's shortest round-trip repr of each double); rounding is the Markdown's job.

A scores or agreement file is *current* for a set of inputs when it names the same files
(paths resolved) with the same content hashes (`rundir.identity.current_record` rehashes
only a file whose size or mtime changed) and the same bootstrap settings.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from pydantic import ValidationError

from gamut_local.analysis.outputs import AgreementFile, Bootstrap, ReportTablesFile, ScoresFile
from gamut_local.analysis.scoring import (
    Coded,
    Scores,
    domain_rows,
    model_rows,
    response_columns,
    scores_from_columns,
)
from gamut_local import arrow
from gamut_local.data.reading import read_responses
from gamut_local.data.verdict_table import VerdictTable
from gamut_local.reporting.drawing import SLOWEST_FIRST
from gamut_local.rundir.identity import current_record
from gamut_local.rundir.store import write_bytes_atomic, write_json, write_text_atomic
from gamut_local.vocab import SMALL_POOL_MAX, TIERS, VERDICTS

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
                    responses_file: str | None, correction: tuple[dict, dict] | None = None) -> ScoresFile:
    """`correction`: what `analysis.correction.correct` gave, attached to the rows it is about."""
    doc = ScoresFile(inputs=table.inputs, dataset=dataset,
                     coverage_from="dataset" if scores.from_dataset else "verdicts", formula=scores.formula,
                     bootstrap=Bootstrap(n_boot=scores.n_boot, seed=scores.seed), judges=scores.judges,
                     responses_file=responses_file, models=model_rows(scores), domains=domain_rows(scores),
                     answers=table.answer_inputs, stale_verdicts=table.stale, compile=table.compile_settings)
    return doc if correction is None else with_correction(doc, scores, correction)


def with_correction(doc: ScoresFile, scores: Scores, correction: tuple[dict, dict]) -> ScoresFile:
    """The scores document with `analysis.correction.correct`'s output in its rows."""
    corrected = {(scores.judges[j], *scores.systems[s]): row for (j, s), row in correction[0].items()}
    rows = [{**r, "corrected": corrected.get((r["judge"], r["model"], r["variant"]))}
            for r in doc.model_dump(mode="json")["models"]]
    return ScoresFile.model_validate({**doc.model_dump(mode="json"), "models": rows, "correction": correction[1]})


def write_scores_files(out: Path, table: VerdictTable, scores: Scores, dataset: dict | None,
                       correction: tuple[dict, dict] | None = None) -> ScoresFile:
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


# ---------------------------------------------------------------- currency

def _same_inputs(recorded: list[dict], wanted: list[Path]) -> bool:
    if {str(Path(r["path"]).resolve()) for r in recorded} != {str(Path(p).resolve()) for p in wanted}:
        return False
    for old in recorded:
        now = current_record(old)
        if now is None or now["sha256"] != old["sha256"]:
            return False
    return True


def read_current_scores(scores_json: Path, paths: list[Path], dataset: Path | None, *,
                        seed: int, n_boot: int, answers: list[Path] = (),
                        small_pool_max: int = SMALL_POOL_MAX) -> tuple[ScoresFile, Scores] | None:
    """The scores file and its response scores, if current for these inputs; else None."""
    try:
        doc = ScoresFile.model_validate_json(Path(scores_json).read_bytes())
    except (OSError, ValidationError, ValueError):
        return None
    if (doc.bootstrap.seed, doc.bootstrap.n_boot) != (seed, n_boot) or doc.responses_file is None:
        return None
    if dataset is not None and doc.compile != {"small_pool_max": small_pool_max}:
        return None
    want_dataset = [] if dataset is None else [dataset]
    have_dataset = [] if doc.dataset is None else [doc.dataset.model_dump()]
    if not _same_inputs([i.model_dump() for i in doc.inputs], paths) or \
            not _same_inputs(have_dataset, want_dataset) or \
            not _same_inputs([i.model_dump() for i in doc.answers], list(answers)):
        return None
    try:
        responses = Path(scores_json).with_name(doc.responses_file)  # a name, never a path
    except ValueError:
        return None
    scores = _responses_as_scores(responses, doc) if responses.is_file() else None
    return None if scores is None else (doc, scores)


RESPONSE_COLUMNS = {"judge", "model", "variant", "question_id", "domain", "score", *TIERS,
                    *(f"n_{verdict}" for verdict in VERDICTS), "n_expected", "complete"}
# What reading a damaged per-response file can raise (pyarrow's errors subclass these).
_UNREADABLE = (OSError, ValueError, KeyError, TypeError, IndexError, NotImplementedError)


def _responses_as_scores(path: Path, doc: ScoresFile) -> Scores | None:
    """The Scores a per-response file holds, if it is the file `doc` describes: readable, the
    columns `write_responses` writes, and every row of `doc` (all but the bootstrap CIs)
    recomputed from it as written. Else None: a damaged or hand-edited file is not current,
    and the caller computes the scores again from the verdicts."""
    try:
        cols = read_responses(path)
        if set(cols) != RESPONSE_COLUMNS:
            return None
        scores = scores_from_columns(cols, list(doc.judges), seed=doc.bootstrap.seed, n_boot=doc.bootstrap.n_boot,
                                     formula=doc.formula.model_dump(), from_dataset=doc.coverage_from == "dataset")
    except _UNREADABLE:
        return None
    written = doc.model_dump(mode="json")
    # Bootstrap CIs and corrected estimates are not in the per-response file.
    rows = [{k: v for k, v in row.items() if k != "ci95"} for row in model_rows(scores, boot=np.empty(0))]
    if rows != [{k: v for k, v in row.items() if k not in ("ci95", "corrected")} for row in written["models"]] \
            or domain_rows(scores) != written["domains"]:
        return None
    return scores


def read_current_agreement(path: Path, paths: list[Path]) -> AgreementFile | None:
    try:
        doc = AgreementFile.model_validate_json(Path(path).read_bytes())
    except (OSError, ValidationError, ValueError):
        return None
    return doc if _same_inputs([i.model_dump() for i in doc.inputs], paths) else None


# ---------------------------------------------------------------- the report's tables

FIGURES_STAMP = "figures.json"


def tables_digest(t: dict) -> str:
    """What the figures are drawn from, as one hash (the figures are redrawn when it changes)."""
    return hashlib.sha256(json.dumps(t, sort_keys=True, default=str).encode()).hexdigest()


def current_figures(figures_dir: Path, digest: str) -> dict[str, Path] | None:
    """The figures drawn from these very tables, if all still there (drawing is the slow part
    of a report on a current run: seconds of matplotlib for what has not changed)."""
    try:
        stamp = json.loads((Path(figures_dir) / FIGURES_STAMP).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(stamp, dict) or stamp.get("tables_sha256") != digest:
        return None
    names = stamp.get("figures")
    # Each figure under its own name in figures/, as draw_all writes them: a stamp naming any
    # other file (`../manifest.json`) is not ours, and the figures are drawn again.
    if not isinstance(names, dict) or any(k not in SLOWEST_FIRST or name != f"{k}.png" for k, name in names.items()):
        return None
    figures = {k: Path(figures_dir) / name for k, name in names.items()}
    return figures if all(p.is_file() for p in figures.values()) else None


def record_figures(figures_dir: Path, digest: str, figures: dict[str, Path]) -> None:
    write_json(Path(figures_dir) / FIGURES_STAMP,
               {"tables_sha256": digest, "figures": {k: Path(p).name for k, p in figures.items()}})


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
