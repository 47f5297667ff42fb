"""Whether an analysis output is current: the one rule every stage that reads another's
output follows (`same_inputs`). `score` and `agree` record in `scores.json` and
`agreement.json` the identity of every input file (path, size, mtime, sha256:
`rundir.identity.file_record`) and the settings that change the result; an output is current
while each recorded input is still the file wanted, with the same content (rehashed only when
its size or mtime changed, as git's index does: `rundir.identity.current_record`), and the
settings are the ones asked for. `report` reads such outputs, and runs the computation again
only for what is missing or not current.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from pydantic import ValidationError

from gamut_local.analysis.agreement import agree_panel, panel_from_table
from gamut_local.analysis.outputs import AgreementFile, ScoresFile
from gamut_local.analysis.scoring import Scores, domain_rows, model_rows, score_table, scores_from_columns, system_index
from gamut_local.data.reading import read_responses
from gamut_local.data.verdict_table import VerdictTable
from gamut_local.rundir.identity import current_record
from gamut_local.vocab import SMALL_POOL_MAX, TIERS, VERDICTS


def same_inputs(recorded: list[dict], wanted: list[Path]) -> bool:
    """The rule: an output is current while the inputs it records (`rundir.identity.file_record`)
    are exactly the files wanted now (paths resolved), each with the content hash recorded."""
    if {str(Path(r["path"]).resolve()) for r in recorded} != {str(Path(p).resolve()) for p in wanted}:
        return False
    for old in recorded:
        now = current_record(old)
        if now is None or now["sha256"] != old["sha256"]:
            return False
    return True


def current_scores(scores_json: Path, paths: list[Path], dataset: Path | None, *,
                        seed: int, n_boot: int, answers: list[Path] = (),
                        small_pool_max: int = SMALL_POOL_MAX) -> tuple[ScoresFile, Scores] | None:
    """The scores file and its response scores, if current for these inputs; else None."""
    try:
        doc = ScoresFile.model_validate_json(Path(scores_json).read_bytes())
    except (OSError, ValidationError, ValueError):
        return None
    if (doc.bootstrap.seed, doc.bootstrap.n_boot) != (seed, n_boot) or doc.responses_file is None:
        return None
    if dataset is not None and doc.compile != {"small_pool_max": small_pool_max}:
        return None
    want_dataset = [] if dataset is None else [dataset]
    have_dataset = [] if doc.dataset is None else [doc.dataset.model_dump()]
    if not same_inputs([i.model_dump() for i in doc.inputs], paths) or \
            not same_inputs(have_dataset, want_dataset) or \
            not same_inputs([i.model_dump() for i in doc.answers], list(answers)):
        return None
    try:
        responses = Path(scores_json).with_name(doc.responses_file)  # a name, never a path
    except ValueError:
        return None
    scores = _responses_as_scores(responses, doc) if responses.is_file() else None
    return None if scores is None else (doc, scores)


RESPONSE_COLUMNS = {"judge", "model", "variant", "question_id", "domain", "score", *TIERS,
                    *(f"n_{verdict}" for verdict in VERDICTS), "n_expected", "complete"}
# What reading a damaged per-response file can raise (pyarrow's errors subclass these).
_UNREADABLE = (OSError, ValueError, KeyError, TypeError, IndexError, NotImplementedError)


def _responses_as_scores(path: Path, doc: ScoresFile) -> Scores | None:
    """The Scores a per-response file holds, if it is the file `doc` describes: readable, the
    columns `write_responses` writes, and every row of `doc` (all but the bootstrap CIs)
    recomputed from it as written. Else None: a damaged or hand-edited file is not current,
    and the caller computes the scores again from the verdicts."""
    try:
        cols = read_responses(path)
        if set(cols) != RESPONSE_COLUMNS:
            return None
        scores = scores_from_columns(cols, list(doc.judges), seed=doc.bootstrap.seed, n_boot=doc.bootstrap.n_boot,
                                     formula=doc.formula.model_dump(), from_dataset=doc.coverage_from == "dataset")
    except _UNREADABLE:
        return None
    written = doc.model_dump(mode="json")
    # Bootstrap CIs and corrected estimates are not in the per-response file.
    rows = [{k: v for k, v in row.items() if k != "ci95"} for row in model_rows(scores, boot=np.empty(0))]
    if rows != [{k: v for k, v in row.items() if k not in ("ci95", "corrected")} for row in written["models"]] \
            or domain_rows(scores) != written["domains"]:
        return None
    return scores


def current_agreement(path: Path, paths: list[Path]) -> AgreementFile | None:
    """The agreement file, if current for these verdict inputs; else None."""
    try:
        doc = AgreementFile.model_validate_json(Path(path).read_bytes())
    except (OSError, ValidationError, ValueError):
        return None
    return doc if same_inputs([i.model_dump() for i in doc.inputs], paths) else None


def agreement_document(table: VerdictTable, scores: Scores | None = None,
                       systems: tuple | None = None) -> AgreementFile:
    """Agreement of the table's judges; `scores`: the table's response scores, if at hand
    (without a dataset the expected grid is what the verdicts imply: `coverage_from`), and
    `systems` its `system_index`, which both take (11 ms at paper scale)."""
    systems = systems or system_index(table)
    scores = score_table(table, systems=systems) if scores is None else scores
    result = agree_panel(panel_from_table(table, systems), scores)
    return AgreementFile(inputs=table.inputs, **result)
