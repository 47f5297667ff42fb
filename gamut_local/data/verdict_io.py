"""Verdicts across the store's edges: JSON Lines in (`verdicts import`, an old run's files)
through the strict record-by-record reader, and JSON Lines or Parquet out (`verdicts export`).

Import reads every record with `load_records` (each problem as FILE:LINE: field, before
anything is written), groups them by (judge, model, variant) and, holding the task locks of
every unit of that group (`verdict_store.writing`: every shard layout; a judge task writing
one of them refuses the import, naming it), adds what no unit of the group holds: a key held
anywhere is skipped, so importing the same file twice (or a run's own export, or again after a
kill) adds nothing. A new verdict goes into the unit that holds its question's verdicts (the
shard that judged it), else the unsharded unit (or, for an old run's own file, its unit).

Human verdicts stay the append-only JSONL the viewer writes (`rundir.human`), where the last
record of a cell is the person's verdict. They are added by their identity (annotator, key,
`revision`): a revision the file holds is skipped, and one no newer than the file's latest
for that cell is skipped too, since appended it would come last and bring an older verdict
back. A record without a revision is added only to a cell the person has not judged.
"""

from __future__ import annotations

import os
from pathlib import Path

from gamut_local.data.records import Verdict, load_records, verdict_key
from gamut_local.errors import InputError, Problem
from gamut_local.rundir import task_lock, verdict_store
from gamut_local.rundir.human import is_human
from gamut_local.rundir.layout import Shard, store_path, verdict_siblings, verdicts_path
from gamut_local.rundir.store import JOURNAL, append_jsonl, dumps, read_jsonl, write_text_atomic

IMPORTED = ".imported"  # an old run's JSONL, once its verdicts are in the store


def _held(paths: list[Path]):
    """(path, record) of every verdict these files hold now."""
    for path in paths:
        rows = verdict_store.records(path) if verdict_store.is_store(path) else read_jsonl(path, allow_empty=True)
        for _, rec in rows:
            yield path, rec


def _add_group(run_dir: Path, records: list[dict], homes: list[Path], exclude) -> dict[str, int]:
    """Records of one (judge, model, variant) whose key no file of the group holds, each written
    into its question's unit, else into its `homes` entry; {unit: verdicts added}. A held key
    with another verdict is kept as held, and said: a model judge's verdicts are not edited
    by import (a person's correction is a human verdict: `rundir.human`)."""
    if not records:
        return {}
    first = records[0]
    group = (first["judge"], first["model"], first["variant"])
    units = [p for p in verdict_siblings(run_dir, *group) if verdict_store.is_store(p)]
    with verdict_store.writing({*units, *homes}, wait=task_lock.WAIT, any_layout=True):
        have, where = {}, {}
        gone = {p.resolve() for p in exclude}  # files whose records these are: not held, moving in
        for path, rec in _held([p for p in verdict_siblings(run_dir, *group) if p.resolve() not in gone]):
            have[verdict_key(rec)] = (rec["verdict"], path)
            if verdict_store.is_store(path):
                where.setdefault(rec["question_id"], path)
        other = [r for r in records if have.get(verdict_key(r), (r["verdict"],))[0] != r["verdict"]]
        if other:
            key = verdict_key(other[0])
            JOURNAL.notices.append(f"{have[key][1]}: {len(other)} verdict(s) not imported: the unit holds their keys "
                                   f"with another verdict (first {key}: {have[key][0]!r} held, "
                                   f"{other[0]['verdict']!r} given)")
        into: dict[Path, list[dict]] = {}
        for rec, home in zip(records, homes):
            if verdict_key(rec) not in have:
                into.setdefault(where.get(rec["question_id"], home), []).append(rec)
        for unit, new in sorted(into.items()):
            verdict_store.write_part(unit, new, loose=True)
            verdict_store.compact(unit)
    return {str(unit): len(new) for unit, new in sorted(into.items())}


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


def import_records(records: list[dict], run_dir: Path, shard: Shard = Shard(),
                   homes: list[Path | None] | None = None, exclude=()) -> dict[str, int]:
    """Write validated verdict records into the run's store; {unit or file: verdicts added}.
    A new key goes into the unit of its question, else its `homes` entry (None, or none
    given: the unit of `shard`'s layout). A person's records keep every revision given."""
    groups: dict[tuple, list[tuple]] = {}
    for k, r in enumerate(records):
        groups.setdefault((r["judge"], r["model"], r["variant"]), []).append((r, homes[k] if homes else None))
    added = {}
    for (judge, model, variant), pairs in sorted(groups.items()):
        recs = [r for r, _ in pairs]
        if is_human(judge):
            path = verdicts_path(run_dir, judge, model, variant)
            added[str(path)] = _add_people(path, recs)
            continue
        default = store_path(run_dir, judge, model, variant, shard)
        added.update(_add_group(run_dir, recs, [h or default for _, h in pairs], exclude))
    return added


def import_files(files: list[Path], run_dir: Path) -> dict[str, int]:
    """`gamut-local verdicts import FILE.jsonl... --into RUN`: every check (the strict reader's,
    and one settings hash per judge across what the run already holds) with its FILE:LINE
    message before anything is written."""
    from gamut_local.data.verdict_table import check_settings, read_verdicts

    bad = [Problem(str(f), None, "", "not a JSON Lines file (.jsonl)") for f in files if Path(f).suffix != ".jsonl"]
    if bad:
        raise InputError(bad)
    files, run_dir = [Path(f) for f in files], Path(run_dir)
    table = read_verdicts(files)
    held = [unit for judge in table.judges if not is_human(judge)
            for unit in verdict_store.units_in(run_dir / "verdicts" / judge)]
    check_settings(table, read_verdicts(held, probs=False))
    own = _own_files(files, table, run_dir)
    # The run's own human files are read where they are (appended to themselves, they would double).
    read = [f for f in files if not own.get(f)]
    where: list[tuple[int, int]] = []
    records = load_records(read, Verdict, verdict_key, where)
    # An old run's own JSONL moves into its own unit (its shard's), as the judge stage adopts one.
    homes = [read[k].with_suffix(verdict_store.SUFFIX) if read[k] in own else None for k, _ in where]
    machine = [(r, h) for r, h in zip(records, homes) if not is_human(r["judge"])]
    added = import_records([r for r, _ in machine], run_dir, homes=[h for _, h in machine],
                           exclude=[f for f in read if f in own])
    added.update(import_records(_people_records(files, table, skip=set(own)), run_dir))
    for f, human in own.items():
        if human:
            JOURNAL.notices.append(f"{f}: a person's verdicts, read where they are: not imported again")
        else:  # an old run's own JSONL, in its store now: renamed, as the judge stage adopts one
            os.replace(f, f.with_name(f.name + IMPORTED))
            JOURNAL.notices.append(f"{f}: in the run's store now; renamed {f.name + IMPORTED} (no reader lists it)")
    return added


def _people_records(files: list[Path], table, skip) -> list[dict]:
    """The people's records of these files, every revision in file order (the strict reader
    keeps a person's last per cell; import adds the history the run lacks)."""
    human = {j for j, name in enumerate(table.judges) if is_human(name)}
    out = []
    for k, f in enumerate(files):
        if f not in skip and human & set(table.judge[table.file == k].tolist()):
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
    records = load_records([path], Verdict, verdict_key)
    _add_group(unit.parents[2], records, [unit] * len(records), exclude=[path])
    os.replace(path, path.with_name(path.name + IMPORTED))
    return len(records)


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
