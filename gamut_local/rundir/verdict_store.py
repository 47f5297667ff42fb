"""The verdict store: a run's verdicts as typed Parquet, written once and read as columns.

One store *unit* holds the verdicts of one (judge, model, variant, shard) task:
`verdicts/<judge>/<model>.<variant>[.shard-i-of-n].parquet`, the compacted file, and, while
the task runs, `<same name>.parts/part-NNNNNN.parquet`, one immutable part per chunk. A task
never shares its unit with another (array tasks differ by their shard suffix).

- `write_part` writes a chunk to a temporary file, fsyncs it and renames it into place: a
  killed job loses at most the chunk in flight and leaves no torn file (a leftover `.tmp`
  is never read and is removed by the next write).
- `compact` folds the parts into the compacted file (temporary file, fsync, rename), which
  names in its metadata the last part it holds (`through_part`); only then are the parts
  deleted. A kill before the rename leaves the old file and the parts; after it, the parts
  it holds are ignored by every reader and deleted by the next compaction. Nothing is lost
  and nothing is counted twice.
- A unit has one writer at a time, holding its task lock (`rundir.task_lock`: the file
  `.<unit name>.lock` beside it, naming the holder). The judge stage holds its units from
  start to end (`writing`), so a second judge of the task is refused; `verdicts import` holds
  every unit of the verdicts it adds to; one write outside a task (`jury`'s replacement)
  takes the lock for that write (`_one_writer`), waiting for another's turn.
- Every file carries `SCHEMA_VERSION` in its Parquet metadata; a reader refuses another.

The writer validates every record (`validate`): our own stages write the store, so a bad
record is a bug stopped at its source. A file of this version may still be rewritten later by
another tool (pyarrow keeps the metadata), so `read_file` checks the same rules on what it
reads (`check_columns`: column-wise, from types, null counts and dictionaries).

Strings are dictionary encoded; the four label probabilities are the fixed columns
`p_<label>` (null: no probabilities); fields outside the schema (a verdict imported from
elsewhere may have them) go into `extra`, a JSON object, so an export gives them back.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

from gamut_local.errors import InputError, Problem
from gamut_local.rundir import task_lock
from gamut_local.rundir.human import is_human
from gamut_local.rundir.store import JOURNAL, fsync_path
from gamut_local.vocab import DEFAULT_VARIANT, JUDGE_LABELS, NAME_PATTERN, TIERS, VARIANTS, VERDICTS

SCHEMA_VERSION = 1
# LZ4, not zstd: at paper scale the columns `score` reads decode in 0.089 s instead of 0.133 s
# (one thread, 84 files) for a store 9% larger (104 MB against 95; the JSONL is 1,048 MB).
# A reader takes either: the codec is in each file's own metadata.
COMPRESSION = "lz4"
META_KEY = b"gamut_local.verdicts"
SUFFIX = ".parquet"
PARTS = ".parts"
PROB_COLUMNS = tuple(f"p_{label}" for label in JUDGE_LABELS)
# Fields every verdict has (strings), then the optional ones; the order of the columns.
REQUIRED = ("question_id", "model", "variant", "judge", "check_id", "tier", "verdict")
CODED_OPTIONAL = ("method", "settings_hash", "check_hash", "answer_hash")
INTEGERS = ("prompt_tokens", "num_cached_tokens", "attempts")
KNOWN = (*REQUIRED, "raw", "probs", *CODED_OPTIONAL, *INTEGERS)
FIXED = {"variant": VARIANTS, "tier": TIERS, "verdict": VERDICTS}  # the values these columns may hold
_SAFE = re.compile(NAME_PATTERN)
_NAMES = ("model", "judge")  # they name files and folders
_PART = re.compile(r"part-(\d{6,})\.parquet")  # six digits, more past 999,999


def schema(meta: dict | None = None):
    """The store's Arrow schema; `meta` goes into the file's metadata beside the version."""
    import pyarrow as pa

    coded = pa.dictionary(pa.int32(), pa.string())
    fields = [pa.field(name, coded, nullable=False) for name in REQUIRED]
    fields += [pa.field("raw", pa.string())]
    fields += [pa.field(name, pa.float64()) for name in PROB_COLUMNS]
    fields += [pa.field(name, coded) for name in CODED_OPTIONAL]
    fields += [pa.field(name, pa.int64()) for name in INTEGERS]
    fields += [pa.field("extra", pa.string())]
    return pa.schema(fields, metadata={META_KEY: json.dumps({"schema_version": SCHEMA_VERSION, **(meta or {})})})


# ---------------------------------------------------------------- records in

def validate(rec: dict, where: str, no: int) -> list[Problem]:
    """What is wrong with one verdict record for the store ([] if nothing)."""
    out = [Problem(where, no, name, why) for name in REQUIRED
           if (why := _required_problem(name, rec.get(name, DEFAULT_VARIANT if name == "variant" else None)))]
    for name in ("raw", *CODED_OPTIONAL):
        if rec.get(name) is not None and not isinstance(rec[name], str):
            out.append(Problem(where, no, name, "must be a string or null"))
    for name in INTEGERS:
        if not _typed(name, rec.get(name)):
            out.append(Problem(where, no, name, "must be a whole number (64-bit) or null"))
    probs = rec.get("probs")
    if probs is not None:
        if not isinstance(probs, dict) or set(probs) - set(JUDGE_LABELS):
            out.append(Problem(where, no, "probs", f"must be an object with keys from {', '.join(JUDGE_LABELS)}"))
        elif not all(isinstance(p, (int, float)) and not isinstance(p, bool) and 0 <= p <= 1
                     for p in probs.values()):  # NaN is not between them either
            out.append(Problem(where, no, "probs", "must hold finite numbers from 0 to 1"))
    return out


def _required_problem(name: str, value) -> str | None:
    """What is wrong with the value of a required field (None if nothing): the one rule for
    records written (`validate`) and for files read (`check_columns`)."""
    if not isinstance(value, str) or not value:
        return "must be a non-empty string"
    if name in FIXED and value not in FIXED[name]:
        return f"{value!r} is not one of {', '.join(FIXED[name])}"
    if name in _NAMES and not _SAFE.fullmatch(value):
        return f"{value!r} cannot be used in a file name"
    return None


def _whole(value) -> bool:
    """A whole number an int64 column holds."""
    return isinstance(value, int) and not isinstance(value, bool) and -2**63 <= value < 2**63


def _typed(name: str, value) -> bool:
    if value is None:
        return True
    return _whole(value) if name in INTEGERS else isinstance(value, str)


def to_table(records: list[dict], where: str = "<verdicts>", meta: dict | None = None, *, loose: bool = False):
    """Validated verdict records as one Arrow table of the store's schema. `loose` (import:
    records from elsewhere, already read by the strict reader, which lets these optional
    fields be any JSON): an optional field of another type is kept in `extra`."""
    if loose:
        records = [_loosened(rec) for rec in records]
    problems = [p for no, rec in enumerate(records, 1) for p in validate(rec, where, no)]
    if problems:
        raise InputError(problems[:20])
    return from_records(records, meta=meta)


def checked_table(table, where: Path):
    """An Arrow table of the store's columns (a JSONL file read column-wise, `verdicts import`)
    checked as records are (`check_columns`: the same rules, column-wise) and given the
    schema's metadata: what the writer writes."""
    names = schema().names
    check_columns(table, where, names)
    return table.select(names).replace_schema_metadata(schema().metadata)


def from_records(records: list[dict], columns: list[str] | None = None, meta: dict | None = None):
    """Verdict records as an Arrow table of the store's schema, or of some of its `columns`;
    each record valid for them (`validate`; for a VerdictTable's columns, the strict reader's
    `data.records.Verdict` is as strict)."""
    import pyarrow as pa

    target = schema(meta)
    if columns is not None:
        target = pa.schema([target.field(name) for name in columns], metadata=target.metadata)
    return pa.Table.from_arrays([_column(_values(records, f.name), f.type) for f in target],
                                schema=target)


def _values(records: list[dict], name: str) -> list:
    """The records' values in the column `name` (None: null)."""
    if name == "variant":
        return [rec.get(name, DEFAULT_VARIANT) for rec in records]
    if name in PROB_COLUMNS:
        label = name.removeprefix("p_")
        return [(rec.get("probs") or {}).get(label) for rec in records]
    if name == "extra":
        return [_extra(rec) for rec in records]
    return [rec.get(name) for rec in records]


def _extra(rec: dict) -> str | None:
    extra = {k: v for k, v in rec.items() if k not in KNOWN}
    extra.update(rec.get(_MOVED) or {})
    extra.pop(_MOVED, None)
    return json.dumps(extra, ensure_ascii=False) if extra else None


def _column(values: list, kind):
    """One column of the store's schema, built through numpy (`gamut_local.arrow`):
    pyarrow's `pa.array` over Python objects imports pandas, 0.3 s of every process that
    reads a JSONL verdict file or writes the store."""
    import numpy as np
    import pyarrow as pa

    from gamut_local import arrow  # numpy: not for the listings a current report makes

    present = np.array([v is not None for v in values], dtype=bool)
    if pa.types.is_floating(kind) or pa.types.is_integer(kind):
        data = [0 if v is None else v for v in values]
        return arrow.from_numpy(np.array(data, dtype=np.float64 if pa.types.is_floating(kind) else np.int64), present)
    items = sorted({v for v in values if v is not None})
    index = {v: i for i, v in enumerate(items)}
    codes = np.array([index.get(v, -1) for v in values], dtype=np.int32)
    if pa.types.is_dictionary(kind):
        return pa.DictionaryArray.from_arrays(arrow.from_numpy(codes, present), arrow.strings(np.arange(len(items)), items))
    return arrow.strings(codes, items)


_MOVED = "\0moved"  # fields `loose` moved out of their typed column (no JSON field has this name)


def _loosened(rec: dict) -> dict:
    moved = {k: rec[k] for k in ("method", *INTEGERS) if not _typed(k, rec.get(k))}
    if not moved:
        return rec
    return {**{k: v for k, v in rec.items() if k not in moved}, _MOVED: moved}


# ---------------------------------------------------------------- records out

def to_records(table) -> list[dict]:
    """The store's rows as verdict records (the JSONL form: `probs` an object, extras merged)."""
    cols = {name: table.column(name).to_pylist() for name in table.column_names}
    out = []
    for i in range(table.num_rows):
        rec = {name: cols[name][i] for name in (*REQUIRED, "raw")}
        present = {label: cols[name][i] for label, name in zip(JUDGE_LABELS, PROB_COLUMNS) if cols[name][i] is not None}
        rec["probs"] = present or None
        for name in (*CODED_OPTIONAL, *INTEGERS):
            rec[name] = cols[name][i]
        if cols["extra"][i]:
            rec.update(json.loads(cols["extra"][i]))
        out.append(rec)
    return out


# ---------------------------------------------------------------- files

def parts_dir(unit: Path) -> Path:
    return unit.with_name(unit.name[: -len(SUFFIX)] + PARTS)


def _write_atomic(table, path: Path) -> None:
    """Temporary file in the same folder, fsync, rename, fsync the folder."""
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            pq.write_table(table, f, compression=COMPRESSION)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_path(path.parent)


def _meta_problem(raw: bytes | None) -> tuple[str, str] | None:
    """(field, why) if a file's metadata entry is not this version's (it names the last part a
    compacted file holds, which readers trust to count nothing twice)."""
    try:
        meta = json.loads(raw) if raw else {}
    except ValueError:  # UnicodeDecodeError is one
        meta = None
    if not isinstance(meta, dict):
        return "schema_version", f"its metadata {META_KEY.decode()!r} is not a JSON object"
    version = meta.get("schema_version")
    if version != SCHEMA_VERSION or isinstance(version, bool):
        return "schema_version", ("has no verdict-store schema version" if version is None else
                                  f"has verdict-store schema version {version!r}; this gamut-local reads "
                                  f"version {SCHEMA_VERSION}")
    through = meta.get("through_part", 0)
    if not isinstance(through, int) or isinstance(through, bool) or through < 0:
        return "through_part", f"{through!r} is not a part number (a whole number, 0 or more)"
    return None


def _part_numbers(unit: Path) -> dict[int, Path]:
    folder = parts_dir(unit)
    if not folder.is_dir():
        return {}
    return {int(m.group(1)): p for p in folder.iterdir() if (m := _PART.fullmatch(p.name))}


def _through(unit: Path) -> int:
    """The last part number the compacted file holds (0: none, or no compacted file)."""
    return _held(read_file(unit, [])) if unit.exists() else 0


def _held(table) -> int:
    """The last part number a compacted file's table holds, as its metadata (checked when
    read: `_meta_problem`) names it."""
    return json.loads(table.schema.metadata[META_KEY]).get("through_part", 0)


def unit_files(unit: Path) -> list[Path]:
    """The files that hold the unit's verdicts now: the compacted file and the parts it does
    not hold yet, in order."""
    numbers = _part_numbers(unit)
    through = _through(unit) if numbers else 0  # a compacted unit: its file, not opened twice
    parts = [p for n, p in sorted(numbers.items()) if n > through]
    return ([unit] if unit.exists() else []) + parts


def write_part(unit: Path, records, *, loose: bool = False) -> Path | None:
    """Write one chunk of verdicts as the unit's next part (atomic); returns its path.
    `records`: verdict records, or an Arrow table of the store's columns (`checked_table`).
    `loose`: as `to_table`'s (import only)."""
    if not len(records):
        return None
    table = to_table(records, str(unit), loose=loose) if isinstance(records, list) else checked_table(records, unit)
    folder = parts_dir(unit)
    with _one_writer(unit):
        folder.mkdir(parents=True, exist_ok=True)
        for stray in folder.glob(".*.tmp"):  # a chunk whose writer was killed: never renamed, never read
            stray.unlink(missing_ok=True)
        number = max([_through(unit), *_part_numbers(unit)], default=0) + 1
        path = folder / f"part-{number:06d}.parquet"
        _write_atomic(table, path)
    JOURNAL.appended[str(unit)] = JOURNAL.appended.get(str(unit), 0) + table.num_rows
    return path


@contextmanager
def _one_writer(unit: Path):
    """One write of a unit (a part, a compaction, a replacement) holds the unit's task lock
    (`rundir.task_lock`): found held already inside its task (the judge stage holds its units
    from start to end), or taken for the write, waiting up to `task_lock.WAIT` seconds for
    another short writer's turn, and refused if the unit's task holds it longer. Two writers
    at once could take one part number, clear each other's temporary file, or fold an older
    set of parts over a newer one."""
    with task_lock.hold([unit], wait=task_lock.WAIT):
        yield


_UNIT_NAME = re.compile(r"(?P<stem>.+?)(?:\.shard-\d+-of-(?P<count>\d+))?" + re.escape(SUFFIX))


def _layout(unit: Path) -> tuple[str, int]:
    """(`<model>.<variant>`, shard count) of a unit's name (count 1: unsharded)."""
    m = _UNIT_NAME.fullmatch(unit.name)
    return (m.group("stem"), int(m.group("count") or 1)) if m else (unit.name, 1)


def _layouts_beside(unit: Path, any_count: bool) -> list[Path]:
    """The units of the same (judge, model, variant) whose task holds a lock now, of another
    shard count (or, `any_count`, of any): tasks of another layout judge the same keys."""
    stem, count = _layout(unit)
    locks = [*unit.parent.glob(f".{stem}{SUFFIX}.lock"), *unit.parent.glob(f".{stem}.shard-*-of-*{SUFFIX}.lock")]
    units = [lock.with_name(lock.name[1:-len(".lock")]) for lock in locks]
    return [u for u in units if _layout(u)[0] == stem and (any_count or _layout(u)[1] != count)]


def writing(units, *, wait: float = 0.0, any_layout: bool = False, heartbeat: bool = False):
    """Hold the task locks of these units for a whole task (a context manager): the judge
    stage from reading what is done to the last compaction (`wait` 0: a second judge of the
    task is refused at once, naming the first), `verdicts import` while it reads what the run
    holds and adds the rest. A task of another shard layout of the same verdicts holding its
    lock refuses it too (`any_layout`: of any layout, the same count included). `heartbeat`: a
    whole task's hold, its locks kept alive (`task_lock.hold`)."""
    return task_lock.hold(units, wait=wait, beside=lambda u: _layouts_beside(u, any_layout), heartbeat=heartbeat)


def replace_unit(unit: Path, records, *, loose: bool = False) -> None:
    """Make the unit hold exactly these records (a stage that rewrites its output whole, as
    `jury` does; records or a table, as `write_part` takes them): one compacted file,
    written atomically, that holds every part there was. It takes its turn with the unit's
    other writers: a compaction in flight would otherwise put its older file over this one."""
    table = to_table(records, str(unit), loose=loose) if isinstance(records, list) else checked_table(records, unit)
    with _one_writer(unit):
        numbers = _part_numbers(unit)
        last = max([_through(unit), *numbers], default=0)
        _write_atomic(table.replace_schema_metadata(schema({"through_part": last}).metadata), unit)
        _remove_parts(unit, numbers)
    JOURNAL.replaced.append(str(unit))


def write_table_file(path: Path, records: list[dict]) -> None:
    """Verdicts as one file of the store's schema outside any run's store (`verdicts export`
    FILE.parquet): validated as the store's writer does, written atomically; not a unit."""
    _write_atomic(to_table(records, str(path), loose=True), path)
    JOURNAL.replaced.append(str(path))


def read_file(path: Path, columns: list[str] | None = None):
    """A store file's Arrow table (`columns=[]`: its metadata and length alone), checked for
    the schema version (`_meta_problem`) and the writer's rules (`check_columns`). Not
    `pq.read_table`: it goes through pyarrow.dataset, which imports pandas, 0.3-0.7 s of every
    command that reads the store."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        with pq.ParquetFile(path) as f:
            problem = _meta_problem((f.schema_arrow.metadata or {}).get(META_KEY))
            if problem:
                raise InputError([Problem(str(path), None, *problem)])
            table = f.read(columns=columns, use_threads=False)  # one thread per file: callers read side by side
    except FileNotFoundError:  # a part compacted away: the reader lists again (`read_consistently`)
        raise
    except (OSError, pa.ArrowException) as e:  # not Parquet, or a damaged page
        raise InputError([Problem(str(path), None, "", f"not a readable Parquet file: {e}")]) from None
    check_columns(table, path, schema().names if columns is None else columns)
    return table


def _concat(tables: list, columns: list[str] | None):
    import pyarrow as pa

    if not tables:
        return schema().empty_table() if columns is None else schema().empty_table().select(columns)
    return pa.concat_tables(tables, promote_options="permissive") if len(tables) > 1 else tables[0]


def check_columns(table, path: Path, names) -> None:
    """The writer's rules checked again on what a file holds: a file of this schema version
    may have been rewritten since by another tool (pyarrow keeps the metadata), and readers
    trust every value of a file they accept. Column-wise: the types, and each required column
    (`_required_problem`) through its null count and its dictionary (ids by their lengths
    alone); the rows are looked at only to name the first that holds a bad value."""
    from gamut_local import arrow

    expected, problems = schema(), []
    hint = "; verdicts from elsewhere come in by `gamut-local verdicts import`"
    for name in names:
        want = expected.field(name).type
        if name not in table.column_names:
            problems.append(Problem(str(path), None, name, f"no such column, which the store's schema has{hint}"))
        elif (got := table.schema.field(name).type) != want:
            problems.append(Problem(str(path), None, name, f"a column of type {got}, not the store's {want}{hint}"))
        elif name in REQUIRED or name in PROB_COLUMNS:
            array = arrow.whole(table.column(name))
            rows = _bad_rows(array, name) if name in REQUIRED else _not_finite(array)
            problems += [Problem(str(path), row, name, why) for row, why in rows]
    if problems:
        raise InputError(problems[:20])


def _bad_rows(array, name: str) -> list[tuple[int, str]]:
    """(row from 1, why) of the first row of each bad value of a dictionary array (a null first)."""
    import numpy as np

    values = array.dictionary
    if name in FIXED or name in _NAMES:
        bad = {k: why for k, v in enumerate(values.to_pylist()) if (why := _required_problem(name, v))}
    else:  # an id breaks the rule only by being empty: seen in the offsets, not value by value
        offsets = np.frombuffer(values.buffers()[1], dtype=np.int32)[values.offset:values.offset + len(values) + 1]
        bad = {int(k): _required_problem(name, "") for k in np.flatnonzero(offsets[1:] == offsets[:-1])}
    if not bad and not array.null_count:
        return []
    codes = array.indices.to_pylist()  # only for a bad file: the rows that hold what is wrong
    firsts = {k: codes.index(k) for k in [None, *bad] if k in codes}
    return [(row + 1, bad.get(k) or _required_problem(name, None))
            for k, row in sorted(firsts.items(), key=lambda kv: kv[1])]


def _not_finite(array) -> list[tuple[int, str]]:
    """(row from 1, why) of the first probability that is not a number from 0 to 1 (nulls aside)."""
    import numpy as np

    from gamut_local import arrow

    values = arrow.floats(array)
    with np.errstate(invalid="ignore"):
        bad = ~((values >= 0) & (values <= 1)) & arrow.valid(array)  # NaN is neither
    return [(int(np.argmax(bad)) + 1, "must be a finite number from 0 to 1, or null")] if bad.any() else []


def went_stale(files: list[Path], tables: list) -> bool:
    """Did a compaction run while these files, as `unit_files` listed them (a unit's compacted
    file before its parts), were read into `tables` (beside JSONL files' tables, which are
    passed over)? Then a compacted file read holds a part read beside it, whose verdicts would
    count twice. (A part deleted before it was read is a FileNotFoundError.) Either way the
    listing is stale: the reader lists the units again (`read_consistently`)."""
    held: dict[Path, int] = {}
    for path, table in zip(files, tables):
        if path.parent.name.endswith(PARTS):
            if int(_PART.fullmatch(path.name).group(1)) <= held.get(path.parent, 0):
                return True
        elif is_store(path):
            held[parts_dir(path)] = _held(table)
    return False


READ_TRIES = 5  # listings a reader tries while tasks compact what it reads


def read_consistently(listing: Callable[[], list[Path]], read: Callable[[list[Path]], tuple],
                      name: str) -> tuple[list[Path], list, object]:
    """(files, tables, extra): `read(files) -> (tables, extra)` of the files `listing()` gives
    now, as one state of each unit. Another task may compact a unit while it is read (resume
    and `status` read every shard's unit; `score` reads a running judge's): a stale listing
    (`went_stale`, or a part gone) is listed and read again. The one rule for every reader."""
    for _ in range(READ_TRIES):
        files = listing()
        try:
            tables, extra = read(files)
        except FileNotFoundError:
            continue
        if not went_stale(files, tables):
            return files, tables, extra
    raise InputError([Problem(name, None, "", f"kept being compacted while it was read ({READ_TRIES} tries): "
                                               "read it again")])


def read_unit(unit: Path, columns: list[str] | None = None):
    """The unit's verdicts now, as one state of it (`read_consistently`)."""
    _, tables, _ = read_consistently(lambda: unit_files(unit),
                                     lambda files: ([read_file(p, columns) for p in files], None), str(unit))
    return _concat(tables, columns)


def compact(unit: Path, keep=None) -> int:
    """Fold the unit's parts into its compacted file, atomically; returns the rows it holds.

    `keep(table) -> boolean mask` drops rows (resume moves stale verdicts out this way, after
    writing them elsewhere). Crash-safe: see the module docstring."""
    with _one_writer(unit):
        return _compact(unit, keep)


def _compact(unit: Path, keep) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    numbers = _part_numbers(unit)
    through = _through(unit)
    pending = {n: p for n, p in numbers.items() if n > through}
    if not pending and keep is None:
        _remove_parts(unit, numbers)
        return pq.ParquetFile(unit).metadata.num_rows if unit.exists() else 0
    table = _concat([read_file(p) for p in ([unit] if unit.exists() else []) + [pending[n] for n in sorted(pending)]],
                    None)
    if keep is not None:
        table = table.filter(pa.array(keep(table), type=pa.bool_()))
    last = max([through, *numbers], default=0)
    # One dictionary per column for the whole file (parts each have their own).
    table = table.unify_dictionaries().combine_chunks().replace_schema_metadata(
        schema({"through_part": last}).metadata)
    _write_atomic(table, unit)
    _remove_parts(unit, numbers)
    return table.num_rows


def _remove_parts(unit: Path, numbers: dict[int, Path]) -> None:
    """Delete the parts the compacted file holds (and the folder, once empty)."""
    through = _through(unit)
    for n, p in numbers.items():
        if n <= through:
            p.unlink(missing_ok=True)
    folder = parts_dir(unit)
    if folder.is_dir():
        for stray in folder.glob(".*.tmp"):
            stray.unlink(missing_ok=True)
        try:
            folder.rmdir()
        except OSError:
            pass  # parts not yet compacted remain


def units_in(folder: Path) -> list[Path]:
    """Every store unit under a folder (a run's `verdicts/`, one judge's folder, or a run)."""
    folder = Path(folder)
    if (folder / "verdicts").is_dir():  # a run directory: its verdicts, not its scores
        folder = folder / "verdicts"
    found = {p for p in folder.rglob(f"*{SUFFIX}") if not p.name.startswith(".") and p.parent.suffix != PARTS}
    found |= {p.with_name(p.name[: -len(PARTS)] + SUFFIX) for p in folder.rglob(f"*{PARTS}") if p.is_dir()}
    return sorted(found)


def is_store(path: Path) -> bool:
    """A store unit (by name: it may not exist yet), not a JSONL file."""
    return Path(path).suffix == SUFFIX


def records(unit: Path):
    """(row number, record) of a unit's verdicts, for record-by-record readers (resume, jury)."""
    return enumerate(to_records(read_unit(Path(unit))), 1)


def note_old_jsonl(files: list[Path], verdicts_dir: Path) -> None:
    """Say, once, that a model judge's JSONL in a run's verdicts folder is an old run's (the
    judge stage writes the store now): parsed again on every read, and how to convert it."""
    old = [p for p in files if p.suffix == ".jsonl" and not is_human(p.parent.name)]
    note = (f"{verdicts_dir}: {len(old)} verdict file(s) of an old run, JSON Lines parsed again on every read; convert "
            f"them once: gamut-local verdicts import {verdicts_dir}/*/*.jsonl --into {verdicts_dir.parent}")
    if old and note not in JOURNAL.notices:
        JOURNAL.notices.append(note)


def inputs(paths) -> list[Path]:
    """Verdict inputs named on a command line as store units and JSONL files: a folder (a run,
    its `verdicts/`, one judge's) gives every unit and JSONL file in it; a `.parts` folder or a
    part file, its unit."""
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir() and p.suffix != PARTS:
            root = p / "verdicts" if (p / "verdicts").is_dir() else p
            found = sorted(set(units_in(root)) | set(root.rglob("*.jsonl")))
            if root.name == "verdicts":
                note_old_jsonl(found, root)
            out += found
        elif p.suffix == PARTS or p.parent.suffix == PARTS:
            folder = p if p.suffix == PARTS else p.parent
            out.append(folder.with_name(folder.name[: -len(PARTS)] + SUFFIX))
        else:
            out.append(p)
    return out  # a path given twice stays twice: its verdicts are then duplicates, an error
