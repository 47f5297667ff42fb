"""The gold side of a corrected score, read from files: the human verdicts a command's inputs
hold, checked against the calibration sample's design (`analysis.design.check_sample`), with
the team's rule where the run has a team's assignment of that design (`with_team`), and the
run's juries. Every command's corrected score (`score`, `score-run`, `report`, `plan-sample`)
and the team's `graded_by` read the gold this one way.
"""

from __future__ import annotations

from pathlib import Path

from gamut_local.rundir.human import is_gold, is_human


def checked_sample(design, paths, gold: str, table=None):
    """`analysis.design.check_sample` for verdict inputs as a command names them (store units,
    JSONL files, folders: a run, its `verdicts/`, one judge's), the path every command's
    corrected score takes. The human verdicts are read from the JSONL files that hold them:
    with the verdict `table` already read, the files it found gold human rows in; without,
    every JSONL input. Juries are those of the runs the inputs lie in (`RUN/juries/`)."""
    from gamut_local.analysis.design import check_sample
    from gamut_local.data.records import Verdict, load_records, verdict_key

    files = _gold_files(paths, gold, table)
    where: list[tuple[int, int]] = []
    records = load_records(files, Verdict, verdict_key, where=where) if files else []
    checked = check_sample(design, records, [(str(files[k]), line) for k, line in where], gold, _juries(paths))
    return with_team(checked, _runs(paths), records)


def with_team(checked, runs, records):
    """`checked` with the team's rule (`analysis.correction.TeamRule`) where one of `runs` has
    an assignment of this very design (`RUN/team/assignments.json`): whose labels a response
    several people graded takes, and the adjudicated cells. `records`: the human verdicts, as
    dicts, newest per cell (what `check_sample` was given)."""
    from dataclasses import replace

    from gamut_local.analysis.correction import team_rule
    from gamut_local.rundir.assignments import load

    for run in runs:
        found = load(run)
        if found is not None and found.sample_id == checked.design.sample_id:
            return replace(checked, team=team_rule(found, records, found.sample_id))
    return checked


def _runs(paths) -> list[Path]:
    """The runs the verdict inputs lie in: a folder that holds `verdicts/`, or the run above
    `verdicts/` or `verdicts/<judge>/`."""
    from gamut_local.rundir import verdict_store

    runs = {Path(p) for p in paths if Path(p).is_dir() and (Path(p) / "verdicts").is_dir()}
    runs |= {p.parent.parent.parent for p in verdict_store.inputs(paths) if p.parent.parent.name == "verdicts"}
    return sorted(runs)


def _gold_files(paths, gold: str, table) -> list[Path]:
    from gamut_local.rundir import verdict_store

    if table is None:
        return [p for p in verdict_store.inputs(paths) if not verdict_store.is_store(p)]
    import numpy as np

    wanted = [j for j, name in enumerate(table.judges) if is_human(name) and is_gold(name, gold)]
    at = np.unique(table.file[np.isin(table.judge, wanted)]) if wanted else []
    return [Path(table.files[k]) for k in at]


def _juries(paths) -> dict:
    """{jury: (its record's path, members)} of the runs the verdict inputs lie in: a folder
    that holds `verdicts/`, or the run above `verdicts/` or `verdicts/<judge>/`."""
    return {name: found for run in _runs(paths) for name, found in jury_records(run).items()}


def jury_records(run_dir: Path) -> dict:
    """{jury: (path, members)} of `RUN/juries/*.json`; one that cannot be read is an error
    naming it (whether a jury was made of gold judges must not be guessed)."""
    import json

    from gamut_local.errors import InputError, Problem

    out = {}
    for path in sorted((Path(run_dir) / "juries").glob("*.json")):
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            members = doc["members"]
            if not (isinstance(members, list) and all(isinstance(m, str) for m in members)):
                raise TypeError
        except (OSError, ValueError, KeyError, TypeError):
            raise InputError([Problem(str(path), None, "members", "not a jury record with a list of member "
                                      "names: restore it, or make the jury again (`gamut-local jury`)")]) from None
        out[path.stem] = (str(path), members)
    return out
