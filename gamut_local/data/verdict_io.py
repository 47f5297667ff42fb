"""Verdicts across the store's edges: JSON Lines in (`verdicts import`, an old run's files)
through the strict record-by-record reader, and JSON Lines or Parquet out (`verdicts export`).

Import reads every record with `load_records` (each problem as FILE:LINE: field, before
anything is written), groups them by (judge, model, variant) and writes each group as a part
of its store unit, then compacts it. A key the unit already holds is skipped, so importing the
same file twice (or again after a kill) never counts a verdict twice. Human verdicts stay the
append-only JSONL the viewer writes (`rundir.human`): they are appended there.
"""

from __future__ import annotations

import os
from pathlib import Path

from gamut_local.data.records import Verdict, load_records, verdict_key
from gamut_local.errors import InputError, Problem
from gamut_local.rundir import verdict_store
from gamut_local.rundir.human import is_human
from gamut_local.rundir.layout import Shard, store_path, verdicts_path
from gamut_local.rundir.store import JOURNAL, append_jsonl, write_text_atomic, dumps

IMPORTED = ".imported"  # an old run's JSONL, once its verdicts are in the store


def _add(unit: Path, records: list[dict]) -> int:
    """The records whose key the unit does not hold yet, written as its next part, compacted.
    A held key with another verdict is kept as held, and said: a model judge's verdicts are
    not edited by import (a person's correction is a human verdict: `rundir.human`)."""
    have = {verdict_key(r): r["verdict"] for _, r in verdict_store.records(unit)}
    new = [r for r in records if verdict_key(r) not in have]
    other = [r for r in records if have.get(verdict_key(r), r["verdict"]) != r["verdict"]]
    if other:
        key = verdict_key(other[0])
        JOURNAL.notices.append(f"{unit}: {len(other)} verdict(s) not imported: the unit holds their keys with "
                               f"another verdict (first {key}: {have[key]!r} held, {other[0]['verdict']!r} given)")
    verdict_store.write_part(unit, new, loose=True)
    verdict_store.compact(unit)
    return len(new)


def import_records(records: list[dict], run_dir: Path, shard: Shard = Shard()) -> dict[str, int]:
    """Write validated verdict records into the run's store; {unit or file: verdicts added}."""
    groups: dict[tuple, list[dict]] = {}
    for r in records:
        groups.setdefault((r["judge"], r["model"], r["variant"]), []).append(r)
    added = {}
    for (judge, model, variant), recs in sorted(groups.items()):
        if is_human(judge):
            path = verdicts_path(run_dir, judge, model, variant)
            added[str(path)] = append_jsonl(path, recs)
            continue
        unit = store_path(run_dir, judge, model, variant, shard)
        added[str(unit)] = _add(unit, recs)
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
    added = import_records(load_records([f for f in files if not own.get(f)], Verdict, verdict_key), run_dir)
    for f, human in own.items():
        if human:
            JOURNAL.notices.append(f"{f}: a person's verdicts, read where they are: not imported again")
        else:  # an old run's own JSONL, in its store now: renamed, as the judge stage adopts one
            os.replace(f, f.with_name(f.name + IMPORTED))
            JOURNAL.notices.append(f"{f}: in the run's store now; renamed {f.name + IMPORTED} (no reader lists it)")
    return added


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
    _add(unit, records)
    os.replace(path, path.with_name(path.name + IMPORTED))
    return len(records)


def export(paths: list[Path], out: Path) -> int:
    """Every verdict of the inputs (store units and JSONL files) to `out`: JSON Lines, or the
    store's Parquet schema when `out` ends in .parquet. Returns the number written."""
    records = load_records(verdict_store.inputs(paths), Verdict, verdict_key)
    out = Path(out)
    if out.suffix == verdict_store.SUFFIX:
        verdict_store.replace_unit(out, records, loose=True)
    else:
        write_text_atomic(out, "".join(dumps(r) + "\n" for r in records))
    return len(records)
