"""`gamut-local sample RUN --responses N [--per model|--shared] --seed S`: draw the calibration
sample humans grade in full, and record its design in `RUN/samples/<name>.json`.

The population is every response a model judge of the run graded (`verdicts/<judge>/`, human
judges left out): the responses whose scores a correction is about. The draw itself and the
file's fields are `analysis.design`'s. Drawing again with the same arguments finds the same
sample and writes nothing; a different design under an existing name is refused, so the sample
people are grading never changes under them.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from gamut_local.analysis.design import SampleFile, draw, read_sample
from gamut_local.errors import InputError, Problem
from gamut_local.reporting.tables import read_verdict_table, write_model
from gamut_local.rundir.human import is_human
from gamut_local.rundir.layout import check_seed, sample_path, verdict_files


def population(run_dir: Path, console: Console | None = None) -> dict[tuple[str, str], list[str]]:
    """{(model, variant): question ids} of the responses the run's model judges graded."""
    files = [p for p in verdict_files(Path(run_dir)) if not is_human(p.parent.name)]
    if not files:
        raise InputError([Problem(str(Path(run_dir) / "verdicts"), None, "",
                                  "no model judge's verdicts: run judge before drawing a sample")])
    table = read_verdict_table(files, console)
    out: dict[tuple[str, str], set[str]] = {}
    for m, v, q in set(zip(table.model.tolist(), table.variant.tolist(), table.question.tolist())):
        out.setdefault((table.models[m], table.variants[v]), set()).add(table.questions[q])
    return {k: sorted(qs) for k, qs in out.items()}


def draw_sample(run_dir: Path, responses: int, *, per: str = "model", seed: int = 0, name: str = "calibration",
                console: Console | None = None) -> tuple[Path, SampleFile, bool]:
    """(design file, design, whether it was written now) for the run's calibration sample."""
    check_seed(seed)
    if isinstance(responses, bool) or not isinstance(responses, int) or responses < 1:
        raise InputError([Problem("--responses", None, "", f"must be a whole number >= 1, got {responses!r}")])
    path = sample_path(Path(run_dir), name)
    design = draw(population(run_dir, console), responses, per=per, seed=seed, name=name)
    if path.exists():
        old = read_sample(path)
        if old == design:
            return path, old, False
        raise InputError([Problem(str(path), None, "", f"a sample named {name!r} exists with another design "
                                  f"({old.sample_id}: {old.responses_requested} per system, per {old.per}, seed "
                                  f"{old.seed}, or the run's responses changed); people may be grading it: give "
                                  "another --name, or delete the file to draw anew")])
    write_model(path, design)
    return path, design, True
