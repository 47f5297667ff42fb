"""Verdicts across the store's edges: JSON Lines in (`verdicts import`, an old run's files)
and JSON Lines or Parquet out (`verdicts export`).

Import reads the files once (`verdict_table.read_whole`: column-wise where a file's columns
vouch for it, else through the strict reader, each problem as FILE:LINE: field, before
anything is written) into Arrow tables of the store's schema, splits their rows by (judge,
model, variant) and, holding the task locks of every unit of that group
(`verdict_store.writing`: every shard layout; a judge task writing one of them refuses the
import, naming it), writes the rows whose key no unit of the group holds: a key held anywhere
is skipped, so importing the same file twice (or a run's own export, or again after a kill)
adds nothing. A new verdict goes into the unit that holds its question's verdicts (the shard
that judged it), else the unsharded unit (or, for an old run's own file, its unit). The
filter is vectorised over codes (`_Held`); the tables go to the store's writer as they are.

Human verdicts stay the append-only JSONL the viewer writes (`rundir.human`), where the last
record of a cell is the person's verdict. They are added by their identity (annotator, key,
`revision`): a revision the file holds is skipped, and one no newer than the file's latest
for that cell is skipped too, since appended it would come last and bring an older verdict
back. A record without a revision is added only to a cell the person has not judged.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from gamut_local.data.records import Verdict, load_records, verdict_key
from gamut_local.errors import InputError, Problem
from gamut_local.rundir import task_lock, verdict_store
from gamut_local.rundir.human import is_human
from gamut_local.rundir.layout import store_path, verdict_siblings, verdicts_path
from gamut_local.rundir.store import JOURNAL, append_jsonl, dumps, read_jsonl, write_text_atomic
from gamut_local.vocab import VERDICTS

IMPORTED = ".imported"  # an old run's JSONL, once its verdicts are in the store


def _held(paths: list[Path]):
    """(path, record) of every verdict these files hold now."""
    for path in paths:
        rows = verdict_store.records(path) if verdict_store.is_store(path) else read_jsonl(path, allow_empty=True)
        for _, rec in rows:
            yield path, rec


class _Held:
    """The (question, check) keys a group's files hold, with each key's verdict, and the first
    store unit that holds each question, as codes: the import's filter, vectorised."""

    COLUMNS = ["question_id", "check_id", "verdict"]

    def __init__(self, paths: list[Path]):
        import pyarrow as pa

        tables = [verdict_store.read_unit(p, self.COLUMNS) if verdict_store.is_store(p) else
                  verdict_store.from_records([r for _, r in _held([p])], self.COLUMNS) for p in paths]
        both = pa.concat_tables(tables) if tables else verdict_store.schema().empty_table().select(self.COLUMNS)
        source = np.repeat(np.arange(len(tables)), [t.num_rows for t in tables])
        question, self.questions = _codes(both, "question_id")
        check, self.checks = _codes(both, "check_id")
        self.verdict = _verdict_codes(both)
        self.paths, self.source = paths, source
        key = question.astype(np.int64) * max(len(self.checks), 1) + check
        self.order = np.argsort(key, kind="stable")  # a key held twice: its first row found
        self.sorted = key[self.order]
        # Each question's first store unit, in the order the files are listed.
        self.unit_of = np.full(len(self.questions) + 1, -1)
        stored = np.flatnonzero(np.isin(source, [k for k, p in enumerate(paths) if verdict_store.is_store(p)]))
        seen, first = np.unique(question[stored], return_index=True)
        self.unit_of[seen] = source[stored[first]]

    def find(self, table) -> tuple[np.ndarray, np.ndarray]:
        """(the held row of each of the table's rows, -1 where its key is not held; the index
        in `paths` of the store unit holding its question, -1 where none does)."""
        q = _mapped(table, "question_id", self.questions)
        c = _mapped(table, "check_id", self.checks)
        key = np.where((q >= 0) & (c >= 0), q.astype(np.int64) * max(len(self.checks), 1) + c, -1)
        pos = np.minimum(np.searchsorted(self.sorted, key), max(len(self.sorted) - 1, 0))
        hit = (key >= 0) & (self.sorted[pos] == key) if len(self.sorted) else np.zeros(len(key), dtype=bool)
        return np.where(hit, self.order[pos] if len(self.sorted) else -1, -1), self.unit_of[q]


def _codes(table, name: str) -> tuple[np.ndarray, list[str]]:
    from gamut_local import arrow

    return arrow.codes(arrow.whole(table.column(name)))


def _mapped(table, name: str, into: list[str]) -> np.ndarray:
    """Each row's value of the column `name` as its position in `into` (-1: not there)."""
    codes, values = _codes(table, name)
    index = {v: k for k, v in enumerate(into)}
    return np.array([index.get(v, -1) for v in values] + [-1], dtype=np.int64)[codes]


def _verdict_codes(table) -> np.ndarray:
    codes, values = _codes(table, "verdict")
    return np.array([VERDICTS.index(v) for v in values] + [-1], dtype=np.int8)[codes]


def _add_group(run_dir: Path, group: tuple[str, str, str], pieces: list[tuple], exclude) -> dict[str, int]:
    """Rows of one (judge, model, variant) (`pieces`: (table of the store's columns, its home
    unit), in the order given) whose key no file of the group holds, each written into its
    question's unit, else into its home; {unit: verdicts added}. A held key with another
    verdict is kept as held, and said: a model judge's verdicts are not edited by import (a
    person's correction is a human verdict: `rundir.human`)."""
    import pyarrow as pa

    siblings = verdict_siblings(run_dir, *group)
    units = [p for p in siblings if verdict_store.is_store(p)]
    with verdict_store.writing({*units, *(home for _, home in pieces)}, wait=task_lock.WAIT, any_layout=True):
        gone = {p.resolve() for p in exclude}  # files whose rows these are: not held, moving in
        held = _Held([p for p in siblings if p.resolve() not in gone])
        into: dict[Path, list] = {}
        other, first = 0, None
        for table, home in pieces:
            at, unit = held.find(table)
            new = at < 0
            differs = ~new & (_verdict_codes(table) != held.verdict[at]) if not new.all() else ~new
            if differs.any() and first is None:
                row = int(np.argmax(differs))
                first = (table.slice(row, 1).to_pylist()[0], held.paths[held.source[at[row]]], VERDICTS[held.verdict[at[row]]])
            other += int(differs.sum())
            for u in np.unique(unit[new]).tolist():
                rows = np.flatnonzero(new & (unit == u))
                into.setdefault(home if u < 0 else held.paths[u], []).append(_rows(table, rows))
        if first is not None:
            rec, path, was = first
            JOURNAL.notices.append(f"{path}: {other} verdict(s) not imported: the unit holds their keys "
                                   f"with another verdict (first {verdict_key(rec)}: {was!r} held, "
                                   f"{rec['verdict']!r} given)")
        for unit, parts in sorted(into.items()):
            rows = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
            if verdict_store.unit_files(unit):
                verdict_store.write_part(unit, rows)
                verdict_store.compact(unit)
            else:  # a new unit: its compacted file at once (the rows are not written twice)
                verdict_store.replace_unit(unit, rows)
    return {str(unit): sum(t.num_rows for t in parts) for unit, parts in sorted(into.items())}


def _split(table) -> dict[tuple[str, str, str], np.ndarray]:
    """{(judge, model, variant): its rows, in order} of a table of the store's columns."""
    from gamut_local.data.verdict_table import row_key

    parts, names = zip(*(_codes(table, name) for name in ("judge", "model", "variant")))
    key = row_key([p.astype(np.int64) for p in parts], [max(len(n), 1) for n in names])
    order = np.argsort(key, kind="stable")
    out = {}
    for rows in np.split(order, np.flatnonzero(np.diff(key[order])) + 1):
        if len(rows):
            out[tuple(n[p[rows[0]]] for n, p in zip(names, parts))] = rows
    return out


def _rows(table, rows: np.ndarray):
    from gamut_local import arrow

    return table if len(rows) == table.num_rows else table.take(arrow.from_numpy(rows))


def _revision(rec: dict) -> int | None:
    r = rec.get("revision")
    return r if isinstance(r, int) and not isinstance(r, bool) else None


def _add_people(path: Path, records: list[dict]) -> int:
    """A person's records (in file order, every revision) appended to their verdicts file,
    by identity (key, revision): see the module docstring."""
    with task_lock.hold([path], wait=task_lock.WAIT):
        held = list(_held([path] if path.exists() else []))
        last = {verdict_key(r): r for _, r in held}
        latest = {k: max((_revision(r) or 0 for _, r in held if verdict_key(r) == k), default=0) for k in last}
        present = {(verdict_key(r), _revision(r)) for _, r in held if _revision(r) is not None}
        new, kept = [], []
        for rec in records:
            k, rev = verdict_key(rec), _revision(rec)
            if (k, rev) in present:
                continue
            if k not in last or (rev is not None and rev > latest[k]):
                new.append(rec)
                latest[k] = max(latest.get(k, 0), rev or 0)
                if rev is not None:
                    present.add((k, rev))
            elif rec["verdict"] != last[k]["verdict"]:
                kept.append(rec)
        if kept:
            k = verdict_key(kept[0])
            JOURNAL.notices.append(f"{path}: {len(kept)} verdict(s) not imported: the person's file holds a later "
                                   f"or unordered verdict for their cells (first {k}: {last[k]['verdict']!r} "
                                   f"revision {_revision(last[k])} held, {kept[0]['verdict']!r} revision "
                                   f"{_revision(kept[0])} given); a revision no newer than the held one would "
                                   "bring an older verdict back")
        return append_jsonl(path, new)


def _add_people_records(records: list[dict], run_dir: Path) -> dict[str, int]:
    """People's records into their verdicts files, by identity (`_add_people`)."""
    groups: dict[tuple, list[dict]] = {}
    for r in records:
        groups.setdefault((r["judge"], r["model"], r["variant"]), []).append(r)
    out = {}
    for group, recs in sorted(groups.items()):
        path = verdicts_path(run_dir, *group)
        out[str(path)] = _add_people(path, recs)
    return out


def import_files(files: list[Path], run_dir: Path) -> dict[str, int]:
    """`gamut-local verdicts import FILE.jsonl... --into RUN`: every check (the readers', and
    one settings hash per judge across what the run already holds) with its FILE:LINE message
    before anything is written. The files are read once, as columns where they can vouch for
    themselves (`verdict_table.read_whole`), and their tables are what is written."""
    from gamut_local.data.verdict_table import check_settings, read_verdicts, read_whole

    bad = [Problem(str(f), None, "", "not a JSON Lines file (.jsonl)") for f in files if Path(f).suffix != ".jsonl"]
    if bad:
        raise InputError(bad)
    files, run_dir = [Path(f) for f in files], Path(run_dir)
    table, tables = read_whole(files)
    held = [unit for judge in table.judges if not is_human(judge)
            for unit in verdict_store.units_in(run_dir / "verdicts" / judge)]
    check_settings(table, read_verdicts(held, probs=False))
    own = _own_files(files, table, run_dir)
    groups: dict[tuple, list[tuple]] = {}
    for f, file_table in zip(files, tables):
        if own.get(f):  # the run's own human files are read where they are (appended to themselves, they would double)
            continue
        for group, rows in _split(file_table).items():
            if not is_human(group[0]):
                # An old run's own JSONL moves into its own unit (its shard's), as the judge stage adopts one.
                home = f.with_suffix(verdict_store.SUFFIX) if f in own else store_path(run_dir, *group)
                groups.setdefault(group, []).append((_rows(file_table, rows), home))
    human = [j for j, name in enumerate(table.judges) if is_human(name)]
    people = {files[k] for k in np.unique(table.file[np.isin(table.judge, human)]).tolist()} - set(own)
    del table, tables
    added = {}
    for group, pieces in sorted(groups.items()):
        added.update(_add_group(run_dir, group, pieces, exclude=[f for f in own if not own[f]]))
    added.update(_add_people_records(_people_records(files, people), run_dir))
    for f, human in own.items():
        if human:
            JOURNAL.notices.append(f"{f}: a person's verdicts, read where they are: not imported again")
        else:  # an old run's own JSONL, in its store now: renamed, as the judge stage adopts one
            os.replace(f, f.with_name(f.name + IMPORTED))
            JOURNAL.notices.append(f"{f}: in the run's store now; renamed {f.name + IMPORTED} (no reader lists it)")
    return added


def _people_records(files: list[Path], read_people: set[Path]) -> list[dict]:
    """The people's records of these files, every revision in file order (the readers keep a
    person's last per cell; import adds the history the run lacks). A person's files are small:
    read record by record (the strict reader's models)."""
    out = []
    for f in files:
        if f in read_people:
            out += [Verdict.model_validate(obj).model_dump() for _, obj in read_jsonl(f)
                    if is_human(obj.get("judge") or "")]
    return out


def _own_files(files: list[Path], table, run_dir: Path) -> dict[Path, bool]:
    """{file inside the run's verdicts folder: whether it holds a person's verdicts (which stay
    where they are; a model judge's move into the store)}; a file with both is refused."""
    from gamut_local.rundir.paths import inside

    kinds = {f: {is_human(table.judges[j]) for j in set(table.judge[table.file == k].tolist())}
             for k, f in enumerate(files) if inside(f, run_dir / "verdicts")}
    mixed = [Problem(str(f), None, "judge", "holds a person's and a model judge's verdicts inside the run; a "
                     "person's stay JSONL where they are: split the file") for f, k in kinds.items() if len(k) > 1]
    if mixed:
        raise InputError(mixed)
    return {f: k == {True} for f, k in kinds.items()}


def adopt_jsonl(path: Path, unit: Path) -> int:
    """An old run's JSONL of one task into its store unit, once: imported, then renamed to
    `<name>.jsonl.imported` (no reader lists it; the bytes are kept). A kill between the two
    steps leaves both: the rerun imports again and adds nothing (keys already held)."""
    from gamut_local.data.verdict_table import read_whole

    table = read_whole([path], settings=False)[1][0]
    for group, rows in sorted(_split(table).items()):
        _add_group(unit.parents[2], group, [(_rows(table, rows), unit)], exclude=[path])
    os.replace(path, path.with_name(path.name + IMPORTED))
    return table.num_rows


def export(paths: list[Path], out: Path) -> int:
    """Every verdict of the inputs (store units and JSONL files) to `out`: JSON Lines, or the
    store's Parquet schema when `out` ends in .parquet. Returns the number written."""
    records = load_records(verdict_store.inputs(paths), Verdict, verdict_key)
    out = Path(out)
    if out.suffix == verdict_store.SUFFIX:  # a file of the store's schema, not a unit: no run's store holds it
        verdict_store.write_table_file(out, records)
    else:
        write_text_atomic(out, "".join(dumps(r) + "\n" for r in records))
    return len(records)
