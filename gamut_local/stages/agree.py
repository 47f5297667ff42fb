"""`gamut-local agree`: read verdict files of several judges into one table and compare the
judges on the same responses (rank agreement, kappa, Krippendorff's alpha, calibration
against `gold`); the statistics are in `analysis.agreement`, the response scores they start
from in `analysis.scoring` (the same ones `score` writes)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from rich.console import Console

from gamut_local.analysis.outputs import AgreementFile
from gamut_local.analysis.scoring import require_complete, score_table, system_index
from gamut_local.errors import InputError, Problem
from gamut_local.data.reading import read_verdicts_and_dataset
from gamut_local.reporting.current import agreement_document
from gamut_local.reporting.tables import write_model
from gamut_local.rundir.human import gold_judges


def write_agreement(out: Path, paths: list[Path], console: Console | None = None, gold: str | None = None,
                    dataset: Path | None = None, answers: list[Path] | None = None,
                    allow_incomplete: bool = False) -> AgreementFile:
    """Agreement of the judges in `paths`, written to `out`; stale verdicts (given the dataset
    or the answers to compare with) are left out, human gold ones included. The rank
    statistics compare systems, so an incomplete system is refused unless `allow_incomplete`."""
    table = read_verdicts_and_dataset(paths, dataset, console, answers=answers, probs=gold is not None)[0]
    present = np.zeros(len(table.judges), dtype=bool)
    present[table.judge] = True  # not a bincount: that would copy the codes to int64 first
    judges = [table.judges[j] for j in np.flatnonzero(present)]
    if len(judges) < 2:  # nothing to compare: an agreement file of no pairs would look like a result
        raise InputError([Problem(", ".join(str(p) for p in paths), None, "judge",
                                  f"only one judge ({', '.join(judges) or 'none'}) in these verdict files; "
                                  "agree compares two or more judges on the same responses")])
    if gold is not None:  # before anything is written: a pattern that names no judge is a typo
        gold_judges(judges, gold, "--gold")
    systems = system_index(table)
    scores = score_table(table, systems=systems)
    require_complete(scores, ", ".join(str(p) for p in paths), allow_incomplete)
    doc = agreement_document(table, scores, systems)
    write_model(Path(out), doc)
    if gold is not None:  # against human verdicts: OUT.calibration.json + OUT.reliability.png
        from gamut_local.reporting.calibration import beside, write_calibration

        write_calibration(table, gold, *beside(Path(out)))
    return doc
