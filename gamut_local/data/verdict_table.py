"""Verdict files as one columnar table: integer codes per verdict plus the dictionaries they index.

`read_verdicts` reads each file with pyarrow's JSON reader straight into columns and validates
them column-wise: required fields present and non-empty, strings where strings belong (the
reader refuses a number in a string column), labels and tiers from the vocabulary, `probs`
an object of numbers, one record per line, no duplicate (question, model, variant, judge,
check) key across the files (except a human annotator's later verdict, which replaces the
earlier: `rundir.human`), one settings hash per judge. Only when any of that fails, or the
file is something the column reader does not take (blank lines, a record without `variant`,
which defaults to multimodal, a torn last line, an empty file, bytes that are not UTF-8), are
the files read again record by record with `data.records.load_records`, the reference, which names every problem as `FILE:LINE: field:
message`. So errors are the reference's own, and a good file never pays for a Python dict per
verdict.

pyarrow rather than DuckDB (both measured, scripts/bench_analysis.py and docs/outputs.md):
DuckDB's JSON reader casts a number in a VARCHAR column to text silently (strictness would
need JSON-typed columns, ~4x slower), and handing 2.3M rows of strings from DuckDB to Python
took longer than pyarrow's whole read; DuckDB is fastest only while the aggregation stays in
its SQL. Without pyarrow installed (the core install), the reference path reads the files.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from gamut_local.data.records import Verdict, load_records, verdict_key
from gamut_local.errors import InputError, Problem
from gamut_local.rundir.human import is_human
from gamut_local.rundir.store import read_jsonl
from gamut_local.vocab import DEFAULT_VARIANT, JUDGE_LABELS, NAME_PATTERN, TIERS, VARIANTS, VERDICTS

# Deeper than this, a line goes to the reference (json.loads stops near 1,000 levels too).
MAX_DEPTH = 1000
OPENERS, CLOSERS = np.frombuffer(b"{[", dtype=np.uint8), np.frombuffer(b"}]", dtype=np.uint8)
# Bigger blocks than pyarrow's 1 MB default: fewer per-block type unifications on 12 MB files.
BLOCK_SIZE = 4 << 20
STRING_FIELDS = ("question_id", "model", "variant", "judge", "check_id", "tier", "verdict")
# The dictionary each string field is coded against; the vocabularies are fixed.
FIXED = {"variant": VARIANTS, "tier": TIERS, "verdict": VERDICTS}
# Names that become file names (`records.SafeName`).
SAFE_NAMES = ("model", "judge")
_SAFE = re.compile(NAME_PATTERN)
# The per-row arrays of a VerdictTable (the rest are dictionaries and file records).
ROW_FIELDS = ("judge", "model", "variant", "question", "check", "tier", "verdict", "probs", "file", "line",
              "settings_hash")


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
    settings_hashes: list[str] = field(default_factory=list)
    settings_hash: np.ndarray | None = None  # int32 into settings_hashes, -1: none
    inputs: list[dict] = field(default_factory=list)  # {path, bytes, mtime_ns, sha256} per file

    variants = VARIANTS

    def __len__(self) -> int:
        return len(self.verdict)


# ---------------------------------------------------------------- inputs and their hashes

def file_record(path: Path, raw: bytes | None = None) -> dict:
    """Path, size, mtime and content hash of an input file (hashing `raw` when given)."""
    stat = path.stat()
    if raw is None:
        raw = path.read_bytes()
    return {"path": str(path), "bytes": stat.st_size, "mtime_ns": stat.st_mtime_ns,
            "sha256": hashlib.sha256(raw).hexdigest()}


def current_record(old: dict) -> dict | None:
    """`old` still describes its file? Same size and mtime: trust the hash (as git's index
    does); else hash again. Returns the file's record now, or None if it is gone."""
    path = Path(old.get("path", ""))
    try:
        stat = path.stat()
    except OSError:
        return None
    if stat.st_size == old.get("bytes") and stat.st_mtime_ns == old.get("mtime_ns"):
        return dict(old)
    return file_record(path)


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


def table_from_records(records: list[dict], files: list[str] | None = None, file=None, line=None,
                       inputs: list[dict] | None = None) -> VerdictTable:
    """Code validated verdict dicts (the judge stage's records) into a VerdictTable.

    `file`/`line`: where each record came from (indices into `files`); default: nowhere.
    """
    n = len(records)
    col = {f: [r.get(f, DEFAULT_VARIANT) if f == "variant" else r[f] for r in records] for f in STRING_FIELDS}
    names = {f: sorted(set(col[f])) for f in ("judge", "model", "question_id", "check_id")}
    hashes = [_hash_text(r.get("settings_hash")) for r in records]
    hash_names = sorted({h for h in hashes if h is not None})
    hash_code = {h: i for i, h in enumerate(hash_names)}
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
        settings_hashes=hash_names,
        settings_hash=np.array([-1 if h is None else hash_code[h] for h in hashes], dtype=np.int32),
        inputs=list(inputs or []))


def read_verdicts_reference(paths: list[str | Path]) -> VerdictTable:
    """The record-by-record path: `load_records` validates (every problem as FILE:LINE), then
    the records are coded. The fast path must give the same table and the same errors."""
    paths = [Path(p) for p in paths]
    records = load_records(paths, Verdict, verdict_key)
    # Where each record came from, replaying load_records' own order: a human's later verdict
    # on the same key takes the place of the earlier one (rundir.human).
    file, line, at = [], [], {}
    for k, path in enumerate(paths):
        for no, obj in read_jsonl(path):
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
    out = dataclasses.replace(table, **{f: getattr(table, f)[rows] for f in ROW_FIELDS})
    used = np.unique(out.settings_hash[out.settings_hash >= 0])  # drop hashes of replaced rows
    remap = np.full(len(table.settings_hashes) + 1, -1, dtype=np.int32)
    remap[used] = np.arange(len(used), dtype=np.int32)
    out.settings_hashes = [table.settings_hashes[i] for i in used]
    out.settings_hash = remap[out.settings_hash]
    return out


# ---------------------------------------------------------------- the column path

def _parse_options(pa, pj):
    schema = pa.schema([(f, pa.string()) for f in (*STRING_FIELDS, "raw", "settings_hash")])
    # "infer" (not "ignore") for the other fields: pyarrow then still parses and UTF-8-checks
    # them, as json.loads does in the reference; a field whose type varies between records
    # is a reader error and sends the files to the reference path, which accepts it.
    return pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="infer")


def _encoded(column) -> tuple[np.ndarray, list] | None:
    """(codes, dictionary) of a string column; None if it has a null (missing) or "" value."""
    if column.null_count:
        return None
    encoded = column.combine_chunks().dictionary_encode()
    values = encoded.dictionary.to_pylist()
    if "" in values:
        return None
    return encoded.indices.to_numpy(zero_copy_only=False), values


def _probs(tab, pa) -> np.ndarray | None:
    """The `probs` column as an (n, 4) float matrix; None where it is not an object of numbers
    with a number for every key it names (absent and null keys look alike in columns)."""
    out = np.full((tab.num_rows, len(JUDGE_LABELS)), np.nan)
    if "probs" not in tab.column_names or pa.types.is_null(tab.schema.field("probs").type):
        return out
    column = tab.column("probs").combine_chunks()
    if not pa.types.is_struct(column.type):
        return None
    valid = column.is_valid().to_numpy(zero_copy_only=False)
    for k in range(column.type.num_fields):
        name = column.type.field(k).name
        child = column.field(k)
        if not (pa.types.is_floating(child.type) or pa.types.is_integer(child.type)):
            return None
        child_valid = child.is_valid().to_numpy(zero_copy_only=False)
        if (valid & ~child_valid).any():
            return None
        if name in JUDGE_LABELS:
            values = child.cast(pa.float64()).to_numpy(zero_copy_only=False)
            out[:, JUDGE_LABELS.index(name)] = np.where(valid, values, np.nan)
    return out


def _lines_if_shallow(raw: bytes) -> int:
    """The number of lines, or 0 if the file is empty or a line may nest deeper than
    MAX_DEPTH: pyarrow's parser recurses and a deep enough line kills the process (between
    5,000 and 20,000 levels), where the reference says "nested too deeply"."""
    data = np.frombuffer(raw, dtype=np.uint8)
    newline = data == ord("\n")
    if not _no_long_lines(newline) and _may_nest_deep(data, newline):
        return 0
    return int(np.count_nonzero(newline)) + (not raw.endswith(b"\n")) if raw else 0


def _no_long_lines(newline: np.ndarray) -> bool:
    """No line is longer than 2 * MAX_DEPTH bytes, so none nests deeper than MAX_DEPTH (a
    line of n bytes nests at most n / 2 deep). Such a line would cover a whole aligned
    block of MAX_DEPTH bytes, so: every block has a newline. Cheaper than finding the lines."""
    blocks = len(newline) // MAX_DEPTH
    return bool(newline[:blocks * MAX_DEPTH].reshape(blocks, MAX_DEPTH).any(axis=1).all())


def _may_nest_deep(data: np.ndarray, newline: np.ndarray) -> bool:
    """Some line nests deeper than MAX_DEPTH (brackets inside strings count too: cautious)."""
    ends = np.flatnonzero(newline)
    starts = np.r_[0, ends + 1]
    stops = np.r_[ends, len(data)]
    for k in np.flatnonzero(stops - starts > 2 * MAX_DEPTH):
        line = data[starts[k]:stops[k]]
        step = np.isin(line, OPENERS).astype(np.int32) - np.isin(line, CLOSERS)
        if np.cumsum(step).max() > MAX_DEPTH:
            return True
    return False


def _is_utf8(raw: bytes, pa) -> bool:
    """The whole file is UTF-8, as `json.loads` of each line requires: pyarrow's reader checks
    neither the bytes of its string columns nor fields outside its schema. One SIMD pass."""
    offsets = pa.py_buffer(np.array([0, len(raw)], dtype=np.int64))
    whole = pa.Array.from_buffers(pa.large_string(), 1, [None, offsets, pa.py_buffer(raw)])
    try:
        whole.validate(full=True)  # checks the bytes in place, no copy
    except pa.ArrowInvalid:
        return False
    return True


def _read_columns(path: Path, pa, pj, options) -> dict | None:
    """One file's columns, coded against its own dictionaries; None: read it the reference way."""
    try:
        raw = path.read_bytes()
        n_lines = _lines_if_shallow(raw)
        if not n_lines or not _is_utf8(raw, pa):
            return None
        tab = pj.read_json(pa.BufferReader(raw), parse_options=options,
                           read_options=pj.ReadOptions(block_size=BLOCK_SIZE))
        return _columns(path, raw, n_lines, tab, pa)
    # UnicodeDecodeError (a ValueError) can come late: a bad byte in a key shows when the
    # schema's names are read.
    except (OSError, ValueError, pa.ArrowException):
        return None


def _columns(path: Path, raw: bytes, n_lines: int, tab, pa) -> dict | None:
    # One record per line: pyarrow also takes two objects on one line, the reference does not,
    # and a blank line (which both skip) would shift line numbers.
    if tab.num_rows != n_lines:
        return None
    cols = {}
    for f in STRING_FIELDS:
        cols[f] = _encoded(tab.column(f))
        if cols[f] is None or (f in FIXED and not set(cols[f][1]) <= set(FIXED[f])):
            return None
        if f in SAFE_NAMES and not all(_SAFE.fullmatch(v) for v in cols[f][1]):
            return None
    hashes = tab.column("settings_hash").combine_chunks().dictionary_encode()
    probs = _probs(tab, pa)
    if probs is None:
        return None
    idx = hashes.indices.fill_null(-1).to_numpy(zero_copy_only=False)
    cols["settings_hash"] = (idx, hashes.dictionary.to_pylist())
    return {"cols": cols, "probs": probs, "n": tab.num_rows, "input": file_record(path, raw)}


def _merge(parts: list[dict], files: list[str], field_name: str, fixed=None) -> tuple[list, np.ndarray]:
    """One dictionary (sorted, or the fixed vocabulary) for a field over every file, and the
    codes of every row against it."""
    dictionary = list(fixed) if fixed else sorted({v for p in parts for v in p["cols"][field_name][1]})
    index = {v: i for i, v in enumerate(dictionary)}
    out = []
    for p in parts:
        codes, values = p["cols"][field_name]
        lookup = np.array([index[v] for v in values] + [-1], dtype=np.int32)
        out.append(lookup[codes])  # code -1 (no value) picks the appended -1
    return dictionary, np.concatenate(out) if out else np.zeros(0, dtype=np.int32)


def _table_from_parts(parts: list[dict], files: list[str]) -> VerdictTable:
    judges, judge = _merge(parts, files, "judge")
    models, model = _merge(parts, files, "model")
    questions, question = _merge(parts, files, "question_id")
    checks, check = _merge(parts, files, "check_id")
    hashes, settings_hash = _merge(parts, files, "settings_hash")
    return VerdictTable(
        judges=judges, models=models, questions=questions, checks=checks, files=files,
        judge=judge, model=model, question=question, check=check,
        variant=_merge(parts, files, "variant", VARIANTS)[1].astype(np.int8),
        tier=_merge(parts, files, "tier", TIERS)[1].astype(np.int8),
        verdict=_merge(parts, files, "verdict", VERDICTS)[1].astype(np.int8),
        probs=np.concatenate([p["probs"] for p in parts]),
        file=np.concatenate([np.full(p["n"], k, dtype=np.int32) for k, p in enumerate(parts)]),
        line=np.concatenate([np.arange(1, p["n"] + 1, dtype=np.int32) for p in parts]),
        settings_hashes=hashes, settings_hash=settings_hash, inputs=[p["input"] for p in parts])


def read_verdicts(paths: list[str | Path], on_file=None) -> VerdictTable:
    """Read and validate verdict JSONL files into one VerdictTable (see the module docstring).

    `on_file(path)` is called after each file (a progress bar). Raises InputError with the
    reference's own FILE:LINE messages.
    """
    paths = [Path(p) for p in paths]
    try:
        import pyarrow as pa
        import pyarrow.json as pj
    except ImportError:
        return read_verdicts_reference(paths)
    options = _parse_options(pa, pj)
    parts = []
    # Files in parallel as well as blocks within a file: pyarrow and hashlib release the GIL,
    # and a 12 MB file has too few blocks to keep every core busy on its own.
    with ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as pool:
        for path, part in zip(paths, pool.map(lambda p: _read_columns(p, pa, pj, options), paths)):
            parts.append(part)
            if on_file is not None:
                on_file(path)
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
