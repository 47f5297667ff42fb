"""Verdict files as one columnar table: integer codes per verdict plus the dictionaries they index.

`read_verdicts` takes each file's checked columns from `data.verdict_files` (pyarrow's JSON
reader, or the columnar cache of a file with the same bytes), merges them into one table and
makes the checks that span files: no duplicate (question, model, variant, judge, check) key
(except a human annotator's later verdict, which replaces the earlier: `rundir.human`), one
settings hash per judge. Only when any of that fails, or a file is something the column
reader does not take (blank lines, a record without `variant`, which defaults to multimodal,
a torn last line, an empty file, bytes that are not UTF-8), are the files read again record
by record with `data.records.load_records`, the reference, which names every problem as
`FILE:LINE: field: message`. So errors are the reference's own, and a good file never pays
for a Python dict per verdict.

pyarrow rather than DuckDB (both measured, scripts/bench_analysis.py and docs/outputs.md):
DuckDB's JSON reader casts a number in a VARCHAR column to text silently (strictness would
need JSON-typed columns, ~4x slower), and handing 2.3M rows of strings from DuckDB to Python
took longer than pyarrow's whole read; DuckDB is fastest only while the aggregation stays in
its SQL. Without pyarrow installed (the core install), the reference path reads the files.
"""

from __future__ import annotations

import dataclasses
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from gamut_local.data.records import Verdict, load_records, verdict_key
from gamut_local.data.verdict_files import (
    IDENTITY_FIELDS,
    STRING_FIELDS,
    FileColumns,
    file_record,
    merge_codes,
    parse_options,
    prune_cache,
    read_file_columns,
)
from gamut_local.errors import InputError, Problem
from gamut_local.rundir import verdict_store
from gamut_local.rundir.human import is_human
from gamut_local.rundir.store import read_jsonl
from gamut_local.vocab import DEFAULT_VARIANT, JUDGE_LABELS, TIERS, VARIANTS, VERDICTS

# The per-row arrays of a VerdictTable (the rest are dictionaries and file records).
ROW_FIELDS = ("judge", "model", "variant", "question", "check", "tier", "verdict", "probs", "file", "line",
              *IDENTITY_FIELDS)


@dataclass
class VerdictTable:
    """One row per verdict. Codes index the sorted dictionaries (`questions[question[i]]`);
    tier and verdict codes are positions in `vocab.TIERS` / `vocab.VERDICTS`, variant codes in
    `vocab.VARIANTS`. `probs[i]` are the label probabilities in `vocab.JUDGE_LABELS` order,
    NaN where the verdict has none. `file[i]`, `line[i]`: where the verdict was read (line 0:
    not from a file)."""

    judges: list[str]
    models: list[str]
    questions: list[str]
    checks: list[str]
    files: list[str]
    judge: np.ndarray  # int32
    model: np.ndarray  # int32
    variant: np.ndarray  # int8
    question: np.ndarray  # int32
    check: np.ndarray  # int32
    tier: np.ndarray  # int8
    verdict: np.ndarray  # int8
    probs: np.ndarray  # float64 (n, 4)
    file: np.ndarray  # int32
    line: np.ndarray  # int32
    # Identity hashes (rundir.identity): codes into the sorted lists, -1 where a record has none.
    settings_hashes: list[str] = field(default_factory=list)
    settings_hash: np.ndarray | None = None  # int32 into settings_hashes
    check_hashes: list[str] = field(default_factory=list)
    check_hash: np.ndarray | None = None
    answer_hashes: list[str] = field(default_factory=list)
    answer_hash: np.ndarray | None = None
    inputs: list[dict] = field(default_factory=list)  # {path, bytes, mtime_ns, sha256} per file
    # Set where stale verdicts were left out (data.consistency.stale_verdicts): {judge: {reason:
    # count}}, and the answer files whose hashes decided it (input records, as `inputs`).
    stale: dict = field(default_factory=dict)
    answer_inputs: list[dict] = field(default_factory=list)
    compile_settings: dict = field(default_factory=dict)  # the checks' compile settings, where compared

    variants = VARIANTS

    def __len__(self) -> int:
        return len(self.verdict)


# ---------------------------------------------------------------- inputs

def read_dataset_for_scores(dataset: Path | None) -> tuple[list, dict[str, str] | None, dict | None]:
    """A dataset file's questions, question_id -> domain, and its input record (all empty or
    None without a dataset)."""
    if dataset is None:
        return [], None, None
    from gamut_local.data.dataset import load_questions

    questions = load_questions(Path(dataset), check_images=False)
    return questions, {q.question_id: q.domain for q in questions}, file_record(Path(dataset))


# ---------------------------------------------------------------- the reference path

def _codes(values: list, dictionary: list[str] | tuple) -> np.ndarray:
    index = {v: i for i, v in enumerate(dictionary)}
    return np.fromiter((index[v] for v in values), dtype=np.int32, count=len(values))


def _probs_matrix(rows: list) -> np.ndarray:
    out = np.full((len(rows), len(JUDGE_LABELS)), np.nan)
    for i, p in enumerate(rows):
        if p:
            for k, label in enumerate(JUDGE_LABELS):
                if label in p:
                    out[i, k] = p[label]
    return out


def _hash_text(value) -> str | None:
    # settings_hash is an extra field: any JSON value; a non-string one is compared as text.
    return value if value is None or isinstance(value, str) else repr(value)


def _hash_codes(values: list[str | None]) -> tuple[list[str], np.ndarray]:
    names = sorted({v for v in values if v is not None})
    code = {v: i for i, v in enumerate(names)}
    return names, np.array([-1 if v is None else code[v] for v in values], dtype=np.int32)


def table_from_records(records: list[dict], files: list[str] | None = None, file=None, line=None,
                       inputs: list[dict] | None = None) -> VerdictTable:
    """Code validated verdict dicts (the judge stage's records) into a VerdictTable.

    `file`/`line`: where each record came from (indices into `files`); default: nowhere.
    """
    n = len(records)
    col = {f: [r.get(f, DEFAULT_VARIANT) if f == "variant" else r[f] for r in records] for f in STRING_FIELDS}
    names = {f: sorted(set(col[f])) for f in ("judge", "model", "question_id", "check_id")}
    identity = {f: _hash_codes([_hash_text(r.get(f)) for r in records]) for f in IDENTITY_FIELDS}
    where = (np.zeros(n), np.zeros(n)) if file is None else (file, line)
    return VerdictTable(
        judges=names["judge"], models=names["model"], questions=names["question_id"],
        checks=names["check_id"], files=list(files or ["<verdicts>"]),
        judge=_codes(col["judge"], names["judge"]), model=_codes(col["model"], names["model"]),
        variant=_codes(col["variant"], VARIANTS).astype(np.int8),
        question=_codes(col["question_id"], names["question_id"]),
        check=_codes(col["check_id"], names["check_id"]),
        tier=_codes(col["tier"], TIERS).astype(np.int8),
        verdict=_codes(col["verdict"], VERDICTS).astype(np.int8),
        probs=_probs_matrix([r.get("probs") for r in records]),
        file=np.asarray(where[0], dtype=np.int32), line=np.asarray(where[1], dtype=np.int32),
        **{f"{f}es": identity[f][0] for f in IDENTITY_FIELDS}, **{f: identity[f][1] for f in IDENTITY_FIELDS},
        inputs=list(inputs or []))


def read_verdicts_reference(paths: list[str | Path]) -> VerdictTable:
    """The record-by-record path: `load_records` validates (every problem as FILE:LINE), then
    the records are coded. The fast path must give the same table and the same errors."""
    paths = store_files(paths)
    records = load_records(paths, Verdict, verdict_key)
    # Where each record came from, replaying load_records' own order: a human's later verdict
    # on the same key takes the place of the earlier one (rundir.human).
    file, line, at = [], [], {}
    for k, path in enumerate(paths):
        for no, obj in (verdict_store.records(path) if verdict_store.is_store(path) else read_jsonl(path)):
            key = verdict_key(obj)
            if key in at:
                file[at[key]], line[at[key]] = k, no
                continue
            at[key] = len(file)
            file.append(k)
            line.append(no)
    table = table_from_records(records, [str(p) for p in paths], file, line,
                               [file_record(p) for p in paths])
    check_settings(table)
    return table


# ---------------------------------------------------------------- checks on the whole table

def check_settings(table: VerdictTable) -> None:
    """One settings hash per judge: verdicts made under two configurations (another prompt,
    other sampling) must not be scored as one judge. The judge stage refuses to append such
    a mix; this catches files put together by hand."""
    if table.settings_hash is None or not len(table):
        return
    problems = []
    has = table.settings_hash >= 0
    for j, judge in enumerate(table.judges):
        rows = np.flatnonzero(has & (table.judge == j))
        if not len(rows):
            continue
        codes, first = np.unique(table.settings_hash[rows], return_index=True)
        if len(codes) < 2:
            continue
        order = np.argsort(first)
        base = rows[first[order[0]]]
        for k in order[1:]:
            row = rows[first[k]]
            problems.append(Problem(
                table.files[table.file[row]], int(table.line[row]) or None, "settings_hash",
                f"judge {judge!r} has verdicts made under other settings: "
                f"{table.settings_hashes[codes[k]]!r} here, {table.settings_hashes[table.settings_hash[base]]!r} "
                f"at {_where(table, base)}; score one configuration of a judge at a time"))
    if problems:
        raise InputError(problems)


def _where(table: VerdictTable, row: int) -> str:
    name = table.files[table.file[row]]
    return f"{name}:{table.line[row]}" if table.line[row] else name


def _key_codes(table: VerdictTable) -> np.ndarray:
    """One int per (question, model, variant, judge, check) key (row codes if they overflow)."""
    key = np.zeros(len(table), dtype=np.int64)
    size = 1
    for codes, n in ((table.question, len(table.questions)), (table.model, len(table.models)),
                     (table.variant, len(VARIANTS)), (table.judge, len(table.judges)),
                     (table.check, len(table.checks))):
        if size * max(n, 1) >= 2**62:  # too many combinations for one int64
            keys = np.stack([table.question, table.model, table.variant, table.judge, table.check], axis=1)
            return np.unique(keys, axis=0, return_inverse=True)[1].ravel()
        key = key * max(n, 1) + codes
        size *= max(n, 1)
    return key


def repeated_keys(table: VerdictTable) -> np.ndarray:
    """Rows whose key an earlier row already has."""
    key = _key_codes(table)
    size = int(key.max()) + 1 if len(key) else 0
    if size <= 8 * len(key):  # dense keys (a full grid of verdicts): one count, no sort
        if not (np.bincount(key, minlength=size) > 1).any():
            return np.zeros(0, dtype=np.int64)
    order = np.argsort(key, kind="stable")
    again = np.r_[False, key[order][1:] == key[order][:-1]]
    return np.sort(order[again])


def newest_human_verdicts(table: VerdictTable, repeats: np.ndarray) -> VerdictTable | None:
    """A human's later verdict on a key replaces the earlier one, in the earlier one's place
    (as `load_records` does); None if a repeat is a model judge's (an error)."""
    if not all(is_human(table.judges[j]) for j in np.unique(table.judge[repeats])):
        return None
    key = _key_codes(table)
    order = np.argsort(key, kind="stable")
    starts = np.flatnonzero(np.r_[True, key[order][1:] != key[order][:-1]])
    first = order[starts]  # stable sort: the first row of each key, then the later ones
    last = order[np.r_[starts[1:], len(order)] - 1]
    keep = np.sort(first)
    source = np.empty(len(table), dtype=np.int64)
    source[first] = last
    rows = source[keep]
    return take_rows(table, rows)


def take_rows(table: VerdictTable, rows: np.ndarray) -> VerdictTable:
    """The table of some rows (indices or a mask), hash dictionaries pruned to what they use."""
    out = dataclasses.replace(table, **{f: getattr(table, f)[rows] for f in ROW_FIELDS})
    for f in IDENTITY_FIELDS:
        codes, names = getattr(out, f), getattr(table, f"{f}es")
        used = np.unique(codes[codes >= 0])
        remap = np.full(len(names) + 1, -1, dtype=np.int32)  # code -1 picks the last: -1
        remap[used] = np.arange(len(used), dtype=np.int32)
        setattr(out, f"{f}es", [names[i] for i in used])
        setattr(out, f, remap[codes])
    return out


# ---------------------------------------------------------------- the column path

def _merge(parts: list[FileColumns], name: str, fixed=None, dtype=np.int32) -> tuple[list, np.ndarray]:
    """One dictionary (sorted, or the fixed vocabulary) for a field over every file, and the
    codes of every row against it (-1: no value)."""
    codes, dictionary = merge_codes([p.codes[name] for p in parts], fixed, dtype)
    return dictionary, codes


def _table_from_parts(parts: list[FileColumns], files: list[str]) -> VerdictTable:
    judges, judge = _merge(parts, "judge")
    models, model = _merge(parts, "model")
    questions, question = _merge(parts, "question_id")
    checks, check = _merge(parts, "check_id")
    identity = {f: _merge(parts, f) for f in IDENTITY_FIELDS}
    sizes = np.array([p.n for p in parts], dtype=np.int64)
    starts = np.cumsum(sizes) - sizes
    file = np.repeat(np.arange(len(parts), dtype=np.int32), sizes)
    return VerdictTable(
        judges=judges, models=models, questions=questions, checks=checks, files=files,
        judge=judge, model=model, question=question, check=check,
        variant=_merge(parts, "variant", VARIANTS, np.int8)[1],
        tier=_merge(parts, "tier", TIERS, np.int8)[1],
        verdict=_merge(parts, "verdict", VERDICTS, np.int8)[1],
        probs=np.concatenate([p.probs for p in parts]),
        file=file, line=(np.arange(int(sizes.sum())) - starts[file] + 1).astype(np.int32),
        **{f"{f}es": identity[f][0] for f in IDENTITY_FIELDS}, **{f: identity[f][1] for f in IDENTITY_FIELDS},
        inputs=[p.input for p in parts])


def store_files(paths) -> list[Path]:
    """Verdict inputs (store units, folders, JSONL files: `verdict_store.inputs`) as the files
    that hold them now: each unit's compacted file and live parts, each JSONL file."""
    return [f for p in verdict_store.inputs(paths)
            for f in (verdict_store.unit_files(p) if verdict_store.is_store(p) else [p])]


def store_columns(path: Path) -> FileColumns:
    """One verdict store file's columns, as they are: typed, dictionary-encoded, validated
    when written; only the schema version is checked (`rundir.verdict_store`)."""
    from gamut_local.data import arrow

    names = [*STRING_FIELDS, *IDENTITY_FIELDS]
    table = verdict_store.read_files([path], [*names, *verdict_store.PROB_COLUMNS]).unify_dictionaries()
    table = table.combine_chunks()
    probs = np.full((table.num_rows, len(JUDGE_LABELS)), np.nan)
    if table.num_rows:
        codes = {name: arrow.codes(table.column(name).chunk(0)) for name in names}
        for k, name in enumerate(verdict_store.PROB_COLUMNS):
            probs[:, k] = arrow.floats(table.column(name).chunk(0))
    else:
        codes = {name: (np.zeros(0, dtype=np.int32), []) for name in names}
    return FileColumns(codes=codes, probs=probs, input=file_record(path))


def read_verdicts(paths: list[str | Path], on_file=None, cache: str = "use") -> VerdictTable:
    """Read and validate verdict JSONL files into one VerdictTable (see the module docstring).

    `on_file(path)` is called after each file (a progress bar); `cache`: "use" the columnar
    cache of files already read, "read" it but never write, or leave it "off". Raises
    InputError with the reference's own FILE:LINE messages.
    """
    paths = store_files(paths)
    try:
        options = parse_options()
    except ImportError:  # no pyarrow (the core install)
        return read_verdicts_reference(paths)
    parts = []
    # One file per thread (pyarrow and hashlib release the GIL), each parsed in one thread:
    # the hashing, the line checks and the coding run in parallel too, and the cores spend
    # no time handing blocks around (measured, interleaved: 4.2-5.0 s against 4.5-5.9 s for
    # the benchmark's 84 files on 2 cores). With fewer files than threads, pyarrow splits
    # each file instead.
    workers = min(4, os.cpu_count() or 1)
    threads = len(paths) < workers
    with ThreadPoolExecutor(max_workers=workers) as pool:
        def read(p: Path) -> FileColumns | None:
            return store_columns(p) if verdict_store.is_store(p) else read_file_columns(p, options, cache, threads)

        for path, part in zip(paths, pool.map(read, paths)):
            parts.append(part)
            if on_file is not None:
                on_file(path)
    if cache == "use":
        prune_cache()
    if not parts or any(p is None for p in parts):
        return read_verdicts_reference(paths)
    table = _table_from_parts(parts, [str(p) for p in paths])
    repeats = repeated_keys(table)
    if len(repeats):
        table = newest_human_verdicts(table, repeats)
        if table is None:
            return read_verdicts_reference(paths)  # names each duplicate and its first line
    check_settings(table)
    return table
