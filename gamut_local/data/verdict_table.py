"""Verdicts as one columnar table: integer codes per verdict plus the dictionaries they index.

`read_verdicts` reads the verdict store's files (`rundir.verdict_store`: typed Parquet,
validated when written, checked column-wise when read) as Arrow tables, with no JSON parse
and no cache, and JSONL files (human verdicts, an old run's, a file named on the command line)
column-wise too (`jsonl_table`: pyarrow's JSON reader into the store's schema, then the store
reader's own checks), into tables of the store's schema. Only a file the columns cannot vouch
for (a problem, a form pyarrow reads otherwise than `json.loads`, a field outside the store's
schema, a person's verdicts, which may revise each other) is read record by record by the
strict reader (`data.records.load_records`, every problem as `FILE:LINE: field: message`), so
every message is the strict reader's. The tables become one VerdictTable in the order of the
files (`table_of`), and the checks that span files are made: no duplicate (question, model,
variant, judge, check) key (a human annotator's later verdict replaced the earlier as the
JSONL was read: `rundir.human`), each named with where it first was (`repeats`), one settings
hash per judge (`check_settings`).
"""

from __future__ import annotations

import dataclasses
import math
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from gamut_local.errors import InputError, Problem
from gamut_local.rundir import verdict_store
from gamut_local.rundir.human import is_human
from gamut_local.rundir.identity import VERDICT_IDENTITY, file_record
from gamut_local.vocab import JUDGE_LABELS, VARIANTS

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
    key, total = _verdict_keys(table)
    if key is None:  # too many combinations for one int64
        return len(np.unique(np.stack(_key_columns(table), axis=1), axis=0)) < len(table)
    return len(distinct(key, total)) < len(table)


def _key_columns(table: VerdictTable) -> list[np.ndarray]:
    return [table.question, table.model, table.variant, table.judge, table.check]


def _verdict_keys(table: VerdictTable) -> tuple[np.ndarray | None, int]:
    """One int per row for its (question, model, variant, judge, check) key, and how many keys
    there can be; None where they do not fit one int64."""
    sizes = [max(n, 1) for n in (len(table.questions), len(table.models), len(VARIANTS), len(table.judges),
                                 len(table.checks))]
    total = math.prod(sizes)
    return (row_key(_key_columns(table), sizes), total) if total < 2**62 else (None, total)


def repeats(table: VerdictTable) -> list[Problem]:
    """Each row whose key an earlier row of the table holds, named as the strict reader names
    it (`load_records`: the file order, then the line order), with where that key first was."""
    key, _ = _verdict_keys(table)
    if key is None:
        key = np.unique(np.stack(_key_columns(table), axis=1), axis=0, return_inverse=True)[1].ravel()
    order = np.argsort(key, kind="stable")  # each key's rows together, in table order
    again = np.flatnonzero(key[order][1:] == key[order][:-1]) + 1
    starts = np.flatnonzero(np.r_[True, key[order][1:] != key[order][:-1]])
    first = order[starts[np.searchsorted(starts, again, side="right") - 1]]
    problems = []
    for row, at in sorted(zip(order[again].tolist(), first.tolist())):
        k = (table.questions[table.question[row]], table.models[table.model[row]], VARIANTS[table.variant[row]],
             table.judges[table.judge[row]], table.checks[table.check[row]])
        problems.append(Problem(table.files[table.file[row]], int(table.line[row]), "",
                                f"duplicate record {k} (first at {table.files[table.file[at]]}:{table.line[at]})"))
    return problems


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


# ---------------------------------------------------------------- files' tables as one

def table_of(tables: list, files: list[str], inputs: list[dict], lines: list | None = None) -> VerdictTable:
    """One VerdictTable of Arrow tables of the store's schema (`tables[k]` read from
    `files[k]`), in that order; `lines[k]`: where each row of table k was read (None: its row
    numbers, a store file's; 0: not from a file). A column not read (`read_verdicts`'s
    flags) stays None; probabilities not read are NaN."""
    import pyarrow as pa

    from gamut_local import arrow

    both = pa.concat_tables(tables) if tables else verdict_store.schema().empty_table()
    rows = {}
    for name in (n for n in CODED if n in both.column_names):
        # One dictionary array (Arrow unifies the files' dictionaries), its dictionary sorted
        # (or the fixed vocabulary: tier and verdict codes are positions in it).
        codes, values = arrow.codes(arrow.whole(both.column(name)))
        fixed = verdict_store.FIXED.get(name)
        dictionary, dtype = list(fixed or sorted(values)), np.int8 if fixed else np.int32
        if dictionary != values:
            index = {v: i for i, v in enumerate(dictionary)}
            codes = np.array([index[v] for v in values] + [-1], dtype=dtype)[codes]  # -1 (no value) kept
        field = name.removesuffix("_id")  # question_id -> question, questions
        rows[field] = codes.astype(dtype, copy=False)
        if not fixed:
            rows[field + ("es" if field.endswith("hash") else "s")] = dictionary
    if verdict_store.PROB_COLUMNS[0] in both.column_names:
        probs = np.stack([np.concatenate([arrow.floats(c) for c in both.column(n).chunks] or [[]])
                          for n in verdict_store.PROB_COLUMNS], axis=1)
    else:  # a read-only NaN view that takes no memory (73 MB at paper scale)
        probs = np.broadcast_to(np.float64(np.nan), (both.num_rows, len(JUDGE_LABELS)))
    sizes = [t.num_rows for t in tables]
    line = [np.arange(1, n + 1) if at is None else at for n, at in zip(sizes, lines or [None] * len(tables))]
    return VerdictTable(files=files, inputs=inputs, probs=probs, **rows,
                        file=np.repeat(np.arange(len(tables), dtype=np.int32), sizes),
                        line=np.concatenate(line or [[]]).astype(np.int32))


def table_from_records(records: list[dict]) -> VerdictTable:
    """Verdict dicts (a caller's, not from a file) as a VerdictTable; each is checked as the
    store's writer checks it."""
    return table_of([verdict_store.to_table(records, loose=True)], ["<verdicts>"], [], [np.zeros(len(records))])


def strict_tables(paths: list[Path], columns: list[str]) -> tuple[list, list]:
    """Files through the strict record-by-record reader, together (every problem of every
    file at once): (each file's verdicts as a table of the store's `columns`, their lines)."""
    from gamut_local.data.records import Verdict, load_records, verdict_key  # its models: 12 ms a store-only read spares

    where: list[tuple[int, int]] = []
    records = load_records(paths, Verdict, verdict_key, where=where)
    file, line = np.array(where, dtype=np.int32).reshape(-1, 2).T
    rows = [np.flatnonzero(file == k) for k in range(len(paths))]
    if "extra" in columns:  # every field, as the store's writer takes records from elsewhere (`loose`)
        tables = [verdict_store.to_table([records[r] for r in at], str(paths[k]), loose=True).select(columns)
                  for k, at in enumerate(rows)]
    else:
        tables = [verdict_store.from_records([records[r] for r in at], columns) for at in rows]
    return tables, [line[at] for at in rows]


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


# ---------------------------------------------------------------- JSON Lines as columns

# A bigger JSONL file is read in pieces of about this size, each cut after a newline and read
# as a file of its own: memory stays bounded whatever the file (an export of a whole run is
# one file of a gigabyte). The judge stage's files are ~13 MB at paper scale: one piece.
PIECE_BYTES = 16 << 20


def jsonl_schema():
    """What pyarrow's JSON reader reads a verdict line into: every field of the store's schema
    as the store types it (strings undictionaried: the reader makes no dictionaries), `probs`
    an object of the four labels. A line with any other field is an error there, so a file
    whose columns pass holds nothing for the store's `extra`."""
    import pyarrow as pa

    store = verdict_store.schema()
    probs = pa.struct([pa.field(label, pa.float64()) for label in JUDGE_LABELS])
    fields = [pa.field(f.name, pa.string()) if pa.types.is_dictionary(f.type) else f
              for f in store if f.name not in (*verdict_store.PROB_COLUMNS, "extra")]
    return pa.schema([*fields, pa.field("probs", probs)])


def jsonl_table(path: Path, columns: list[str] | None = None):
    """A JSONL verdict file's table of the store's schema (or of its `columns`), read
    column-wise and checked as the store's reader checks a file (`verdict_store.check_columns`);
    None where the columns cannot vouch for it: the strict reader then reads it, and names
    what is wrong (or reads right what pyarrow reads otherwise). Its rows are its lines."""
    import pyarrow as pa

    names = verdict_store.schema().names if columns is None else columns
    try:
        # A file of one piece is parsed in this thread (the caller reads files side by side);
        # a bigger one, its blocks side by side.
        threads = path.stat().st_size > PIECE_BYTES
        tables = [_piece_table(piece, path, names, threads) for piece in _pieces(path)]
    except (OSError, ValueError, pa.ArrowException):  # not there, not JSON, a type it refuses: the strict reader says
        return None
    if not tables or any(t is None for t in tables):
        return None
    return pa.concat_tables(tables) if len(tables) > 1 else tables[0]


def _pieces(path: Path):
    """The file's bytes in pieces of about PIECE_BYTES, each but the last ending with a newline
    (a line longer than a piece makes a longer piece)."""
    with open(path, "rb") as f:
        held: list[bytes] = []
        while chunk := f.read(PIECE_BYTES):
            cut = chunk.rfind(b"\n") + 1
            if not cut:
                held.append(chunk)
                continue
            yield b"".join([*held, chunk[:cut]]) if held else chunk[:cut]
            held = [chunk[cut:]]
        if any(held):
            yield b"".join(held)


def _piece_table(data: bytes, path: Path, names: list[str], threads: bool):
    """One piece's table of the store's columns `names`, or None (see `jsonl_table`)."""
    import pyarrow as pa

    from gamut_local import arrow

    read = arrow.jsonl_table(data, jsonl_schema(), threads=threads)
    if read is None:
        return None
    probs = arrow.whole(read.column("probs"))
    labels = probs.flatten()  # each label null where probs is null
    # A label absent and a label null look alike in a column; the strict reader refuses the second.
    if any(label.null_count != probs.null_count for label in labels):
        return None
    arrays = {name: labels[JUDGE_LABELS.index(name[2:])] for name in verdict_store.PROB_COLUMNS}
    arrays["extra"] = pa.nulls(read.num_rows, pa.string())
    checked = [*verdict_store.REQUIRED, *verdict_store.PROB_COLUMNS]
    schema = verdict_store.schema()
    for name in dict.fromkeys([*checked, *names]):
        if name not in arrays:  # only the columns asked for: making a dictionary costs
            column = arrow.whole(read.column(name))
            coded = pa.types.is_dictionary(schema.field(name).type)
            arrays[name] = column.dictionary_encode() if coded else column
    if any(arrays[name].null_count for name in verdict_store.REQUIRED):  # absent or null: the strict reader tells
        return None

    def table(columns: list[str]):
        return pa.Table.from_arrays([arrays[n] for n in columns], schema=pa.schema([schema.field(n) for n in columns]))

    try:
        verdict_store.check_columns(table(checked), path, checked)
    except InputError:
        return None
    # A person's verdicts may revise each other (`rundir.human`): the strict reader keeps the latest.
    if any(is_human(judge) for judge in arrays["judge"].dictionary.to_pylist()):
        return None
    return table(names)


def _read_files(paths: list[Path], wanted: list[str], identify: bool = True) -> tuple[list, tuple]:
    """Each file's table (a store file's as read, a JSONL file's column-wise where its columns
    vouch for it, else through the strict reader, all such files together), and (where each
    table's rows were read: `table_of`'s lines; every file's input record, with its content
    hash where `identify`): read side by side, as `verdict_store.read_consistently` asks."""
    def read(path: Path):
        if verdict_store.is_store(path):
            return verdict_store.read_file(path, wanted)
        # A person's file (`verdicts/human-<annotator>/`, small) goes to the strict reader as it is.
        return None if is_human(path.parent.name) else jsonl_table(path, wanted)

    # pyarrow and hashlib let go of the GIL; with JSONL files, one thread more than the cores,
    # so that one's Python between its parses (the line checks, the column checks) idles no core.
    workers = min(4, (os.cpu_count() or 1) + any(not verdict_store.is_store(p) for p in paths))
    with ThreadPoolExecutor(workers) as pool:
        inputs = pool.map(file_record, paths) if identify else ({"path": str(p)} for p in paths)
        tables = list(pool.map(read, paths))
        strict = [k for k, p in enumerate(paths) if tables[k] is None]
        got, at = strict_tables([paths[k] for k in strict], wanted) if strict else ([], [])
        inputs, lines = list(inputs), [None] * len(paths)
    for k, table, line in zip(strict, got, at):
        tables[k], lines[k] = table, line
    return tables, (lines, inputs)


def read_verdicts(paths: list[str | Path], *, probs: bool = True, answer_hashes: bool = True,
                  check_hashes: bool = True) -> VerdictTable:
    """Read verdict store units and JSONL files (and folders of them) into one VerdictTable
    (see the module docstring); `probs=False`: the probability columns are not read (NaN), for
    readers that never look at them; `answer_hashes=False`, `check_hashes=False`: nor the
    answer or check hashes (None), for readers given no answers or dataset to compare them
    with. Raises InputError with the strict reader's own FILE:LINE messages."""
    unread = {name for name, read in (("answer_hash", answer_hashes), ("check_hash", check_hashes)) if not read}
    wanted = [*(c for c in CODED if c not in unread), *(verdict_store.PROB_COLUMNS if probs else ())]
    return _read_checked(paths, wanted)[0]


def read_whole(paths: list[str | Path], *, settings: bool = True) -> tuple[VerdictTable, list]:
    """`read_verdicts` of every column of the store's schema, with each file's Arrow table (in
    the VerdictTable's file order, rows in its line order): what `verdicts import` writes
    into the store as it was read, with no second reading. `settings=False`: a judge's
    settings hashes are not checked (the judge stage adopting an old run's file supersedes
    what is stale). The files are not hashed (`inputs` hold their paths): what is written
    names no input, and hashing a gigabyte of JSONL costs a tenth of reading it."""
    return _read_checked(paths, list(verdict_store.schema().names), settings, identify=False)


def _read_checked(paths, wanted: list[str], settings: bool = True, identify: bool = True) -> tuple[VerdictTable, list]:
    files, tables, (lines, inputs) = verdict_store.read_consistently(
        lambda: store_files(paths), lambda files: _read_files(files, wanted, identify), ", ".join(map(str, paths)))
    table = table_of(tables, [str(p) for p in files], inputs, lines)
    # A human's later verdict replaced the earlier one as the JSONL was read (`rundir.human`,
    # in `load_records`); the store holds no human verdicts. So any repeat here is an error.
    if has_repeats(table):
        raise InputError(repeats(table))
    if settings:
        check_settings(table)
    return table, tables
