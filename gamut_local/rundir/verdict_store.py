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

What a verdict is (its fields, the Arrow schema, the checks of a record written and of a
file's columns read) is `rundir.verdict_schema`'s; this module holds the files. The writer
validates every record (`validate`): our own stages write the store, so a bad record is a bug
stopped at its source. A file of this version may still be rewritten later by another tool
(pyarrow keeps the metadata), so `read_file` checks the same rules on what it reads
(`check_columns`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

from gamut_local.errors import InputError, Problem
from gamut_local.rundir import task_lock
from gamut_local.rundir.human import is_human
from gamut_local.rundir.store import JOURNAL, atomic_file
from gamut_local.rundir.verdict_schema import (  # noqa: F401 (the store's schema, read and written here)
    CODED_OPTIONAL,
    FIXED,
    INTEGERS,
    KNOWN,
    META_KEY,
    PROB_COLUMNS,
    REQUIRED,
    SCHEMA_VERSION,
    check_columns,
    checked_table,
    from_records,
    meta_problem,
    schema,
    to_records,
    to_table,
    validate,
)

# LZ4, not zstd: at paper scale the columns `score` reads decode in 0.089 s instead of 0.133 s
# (one thread, 84 files) for a store 9% larger (104 MB against 95; the JSONL is 1,048 MB).
# A reader takes either: the codec is in each file's own metadata.
COMPRESSION = "lz4"
SUFFIX = ".parquet"
PARTS = ".parts"
_PART = re.compile(r"part-(\d{6,})\.parquet")  # six digits, more past 999,999


# ---------------------------------------------------------------- files

def parts_dir(unit: Path) -> Path:
    return unit.with_name(unit.name[: -len(SUFFIX)] + PARTS)


def _write_atomic(table, path: Path) -> None:
    """The table as the whole of `path` (`store.atomic_file`); the callers journal what it
    means for the unit."""
    import pyarrow.parquet as pq

    with atomic_file(path, journal=False) as f:
        pq.write_table(table, f, compression=COMPRESSION)


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
            problem = meta_problem((f.schema_arrow.metadata or {}).get(META_KEY))
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
