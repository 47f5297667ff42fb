"""Verdicts as one columnar table: integer codes per verdict plus the dictionaries they index.

`read_verdicts` reads the verdict store's files (`rundir.verdict_store`: typed Parquet,
validated when written) as Arrow columns, with no JSON parse and no cache, and JSONL files
(human verdicts, an old run's, a file named on the command line) record by record with the
strict reader (`data.records.load_records`, every problem as `FILE:LINE: field: message`).
It merges them into one table and makes the checks that span files: no duplicate (question,
model, variant, judge, check) key (a human annotator's later verdict replaced the earlier as
the JSONL was read: `rundir.human`), one settings hash per judge (`check_settings`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from gamut_local.data.records import Verdict, load_records, verdict_key
from gamut_local.errors import InputError, Problem
from gamut_local.rundir import verdict_store
from gamut_local.rundir.store import read_jsonl
from gamut_local.vocab import DEFAULT_VARIANT, JUDGE_LABELS, TIERS, VARIANTS, VERDICTS

STRING_FIELDS = ("question_id", "model", "variant", "judge", "check_id", "tier", "verdict")
# The identity hashes (rundir.identity) may be absent (code -1): records made before them, hand-made ones.
IDENTITY_FIELDS = ("settings_hash", "check_hash", "answer_hash")

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


# ---------------------------------------------------------------- inputs and their hashes

def file_record(path: Path) -> dict:
    """Path, size, mtime and content hash of an input file (what the outputs name)."""
    stat = path.stat()
    with open(path, "rb") as f:
        sha256 = hashlib.file_digest(f, "sha256").hexdigest()
    return {"path": str(path), "bytes": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": sha256}


def current_record(old: dict) -> dict | None:
    """`old` still describes its file? Same size and mtime: trust the hash (as git's index
    does); else hash again. Returns the file's record now, or None if it is gone. The one
    rule for whether an output is current with its inputs (`reporting.tables`)."""
    path = Path(old.get("path", ""))
    try:
        stat = path.stat()
    except OSError:
        return None
    if stat.st_size == old.get("bytes") and stat.st_mtime_ns == old.get("mtime_ns"):
        return dict(old)
    return file_record(path)


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

def check_settings(table: VerdictTable, held: dict[str, tuple[str, str]] | None = None) -> None:
    """One settings hash per judge: verdicts made under two configurations (another prompt,
    other sampling) must not be scored as one judge. The judge stage refuses to append such
    a mix; this catches files put together by hand. `held`: {judge: (settings hash, where)}
    of the verdicts a run already holds, which the table's must match (`verdicts import`)."""
    if table.settings_hash is None or not len(table):
        return
    problems = []
    has = table.settings_hash >= 0
    for j, judge in enumerate(table.judges):
        rows = np.flatnonzero(has & (table.judge == j))
        if not len(rows):
            continue
        codes, first = np.unique(table.settings_hash[rows], return_index=True)
        order = np.argsort(first)
        base = (held or {}).get(judge) or (table.settings_hashes[codes[order[0]]], _where(table, rows[first[order[0]]]))
        for k in order:
            if table.settings_hashes[codes[k]] == base[0]:
                continue
            row = rows[first[k]]
            problems.append(Problem(
                table.files[table.file[row]], int(table.line[row]) or None, "settings_hash",
                f"judge {judge!r} has verdicts made under other settings: "
                f"{table.settings_hashes[codes[k]]!r} here, {base[0]!r} at {base[1]}; "
                "score one configuration of a judge at a time"))
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

@dataclass
class FileColumns:
    """One file's verdicts: per coded field, (codes, dictionary) with code -1 for an absent
    value; `probs` (n, 4) in `vocab.JUDGE_LABELS` order, NaN where absent; `input` the file's
    record (`file_record`); `line` where each row is (None: row k is line k + 1)."""

    codes: dict[str, tuple[np.ndarray, list[str]]]
    probs: np.ndarray
    input: dict
    line: np.ndarray | None = None

    @property
    def n(self) -> int:
        return len(self.probs)


def merge_codes(pairs: list[tuple[np.ndarray, list[str]]], fixed=None, dtype=np.int32) -> tuple[np.ndarray, list]:
    """(codes, dictionary) pairs as one: the codes of every row against one dictionary (sorted,
    or the fixed vocabulary), code -1 (no value) kept."""
    dictionary = list(fixed) if fixed else sorted({v for _, values in pairs for v in values})
    index = {v: i for i, v in enumerate(dictionary)}
    out = np.empty(sum(len(codes) for codes, _ in pairs), dtype=dtype)
    at = 0
    for codes, values in pairs:
        lookup = np.array([index[v] for v in values] + [-1], dtype=dtype)
        # Code -1 wraps to the appended -1. (mode "raise", the default, copies `out` first.)
        np.take(lookup, codes, out=out[at:at + len(codes)], mode="wrap")
        at += len(codes)
    return out, dictionary


def _merge(parts: list[FileColumns], name: str, fixed=None, dtype=np.int32) -> tuple[list, np.ndarray]:
    codes, dictionary = merge_codes([p.codes[name] for p in parts], fixed, dtype)
    return dictionary, codes


def _table_from_parts(parts: list[FileColumns], files: list[str]) -> VerdictTable:
    judges, judge = _merge(parts, "judge")
    models, model = _merge(parts, "model")
    questions, question = _merge(parts, "question_id")
    checks, check = _merge(parts, "check_id")
    identity = {f: _merge(parts, f) for f in IDENTITY_FIELDS}
    sizes = np.array([p.n for p in parts], dtype=np.int64)
    file = np.repeat(np.arange(len(parts), dtype=np.int32), sizes)
    line = np.concatenate([p.line if p.line is not None else np.arange(1, p.n + 1) for p in parts] or [[]])
    return VerdictTable(
        judges=judges, models=models, questions=questions, checks=checks, files=files,
        judge=judge, model=model, question=question, check=check,
        variant=_merge(parts, "variant", VARIANTS, np.int8)[1],
        tier=_merge(parts, "tier", TIERS, np.int8)[1],
        verdict=_merge(parts, "verdict", VERDICTS, np.int8)[1],
        probs=np.concatenate([p.probs for p in parts]) if parts else np.zeros((0, len(JUDGE_LABELS))),
        file=file, line=line.astype(np.int32),
        **{f"{f}es": identity[f][0] for f in IDENTITY_FIELDS}, **{f: identity[f][1] for f in IDENTITY_FIELDS},
        inputs=[p.input for p in parts])


def store_files(paths) -> list[Path]:
    """Verdict inputs (store units, folders, JSONL files: `verdict_store.inputs`) as the files
    that hold them now: each unit's compacted file and live parts, each JSONL file."""
    out = []
    for p in verdict_store.inputs(paths):
        files = verdict_store.unit_files(p) if verdict_store.is_store(p) else [p]
        if not files:
            raise InputError([Problem(str(p), None, "", "no such verdict store unit (nor parts of one)")])
        out += files
    return out


def store_columns(path: Path, probs: bool = True) -> FileColumns:
    """One verdict store file's columns, as they are: typed, dictionary-encoded, validated
    when written; only the schema version is checked (`rundir.verdict_store`). Without
    `probs` the four probability columns (a third of the decoding) are not read: NaN."""
    from gamut_local.data import arrow

    names = [*STRING_FIELDS, *IDENTITY_FIELDS]
    table = verdict_store.read_files([path], [*names, *(verdict_store.PROB_COLUMNS if probs else ())])
    table = table.unify_dictionaries().combine_chunks()
    out = np.full((table.num_rows, len(JUDGE_LABELS)), np.nan)
    if not table.num_rows:
        return FileColumns({name: (np.zeros(0, dtype=np.int32), []) for name in names}, out, file_record(path))
    codes = {name: arrow.codes(table.column(name).chunk(0)) for name in names}
    for k, name in enumerate(verdict_store.PROB_COLUMNS if probs else ()):
        out[:, k] = arrow.floats(table.column(name).chunk(0))
    return FileColumns(codes, out, file_record(path))


def _jsonl_columns(paths: list[Path]) -> list[FileColumns]:
    """JSONL files through the strict reader, together (every problem of every file), one
    FileColumns per file."""
    table = read_verdicts_reference(paths)
    fixed = {"variant": VARIANTS, "tier": TIERS, "verdict": VERDICTS}
    out = []
    for k, path in enumerate(paths):
        rows = table.file == k
        codes = {name: (getattr(table, attr)[rows].astype(np.int32), list(names))
                 for name, attr, names in (("question_id", "question", table.questions), ("model", "model", table.models),
                                           ("judge", "judge", table.judges), ("check_id", "check", table.checks),
                                           *((f, f[:-len("_id")] if f.endswith("_id") else f, fixed[f])
                                             for f in ("variant", "tier", "verdict")))}
        for f in IDENTITY_FIELDS:
            codes[f] = (getattr(table, f)[rows], getattr(table, f"{f}es"))
        out.append(FileColumns(codes, table.probs[rows], table.inputs[k], table.line[rows]))
    return out


def read_verdicts(paths: list[str | Path], *, probs: bool = True) -> VerdictTable:
    """Read verdict store units and JSONL files (and folders of them) into one VerdictTable
    (see the module docstring); `probs=False`: the store's probability columns are not read
    (NaN), for readers that never look at them. Store files are read side by side (pyarrow
    lets go of the GIL). Raises InputError with the strict reader's own FILE:LINE messages."""
    from concurrent.futures import ThreadPoolExecutor

    paths = store_files(paths)
    jsonl = [p for p in paths if not verdict_store.is_store(p)]
    columns = dict(zip(jsonl, _jsonl_columns(jsonl))) if jsonl else {}
    stored = [p for p in paths if p not in columns]
    with ThreadPoolExecutor(min(4, os.cpu_count() or 1)) as pool:
        columns.update(zip(stored, pool.map(lambda p: store_columns(p, probs), stored)))
    table = _table_from_parts([columns[p] for p in paths], [str(p) for p in paths])
    # A human's later verdict replaced the earlier one as the JSONL was read (`rundir.human`,
    # in `load_records`); the store holds no human verdicts. So any repeat here is an error.
    if len(repeated_keys(table)):
        read_verdicts_reference(paths)  # raises, naming each duplicate and its first line
    check_settings(table)
    return table
