"""Verdicts as one columnar table: integer codes per verdict plus the dictionaries they index.

`read_verdicts` reads the verdict store's files (`rundir.verdict_store`: typed Parquet,
validated when written) as Arrow columns, with no JSON parse and no cache, and JSONL files
(human verdicts, an old run's, a file named on the command line) record by record with the
strict reader (`data.records.load_records`, every problem as `FILE:LINE: field: message`).
Each file becomes its columns (`FileColumns`: codes into the file's own dictionaries); they
are merged into one table, and the checks that span files are made: no duplicate (question,
model, variant, judge, check) key (a human annotator's later verdict replaced the earlier as
the JSONL was read: `rundir.human`), one settings hash per judge (`check_settings`).
`read_verdicts_reference` reads every file, the store's too, record by record: the tests'
yardstick for the column path, and the source of the duplicate messages.
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


# ---------------------------------------------------------------- one file's columns

@dataclass
class FileColumns:
    """One file's `n` verdicts: per coded field, (codes, dictionary) with code -1 for an absent
    value; `probs` (n, 4) in `vocab.JUDGE_LABELS` order, NaN where absent (None: not read);
    `input` the file's record (`file_record`; None: not from a file); `line` where each row is
    (None: row k is line k + 1)."""

    n: int
    codes: dict[str, tuple[np.ndarray, list[str]]]
    probs: np.ndarray | None
    input: dict | None
    line: np.ndarray | None = None


def store_columns(paths: list[Path], probs: bool = True) -> list[FileColumns]:
    """The verdict store files' columns, one FileColumns per file, as they are: typed,
    dictionary-encoded, validated when written; only the schema version is checked
    (`rundir.verdict_store`). The files are read side by side (pyarrow lets go of the GIL)
    and their dictionaries unified by Arrow, so every file's codes index the same lists
    (`merge_codes` maps each list once). Without `probs` the four probability columns (a
    third of the decoding) are not read: NaN."""
    if not paths:
        return []
    import pyarrow as pa
    from concurrent.futures import ThreadPoolExecutor

    from gamut_local.data import arrow

    names = [*STRING_FIELDS, *IDENTITY_FIELDS]
    wanted = [*names, *(verdict_store.PROB_COLUMNS if probs else ())]
    with ThreadPoolExecutor(min(4, os.cpu_count() or 1)) as pool:
        read = list(pool.map(lambda p: (verdict_store.read_files([p], wanted), file_record(p)), paths))
    sizes = [t.num_rows for t, _ in read]
    if not sum(sizes):
        return [FileColumns(0, {name: (np.zeros(0, dtype=np.int32), []) for name in names}, None, record)
                for _, record in read]
    table = pa.concat_tables([t for t, _ in read], promote_options="permissive")
    table = table.unify_dictionaries().combine_chunks()
    codes = {name: arrow.codes(table.column(name).chunk(0)) for name in names}
    p = np.empty((table.num_rows, len(JUDGE_LABELS))) if probs else None
    for k, name in enumerate(verdict_store.PROB_COLUMNS if probs else ()):
        p[:, k] = arrow.floats(table.column(name).chunk(0))
    out, at = [], 0
    for size, (_, record) in zip(sizes, read):
        rows = slice(at, at + size)
        at += size
        out.append(FileColumns(size, {k: (c[rows], values) for k, (c, values) in codes.items()},
                               None if p is None else p[rows], record))
    return out


def _value(record: dict, name: str):
    if name == "variant":
        return record.get(name, DEFAULT_VARIANT)
    if name in IDENTITY_FIELDS:  # any JSON value in a caller's dict; a non-string one compared as text
        value = record.get(name)
        return value if value is None or isinstance(value, str) else repr(value)
    return record[name]


def record_columns(records: list[dict], input: dict | None = None, line=None) -> FileColumns:
    """Verdict dicts (validated by the strict reader, or a caller's own) as one file's columns."""
    codes = {}
    for name in (*STRING_FIELDS, *IDENTITY_FIELDS):
        values = [_value(r, name) for r in records]
        names = sorted({v for v in values if v is not None})
        index = {v: i for i, v in enumerate(names)}
        codes[name] = (np.fromiter((index.get(v, -1) for v in values), dtype=np.int32, count=len(values)), names)
    probs = np.full((len(records), len(JUDGE_LABELS)), np.nan)
    for i, p in enumerate(r.get("probs") for r in records):
        for k, label in enumerate(JUDGE_LABELS):
            if p and label in p:
                probs[i, k] = p[label]
    return FileColumns(len(records), codes, probs, input, None if line is None else np.asarray(line, dtype=np.int32))


def _strict_columns(paths: list[Path]) -> list[FileColumns]:
    """Files through the strict record-by-record reader, together (every problem of every
    file at once), one FileColumns per file."""
    where: list[tuple[int, int]] = []
    records = load_records(paths, Verdict, verdict_key, where=where)
    rows: list[list[int]] = [[] for _ in paths]
    for i, (k, _) in enumerate(where):
        rows[k].append(i)
    return [record_columns([records[i] for i in r], file_record(p), [where[i][1] for i in r])
            for p, r in zip(paths, rows)]


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
    """The table of some rows (indices or a mask); the dictionaries stay as they are."""
    return dataclasses.replace(table, **{f: getattr(table, f)[rows] for f in ROW_FIELDS})


# ---------------------------------------------------------------- files merged into one table

def merge_codes(pairs: list[tuple[np.ndarray, list[str]]], fixed=None, dtype=np.int32) -> tuple[np.ndarray, list]:
    """(codes, dictionary) pairs as one: the codes of every row against one dictionary (sorted,
    or the fixed vocabulary), code -1 (no value) kept."""
    lists = {id(values): values for _, values in pairs}  # store files share their lists (`store_columns`)
    dictionary = list(fixed) if fixed else sorted({v for values in lists.values() for v in values})
    index = {v: i for i, v in enumerate(dictionary)}
    lookups = {k: np.array([index[v] for v in values] + [-1], dtype=dtype) for k, values in lists.items()}
    out = np.empty(sum(len(codes) for codes, _ in pairs), dtype=dtype)
    at = 0
    for codes, values in pairs:
        lookup = lookups[id(values)]
        # Code -1 wraps to the appended -1. (mode "raise", the default, copies `out` first.)
        np.take(lookup, codes, out=out[at:at + len(codes)], mode="wrap")
        at += len(codes)
    return out, dictionary


def table_from_parts(parts: list[FileColumns], files: list[str]) -> VerdictTable:
    """One table of the files' columns, in order (`files[k]` names `parts[k]`)."""
    merged = {name: merge_codes([p.codes[name] for p in parts], fixed, dtype)
              for name, fixed, dtype in (*((f, None, np.int32) for f in ("judge", "model", "question_id", "check_id",
                                                                           *IDENTITY_FIELDS)),
                                         ("variant", VARIANTS, np.int8), ("tier", TIERS, np.int8),
                                         ("verdict", VERDICTS, np.int8))}
    sizes = np.array([p.n for p in parts], dtype=np.int64)
    line = [p.line if p.line is not None else np.arange(1, p.n + 1, dtype=np.int32) for p in parts]
    return VerdictTable(
        judges=merged["judge"][1], models=merged["model"][1], questions=merged["question_id"][1],
        checks=merged["check_id"][1], files=files,
        judge=merged["judge"][0], model=merged["model"][0], question=merged["question_id"][0],
        check=merged["check_id"][0], variant=merged["variant"][0], tier=merged["tier"][0],
        verdict=merged["verdict"][0],
        probs=_probs(parts),
        file=np.repeat(np.arange(len(parts), dtype=np.int32), sizes),
        line=np.concatenate(line).astype(np.int32) if parts else np.zeros(0, dtype=np.int32),
        **{f"{f}es": merged[f][1] for f in IDENTITY_FIELDS}, **{f: merged[f][0] for f in IDENTITY_FIELDS},
        inputs=[p.input for p in parts if p.input is not None])


def _probs(parts: list[FileColumns]) -> np.ndarray:
    """The parts' probabilities as one (n, 4) array; where none were read, a read-only NaN
    view that takes no memory (73 MB at paper scale)."""
    n = sum(p.n for p in parts)
    if all(p.probs is None for p in parts):
        return np.broadcast_to(np.float64(np.nan), (n, len(JUDGE_LABELS)))
    return np.concatenate([np.full((p.n, len(JUDGE_LABELS)), np.nan) if p.probs is None else p.probs
                           for p in parts])


def table_from_records(records: list[dict]) -> VerdictTable:
    """Verdict dicts (a caller's, not from a file) as a VerdictTable."""
    return table_from_parts([record_columns(records, line=np.zeros(len(records)))], ["<verdicts>"])


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


def read_verdicts_reference(paths: list[str | Path]) -> VerdictTable:
    """Every file, store files too, through the strict record-by-record reader."""
    paths = store_files(paths)
    table = table_from_parts(_strict_columns(paths), [str(p) for p in paths])
    check_settings(table)
    return table


def read_verdicts(paths: list[str | Path], *, probs: bool = True) -> VerdictTable:
    """Read verdict store units and JSONL files (and folders of them) into one VerdictTable
    (see the module docstring); `probs=False`: the store's probability columns are not read
    (NaN), for readers that never look at them. Store files are read side by side (pyarrow
    lets go of the GIL). Raises InputError with the strict reader's own FILE:LINE messages."""
    paths = store_files(paths)
    jsonl = [p for p in paths if not verdict_store.is_store(p)]
    columns = dict(zip(jsonl, _strict_columns(jsonl))) if jsonl else {}
    stored = [p for p in paths if p not in columns]
    columns.update(zip(stored, store_columns(stored, probs)))
    table = table_from_parts([columns[p] for p in paths], [str(p) for p in paths])
    # A human's later verdict replaced the earlier one as the JSONL was read (`rundir.human`,
    # in `load_records`); the store holds no human verdicts. So any repeat here is an error.
    if len(repeated_keys(table)):
        read_verdicts_reference(paths)  # raises, naming each duplicate and its first line
    check_settings(table)
    return table
