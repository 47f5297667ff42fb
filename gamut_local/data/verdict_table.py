"""Verdicts as one columnar table: integer codes per verdict plus the dictionaries they index.

`read_verdicts` reads the verdict store's files (`rundir.verdict_store`: typed Parquet,
validated when written, checked column-wise when read) as Arrow columns, with no JSON parse
and no cache, and JSONL files (human verdicts, an old run's, a file named on the command line)
record by record with the strict reader (`data.records.load_records`, every problem as
`FILE:LINE: field: message`). The store files become one set of columns (`Columns`: each
file's dictionary codes as read), the JSONL files another; they are merged into one table in
the order of the files (every code mapped to one sorted dictionary in one pass:
`merge_codes`), and the checks that span files are made: no duplicate (question, model,
variant, judge, check) key (a human annotator's later verdict replaced the earlier as the
JSONL was read: `rundir.human`), one settings hash per judge (`check_settings`).
`read_verdicts_reference` reads every file, the store's too, record by record: the tests'
yardstick for the column path, and the source of the duplicate messages.
"""

from __future__ import annotations

import dataclasses
import math
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from itertools import repeat
from pathlib import Path

import numpy as np

from gamut_local.errors import InputError, Problem
from gamut_local.rundir import verdict_store
from gamut_local.rundir.identity import VERDICT_IDENTITY, file_record
from gamut_local.vocab import DEFAULT_VARIANT, JUDGE_LABELS, TIERS, VARIANTS, VERDICTS

# Every verdict's strings, then its identity hashes, which may be absent (code -1): records
# made before them, hand-made ones.
CODED = (*verdict_store.REQUIRED, *VERDICT_IDENTITY)

# The per-row arrays of a VerdictTable (the rest are dictionaries and file records).
ROW_FIELDS = ("judge", "model", "variant", "question", "check", "tier", "verdict", "probs", "file", "line",
              *VERDICT_IDENTITY)


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


# ---------------------------------------------------------------- files' rows as columns

@dataclass
class Columns:
    """Rows read from files, before merging: per coded field its (codes, dictionary) pairs, one
    per run of rows (a store file's chunk), code -1 for an absent value; `probs` (n, 4) in
    `vocab.JUDGE_LABELS` order, NaN where absent (None: not read); `file` (a position in the
    read's list of files) and `line` (0: not from a file)."""

    codes: dict[str, list[tuple[np.ndarray, list[str]]]]
    probs: np.ndarray | None
    file: np.ndarray
    line: np.ndarray


def store_columns(tables: list, file: list[int]) -> Columns:
    """Store files' Arrow tables (`verdict_store.read_files`: typed, dictionary-encoded, the
    writer's rules checked) as one Columns, each chunk's codes as read (`merge_codes` maps
    them all in one pass); `file[k]`: the position of table k's file. Probability columns not
    read: `probs` None."""
    from gamut_local.data import arrow

    probs = None
    if verdict_store.PROB_COLUMNS[0] in tables[0].column_names:
        probs = np.stack([np.concatenate([arrow.floats(t.column(name).combine_chunks()) for t in tables])
                          for name in verdict_store.PROB_COLUMNS], axis=1)
    sizes = [t.num_rows for t in tables]
    codes = {}
    for name in (n for n in CODED if n in tables[0].column_names):
        chunks = [c for t in tables for c in t.column(name).chunks]
        codes[name] = list(map(arrow.codes, chunks, arrow.dictionaries(chunks)))
    return Columns(codes, probs, np.repeat(np.asarray(file, dtype=np.int32), sizes),
                   np.concatenate([np.arange(1, n + 1, dtype=np.int32) for n in sizes]))


def _value(record: dict, name: str):
    if name == "variant":
        return record.get(name, DEFAULT_VARIANT)
    if name in VERDICT_IDENTITY:  # any JSON value in a caller's dict; a non-string one compared as text
        value = record.get(name)
        return value if value is None or isinstance(value, str) else repr(value)
    return record[name]


def record_columns(records: list[dict], file, line) -> Columns:
    """Verdict dicts (validated by the strict reader, or a caller's own) as Columns."""
    codes = {}
    for name in CODED:
        values = [_value(r, name) for r in records]
        names = sorted({v for v in values if v is not None})
        codes[name] = [(positions(names, values, dtype=np.int32), names)]
    probs = np.array([[(r.get("probs") or {}).get(label, np.nan) for label in JUDGE_LABELS] for r in records],
                     dtype=np.float64).reshape(-1, len(JUDGE_LABELS))
    return Columns(codes, probs, np.asarray(file, dtype=np.int32), np.asarray(line, dtype=np.int32))


def positions(names: list[str], values, missing: int = -1, dtype=np.int64) -> np.ndarray:
    """Each value's position in `names`, `missing` where it is not there. `map` over the dict's
    own `get` runs in C: a generator here cost 0.07 s per 54,000 keys at paper scale."""
    index = {name: i for i, name in enumerate(names)}
    return np.fromiter(map(index.get, values, repeat(missing)), dtype=dtype, count=len(values))


def _strict_columns(paths: list[Path], file: list[int]) -> Columns:
    """Files through the strict record-by-record reader, together (every problem of every
    file at once); `file[k]`: the position of `paths[k]`."""
    from gamut_local.data.records import Verdict, load_records, verdict_key  # its models: 12 ms a store-only read spares

    where: list[tuple[int, int]] = []
    records = load_records(paths, Verdict, verdict_key, where=where)
    k, line = np.array(where, dtype=np.int64).reshape(-1, 2).T
    return record_columns(records, np.asarray(file, dtype=np.int32)[k], line)


# ---------------------------------------------------------------- checks on the whole table

def check_settings(table: VerdictTable, held: VerdictTable | None = None) -> None:
    """One settings hash per judge: verdicts made under two configurations (another prompt,
    other sampling) must not be scored as one judge. The judge stage refuses to append such
    a mix; this catches files put together by hand. `held`: the verdicts a run already holds,
    whose settings the table's must match (`verdicts import`)."""
    base, problems = {}, []  # judge: (its first settings hash, where)
    for t in (held, table) if held is not None else (table,):
        for row in _first_rows(t):
            judge, value = t.judges[t.judge[row]], t.settings_hashes[t.settings_hash[row]]
            name, line = t.files[t.file[row]], int(t.line[row]) or None
            first, where = base.setdefault(judge, (value, f"{name}:{line}" if line else name))
            if value != first and t is table:
                problems.append(Problem(name, line, "settings_hash", (
                    f"judge {judge!r} has verdicts made under other settings: {value!r} here, {first!r} at "
                    f"{where}; score one configuration of a judge at a time")))
    if problems:
        raise InputError(problems)


def _first_rows(table: VerdictTable) -> list[int]:
    """The first row of each (judge, settings hash) pair, by judge, then row."""
    if table.settings_hash is None or not len(table):
        return []
    sizes = [max(len(table.judges), 1), len(table.settings_hashes) + 1]
    key = row_key([table.judge, table.settings_hash], sizes)
    key += 1  # judge * width + hash code + 1: a multiple of the width where a row has no hash
    starts = np.r_[0, np.flatnonzero(key[1:] != key[:-1]) + 1]  # a key's first row starts a run of it
    keys, first = np.unique(key[starts], return_index=True)
    return sorted(starts[first[keys % sizes[1] != 0]].tolist(), key=lambda row: (table.judge[row], row))


def has_repeats(table: VerdictTable) -> bool:
    """Does a (question, model, variant, judge, check) key occur twice?"""
    columns = ((table.question, len(table.questions)), (table.model, len(table.models)),
               (table.variant, len(VARIANTS)), (table.judge, len(table.judges)), (table.check, len(table.checks)))
    sizes = [max(n, 1) for _, n in columns]
    if math.prod(sizes) >= 2**62:  # too many combinations for one int64
        return len(np.unique(np.stack([codes for codes, _ in columns], axis=1), axis=0)) < len(table)
    return len(distinct(row_key([codes for codes, _ in columns], sizes), math.prod(sizes))) < len(table)


def row_key(parts: list[np.ndarray], sizes: list[int]) -> np.ndarray:
    """One int per row for a tuple of codes (`parts[k]` in [0, sizes[k])), built in place:
    int32 where every combination fits (half the memory traffic of int64 over millions of rows)."""
    total = math.prod(sizes)
    key = parts[0].astype(np.int32 if total < 2**31 else np.int64)
    for part, size in zip(parts[1:], sizes[1:]):
        key *= size
        key += part
    return key


def distinct(key: np.ndarray, total: int) -> np.ndarray:
    """The distinct values of `key` (ints in [0, total)), sorted: a full grid of keys is
    marked in one array (no sort of every row), a sparse one sorted."""
    if total > 8 * len(key) + 1024:
        return np.unique(key)
    present = np.zeros(total, dtype=bool)
    present[key] = True
    return np.flatnonzero(present)


def take_rows(table: VerdictTable, rows: np.ndarray) -> VerdictTable:
    """The table of some rows (indices or a mask); the dictionaries stay as they are."""
    return dataclasses.replace(table, **{f: getattr(table, f)[rows] for f in ROW_FIELDS
                                         if getattr(table, f) is not None})


# ---------------------------------------------------------------- files merged into one table

FIXED = {"variant": VARIANTS, "tier": TIERS, "verdict": VERDICTS}  # codes are positions in these


def merge_codes(pairs: list[tuple[np.ndarray, list[str]]], fixed=None, dtype=np.int32) -> tuple[np.ndarray, list]:
    """(codes, dictionary) pairs as one: the codes of every row against one dictionary (sorted,
    or the fixed vocabulary), code -1 (no value) kept: it takes each lookup's appended -1.
    Pairs with the same dictionary (a store's files mostly have) share one lookup."""
    shared = {id(values): values for _, values in pairs}  # one list object per distinct dictionary, mostly
    dictionaries = {tuple(values) for values in shared.values()}
    dictionary = list(fixed) if fixed else sorted(set().union(*dictionaries))
    index = {v: i for i, v in enumerate(dictionary)}
    lookups = {values: np.array([index[v] for v in values] + [-1], dtype=dtype) for values in dictionaries}
    lookup_of = {key: lookups[tuple(values)] for key, values in shared.items()}
    out = np.empty(sum(len(codes) for codes, _ in pairs), dtype=dtype)
    start = 0
    for codes, values in pairs:
        lookup, part = lookup_of[id(values)], out[start:start + len(codes)]
        if len(values) == 1 and codes.min(initial=0) >= 0:  # one value (a store file's judge, model...)
            part.fill(lookup[0])
        else:
            np.take(lookup, codes, out=part)
        start += len(codes)
    return out, dictionary


def table_from_parts(parts: list[Columns], files: list[str], inputs: list[dict]) -> VerdictTable:
    """One table of the parts' rows, in the order of their files (`files[file[i]]`)."""
    one = len(parts) == 1  # its arrays are taken as they are: a copy of millions of rows costs page faults
    file = parts[0].file if one else np.concatenate([p.file for p in parts])
    order = slice(None) if one else np.argsort(file, kind="stable")
    rows = {}
    # question_id -> question and questions, settings_hash -> settings_hashes; a field some
    # part did not read (the store's answer_hash, unless asked for) stays None.
    for name in (n for n in CODED if all(n in p.codes for p in parts)):
        codes, dictionary = merge_codes([pair for p in parts for pair in p.codes[name]], FIXED.get(name),
                                        np.int8 if name in FIXED else np.int32)
        field = name.removesuffix("_id")
        rows[field] = codes[order]
        if name not in FIXED:
            rows[field + ("es" if field.endswith("hash") else "s")] = dictionary
    if all(p.probs is None for p in parts):  # a read-only NaN view that takes no memory (73 MB at paper scale)
        probs = np.broadcast_to(np.float64(np.nan), (len(file), len(JUDGE_LABELS)))
    else:
        probs = parts[0].probs if one else np.concatenate(
            [np.full((len(p.file), len(JUDGE_LABELS)), np.nan) if p.probs is None else p.probs for p in parts])[order]
    line = parts[0].line if one else np.concatenate([p.line for p in parts])[order]
    return VerdictTable(files=files, inputs=inputs, probs=probs, file=file[order], line=line, **rows)


def table_from_records(records: list[dict]) -> VerdictTable:
    """Verdict dicts (a caller's, not from a file) as a VerdictTable."""
    return table_from_parts([record_columns(records, np.zeros(len(records)), np.zeros(len(records)))],
                            ["<verdicts>"], [])


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
    table = table_from_parts([_strict_columns(paths, list(range(len(paths))))], [str(p) for p in paths],
                             [file_record(p) for p in paths])
    check_settings(table)
    return table


def _read_files(paths: list[Path], wanted: list[str]) -> tuple[list, tuple]:
    """(each store file's Arrow table, None for a JSONL file), and (the JSONL files' Columns,
    every file's input record): read side by side, as `verdict_store.read_consistently` asks."""
    jsonl = [k for k, p in enumerate(paths) if not verdict_store.is_store(p)]
    with ThreadPoolExecutor(min(4, os.cpu_count() or 1)) as pool:  # pyarrow and hashlib let go of the GIL
        tables = pool.map(lambda p: verdict_store.read_files([p], wanted) if verdict_store.is_store(p) else None, paths)
        inputs = pool.map(file_record, paths)
        parts = [_strict_columns([paths[k] for k in jsonl], jsonl)] if jsonl or not paths else []
        return list(tables), (parts, list(inputs))


def read_verdicts(paths: list[str | Path], *, probs: bool = True, answer_hashes: bool = True,
                  check_hashes: bool = True) -> VerdictTable:
    """Read verdict store units and JSONL files (and folders of them) into one VerdictTable
    (see the module docstring); `probs=False`: the store's probability columns are not read
    (NaN), for readers that never look at them; `answer_hashes=False`, `check_hashes=False`:
    nor its answer or check hashes (None), for readers given no answers or dataset to compare
    them with. Raises InputError with the strict reader's own FILE:LINE messages."""
    unread = {name for name, read in (("answer_hash", answer_hashes), ("check_hash", check_hashes)) if not read}
    wanted = [*(c for c in CODED if c not in unread), *(verdict_store.PROB_COLUMNS if probs else ())]
    files, tables, (parts, inputs) = verdict_store.read_consistently(
        lambda: store_files(paths), lambda files: _read_files(files, wanted), ", ".join(map(str, paths)))
    stored = [k for k, t in enumerate(tables) if t is not None]
    if stored:
        parts.append(store_columns([tables[k] for k in stored], stored))
    table = table_from_parts(parts, [str(p) for p in files], inputs)
    # A human's later verdict replaced the earlier one as the JSONL was read (`rundir.human`,
    # in `load_records`); the store holds no human verdicts. So any repeat here is an error.
    if has_repeats(table):
        read_verdicts_reference(paths)  # raises, naming each duplicate and its first line
    check_settings(table)
    return table
