"""A team's work on a run's calibration sample, read from and written to the run directory:
`assign` and `rebalance` (`RUN/team/assignments.json`, shared out by `analysis.assignment`),
`graded_by` (who has graded which drawn response, by the rule the correction labels with) and
`team_agreement` (the agreement between people on the overlap, `analysis.human_agreement`, for
the report and the viewer's live leaderboard).

Who graded what is read the way `score-run --correct-with 'human-*'` reads it: the run's
verdicts (the dataset its manifest names, when readable, and its answers, so stale verdicts do
not count), checked against the design (`analysis.design.check_sample`), a response graded by
an annotator by the correction's rule (`analysis.correction.graded_in_full`, through
`graded_responses`), which the viewer's progress reads too.
"""

from __future__ import annotations

from pathlib import Path

from gamut_local.analysis import assignment
from gamut_local.analysis.assignment import Assignments
from gamut_local.errors import InputError, Problem
from gamut_local.rundir import assignments as store
from gamut_local.rundir.layout import sample_path
from gamut_local.vocab import HUMAN_PREFIX

GOLD = HUMAN_PREFIX + "*"


def design_of(run_dir: Path, sample: str):
    """The design `RUN/samples/<sample>.json`, checked; an unknown name is an InputError
    naming the file and the samples there are."""
    from gamut_local.analysis.design import read_sample
    from gamut_local.rundir.layout import sample_files

    try:
        path = sample_path(run_dir, sample)
    except InputError:
        raise InputError([Problem("--sample", None, "", f"{sample!r} is not a sample name")]) from None
    if not path.is_file():
        names = ", ".join(p.stem for p in sample_files(run_dir)) or "none: run `gamut-local sample` first"
        raise InputError([Problem(str(path), None, "name", f"no calibration sample {sample!r} in this run "
                                  f"(samples: {names})")])
    return read_sample(path)


def _dataset(run_dir: Path) -> Path | None:
    from gamut_local.rundir.manifest_schema import Manifest, read_manifest

    ref = (read_manifest(run_dir) or Manifest()).config.dataset
    for cand in ([Path(ref), Path(run_dir) / ref] if ref else []):
        if cand.is_file():
            return cand
    return None


def read_run(run_dir: Path):
    """(verdict table, Scores) of the run's verdicts as a corrected score reads them: checked
    against the manifest's dataset where it is readable, stale verdicts left out."""
    from gamut_local.analysis.scoring import score_table
    from gamut_local.data.reading import expected_checks, read_verdicts_and_dataset
    from gamut_local.rundir.layout import all_answer_files, verdict_files

    paths = verdict_files(Path(run_dir))
    if not paths:
        return None, None
    dataset = _dataset(Path(run_dir))
    table, (_, _, _, checks) = read_verdicts_and_dataset(paths, dataset, answers=all_answer_files(Path(run_dir)))
    return table, score_table(table, expected=expected_checks(checks) if dataset is not None else None, n_boot=0)


def graded_by(run_dir: Path, design, table=None, scores=None) -> dict[str, set]:
    """{annotator: {(model, variant, question)}} the drawn responses each annotator has graded
    in full in the design's queue (the correction's rule). `table`, `scores`: the run already
    read (`read_run`)."""
    from gamut_local.analysis.correction import graded_responses
    from gamut_local.reporting.gold import checked_sample
    from gamut_local.rundir.layout import verdict_files

    if scores is None:
        table, scores = read_run(run_dir)
        if scores is None:
            return {}
    checked = checked_sample(design, verdict_files(Path(run_dir)), GOLD, table)
    return {judge[len(HUMAN_PREFIX):]: done for judge, done in graded_responses(scores, checked).items()}


def assign(run_dir: Path, sample: str, annotators: list[str], overlap: float) -> Assignments:
    """Create (or replace) the team's assignment of the sample `sample`: every drawn response
    to one of `annotators` (two on the overlap, `overlap` of them), balanced per stratum, in
    round order; a response someone has graded in full already stays theirs. Written to
    `RUN/team/assignments.json` under its lock."""
    overlap = assignment.check_overlap(overlap)
    team = assignment.check_team(annotators)
    design = design_of(run_dir, sample)
    done = graded_by(run_dir, design)
    with store.locked(run_dir):
        planned = assignment.plan(design, team, overlap, graded_by=done)
        store.save(run_dir, planned)
    return planned


def rebalance(run_dir: Path, annotators: list[str]) -> Assignments:
    """The assignment for the current team `annotators` (join order): a new member gets a share
    of the ungraded work, a removed one's ungraded work goes to the others, and what anyone has
    graded in full stays theirs. An InputError where the run has no assignment yet, or its
    design is not the one the assignment was made for."""
    team = assignment.check_team(annotators)
    with store.locked(run_dir):
        old = store.load(run_dir)
        if old is None:
            raise InputError([Problem(str(store.path_of(run_dir)), None, "", "no assignment yet: "
                                      "`gamut-local annotators assign RUN --sample NAME` first")])
        design = design_of(run_dir, old.sample)
        if design.sample_id != old.sample_id:
            raise InputError([Problem(str(store.path_of(run_dir)), None, "sample_id", f"{old.sample_id!r}, but the "
                                      f"sample {old.sample!r} is now {design.sample_id!r}: assign it again")])
        new = assignment.replan(old, design, team, graded_by(run_dir, design))
        store.save(run_dir, new)
    return new


def load(run_dir: Path) -> Assignments | None:
    """The run's assignment (`rundir.assignments.load`), None without one."""
    return store.load(run_dir)


def team_agreement(run_dir: Path) -> dict | None:
    """The agreement between people on the team's overlap (`analysis.human_agreement.
    overlap_agreement`) with the sample's name and id; None where the run has no assignment.
    Reads the run (its verdicts as a corrected score reads them): the report calls it once, a
    live view should keep the result until a verdict is written."""
    from gamut_local.analysis.human_agreement import overlap_agreement
    from gamut_local.data.records import Verdict, load_records, verdict_key
    from gamut_local.rundir.human import is_human

    made = store.load(run_dir)
    if made is None:
        return None
    design = design_of(run_dir, made.sample)
    table, scores = read_run(run_dir)
    if table is None:
        return None
    files = _human_files(run_dir)
    records = load_records(files, Verdict, verdict_key) if files else []
    done = graded_by(run_dir, design, table, scores)
    models = {name: {} for name in table.judges if not is_human(name)}
    out = overlap_agreement(made, records, design.sample_id, done,
                            _judge_labels(table, made, models))
    return {"sample": made.sample, "sample_id": made.sample_id, "overlap": made.overlap, **out}


def _human_files(run_dir: Path) -> list[Path]:
    from gamut_local.rundir.human import is_human
    from gamut_local.rundir.layout import verdict_files

    return [p for p in verdict_files(Path(run_dir)) if p.suffix == ".jsonl" and is_human(p.parent.name)]


def _judge_labels(table, made, models: dict) -> dict:
    """{model judge: {(model, variant, question, check): code}} on the overlap responses."""
    import numpy as np

    from gamut_local.vocab import VARIANTS

    pairs = [r for r, who in made.responses.items() if len(who) > 1]
    m_of = {m: i for i, m in enumerate(table.models)}
    q_of = {q: i for i, q in enumerate(table.questions)}
    V, Q = len(VARIANTS), max(len(table.questions), 1)
    want = np.array([(m_of[m] * V + VARIANTS.index(v)) * Q + q_of[q] for m, v, q in pairs
                     if m in m_of and q in q_of and v in VARIANTS], dtype=np.int64)
    key = (table.model.astype(np.int64) * V + table.variant) * Q + table.question
    rows = np.flatnonzero(np.isin(key, want) & np.isin(table.judge, [table.judges.index(j) for j in models]))
    for i in rows.tolist():
        cell = (table.models[table.model[i]], VARIANTS[table.variant[i]], table.questions[table.question[i]],
                table.checks[table.check[i]])
        models[table.judges[table.judge[i]]][cell] = int(table.verdict[i])
    return models
