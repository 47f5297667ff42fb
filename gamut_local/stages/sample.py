"""`gamut-local sample RUN --responses N [--per model|--shared] --seed S`: draw the calibration
sample humans grade in full, and record its design in `RUN/samples/<name>.json`;
`gamut-local plan-sample RUN --half-width H`: from what is graded so far, how many more.

The population is every response a model judge of the run graded (`verdicts/<judge>/`, human
judges left out): the responses whose scores a correction is about. The draw itself and the
file's fields are `analysis.design`'s. Drawing again with the same arguments finds the same
sample and writes nothing; a different design under an existing name is refused, so the sample
people are grading never changes under them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from rich.console import Console

from gamut_local.analysis.design import SampleFile, draw, read_sample
from gamut_local.errors import InputError, Problem
from gamut_local.data.verdict_table import read_verdicts
from gamut_local.reporting.tables import write_model
from gamut_local.rundir.human import gold_judges, is_human
from gamut_local.rundir.layout import check_seed, find_sample, sample_path, verdict_files


def population(run_dir: Path, console: Console | None = None) -> dict[tuple[str, str], list[str]]:
    """{(model, variant): question ids} of the responses the run's model judges graded."""
    files = [p for p in verdict_files(Path(run_dir)) if not is_human(p.parent.name)]
    if not files:
        raise InputError([Problem(str(Path(run_dir) / "verdicts"), None, "",
                                  "no model judge's verdicts: run judge before drawing a sample")])
    import numpy as np

    table = read_verdicts(files, probs=False)
    # Each (model, variant, question) once, column-wise: a run has millions of verdicts.
    nv, nq = len(table.variants), max(len(table.questions), 1)
    key = np.unique((table.model.astype(np.int64) * nv + table.variant) * nq + table.question)
    out: dict[tuple[str, str], set[str]] = {}
    for k in key.tolist():
        (m, v), q = divmod(k // nq, nv), k % nq
        out.setdefault((table.models[m], table.variants[v]), set()).add(table.questions[q])
    return {k: sorted(qs) for k, qs in out.items()}


class Drawn(NamedTuple):
    """A sample's design file, its design, and whether it was written now. A tuple too:
    callers take the three apart."""

    path: Path
    design: SampleFile
    written: bool


@dataclass(frozen=True)
class SystemPlan:
    """Per model judge and system (`plan_sample`): the pilot, the responses people must grade
    corrected and human-only (None with a `reason` where the pilot cannot say), and the
    keypresses that is, one a check (`analysis.correction.plan`)."""

    judge: str
    model: str
    variant: str
    pilot_n: int
    n_total: int
    half_width: float
    human_only_n: int | None
    corrected_n: int | None
    reachable: bool | None
    ppi_corr: float | None
    reason: str | None
    checks_per_response: float
    corrected_keypresses: int | None
    human_only_keypresses: int | None


def draw_sample(run_dir: Path, responses: int, *, per: str = "model", seed: int = 0, name: str = "calibration",
                console: Console | None = None) -> Drawn:
    """The run's calibration sample, drawn and written (or found unchanged)."""
    check_seed(seed)
    if isinstance(responses, bool) or not isinstance(responses, int) or responses < 1:
        raise InputError([Problem("--responses", None, "", f"must be a whole number >= 1, got {responses!r}")])
    path = sample_path(Path(run_dir), name)
    design = draw(population(run_dir, console), responses, per=per, seed=seed, name=name)
    if not design.responses:  # only a shared sample can come out empty: no question is common to all
        raise InputError([Problem("--shared", None, "", "the systems share no question, so a shared sample "
                                  "can draw nothing: draw per system (leave out --shared)")])
    if path.exists():
        old = read_sample(path)
        if old == design:
            return Drawn(path, old, False)
        raise InputError([Problem(str(path), None, "", f"a sample named {name!r} exists with another design "
                                  f"({old.sample_id}: {old.responses_requested} per system, per {old.per}, seed "
                                  f"{old.seed}, or the run's responses changed); people may be grading it: give "
                                  "another --name, or delete the file to draw anew")])
    write_model(path, design)
    return Drawn(path, design, True)


def plan_sample(run_dir: Path, half_width: float, gold: str = "human-*", sample: str | None = None,
                console: Console | None = None) -> list[SystemPlan]:
    """Per model judge and system: responses (and keypresses, one a check) people must grade
    for a 95% CI half-width of `half_width` points, corrected and human-only side by side,
    from the pilot the sample's labeled responses make (`analysis.correction.plan`)."""
    import numpy as np

    from gamut_local.analysis.correction import gold_scores, labels_for, plan
    from gamut_local.analysis.scoring import score_table

    if not (isinstance(half_width, (int, float)) and math.isfinite(half_width) and half_width > 0):
        raise InputError([Problem("--half-width", None, "", f"must be a finite number of points > 0, got "
                                  f"{half_width!r}")])
    from gamut_local.reporting.correction import checked_sample

    design = read_sample(find_sample(Path(run_dir), sample))
    table = read_verdicts(verdict_files(Path(run_dir)), probs=False)
    checked = checked_sample(design, verdict_files(Path(run_dir)), gold, table)
    scores = score_table(table)
    gold_idx = gold_judges(scores.judges, gold, "--correct-with")
    labels = labels_for(scores, checked, gold_idx)
    y = gold_scores(scores, labels)
    rows = []
    for j, judge in enumerate(scores.judges):
        if j in gold_idx or is_human(judge):
            continue
        for s, (model, variant) in enumerate(scores.systems):
            inside = labels.population[s] & np.isfinite(scores.score[j, s])
            if not inside.any():
                continue
            lab = labels.labeled[s] & inside
            p = plan(y[s][lab], scores.score[j, s][lab], int(inside.sum()), half_width)
            checks = scores.counts[j, s].sum(axis=-1)[inside].mean()  # one keypress a check
            rows.append(SystemPlan(
                judge=judge, model=model, variant=variant, **p, checks_per_response=float(checks),
                corrected_keypresses=None if p["corrected_n"] is None else int(round(p["corrected_n"] * checks)),
                human_only_keypresses=None if p["human_only_n"] is None else int(round(p["human_only_n"] * checks))))
    return rows
