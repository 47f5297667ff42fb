"""The overview's live corrected leaderboard: each model judge's scores corrected by the human
verdicts made so far in a calibration sample's queue (`analysis.correction`, the estimator
`score --correct-with 'human-*'` uses), recomputed when a human verdict is written.

Judge side: the model judges' current verdicts the viewer holds; gold side: the human judges'
current verdicts made for the sample (`sample_id`), newest per cell, stale ones left out. The
numbers match what `score-run --correct-with 'human-*'` would write from the same files.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from gamut_local.data.reading import expected_checks
from gamut_local.errors import InputError
from gamut_local.rundir.human import is_human
from gamut_local.rundir.layout import verdicts_path
from gamut_local.viewer.index import RunIndex
from gamut_local.vocab import TIERS, VARIANTS, VERDICTS

GOLD = "human-*"


def _table(index: RunIndex, records: list[dict]):
    """The model judges' verdicts and `records` as one table of codes (what
    `analysis.scoring.score_table` reads). A person's verdict on a check no model judge graded
    is in it too, as `score-run` reads it: it counts towards their having graded the response
    in full (`analysis.correction.graded_in_full`), as the viewer's progress counts it."""
    v = index.verdicts
    humans = sorted({r["judge"] for r in records})
    judges = list(v.judges) + humans
    models = sorted({m for m, _ in v.systems} | {r["model"] for r in records})
    m_of, j_of = {m: i for i, m in enumerate(models)}, {j: i for i, j in enumerate(judges)}
    sys_model = np.array([m_of[m] for m, _ in v.systems] + [0], dtype=np.int32)
    sys_variant = np.array([VARIANTS.index(va) for _, va in v.systems] + [0], dtype=np.int8)
    questions, checks = list(index.question_ids), list(v.checks)
    q_of, c_of = dict(index.q_index), dict(index.c_index)
    for r in records:  # names the model judges' verdicts lack are coded after theirs
        if r["question_id"] not in q_of:
            q_of[r["question_id"]] = len(questions)
            questions.append(r["question_id"])
        if r["check_id"] not in c_of:
            c_of[r["check_id"]] = len(checks)
            checks.append(r["check_id"])

    def codes(of, dtype) -> np.ndarray:
        return np.array([of(r) for r in records], dtype=dtype)
    cat = np.concatenate
    return SimpleNamespace(
        judges=judges, models=models, questions=questions, checks=checks,
        judge=cat([v.j, codes(lambda r: j_of[r["judge"]], np.int32)]),
        model=cat([sys_model[v.s], codes(lambda r: m_of[r["model"]], np.int32)]),
        variant=cat([sys_variant[v.s], codes(lambda r: VARIANTS.index(r["variant"]), np.int8)]),
        question=cat([v.q, codes(lambda r: q_of[r["question_id"]], np.int32)]),
        check=cat([v.c, codes(lambda r: c_of[r["check_id"]], np.int32)]),
        tier=cat([v.tier, codes(lambda r: TIERS.index(r["tier"]), np.int8)]),
        verdict=cat([v.code, codes(lambda r: VERDICTS.index(r["verdict"]), np.int8)]))


def sample_board(index: RunIndex, name: str) -> dict:
    """Per model judge: each system's judge-only, corrected and human-only scores with CIs, the
    bias and how many responses are labeled, from the human verdicts made so far."""
    from gamut_local.analysis.correction import correct
    from gamut_local.analysis.design import check_sample
    from gamut_local.analysis.scoring import score_table
    from gamut_local.reporting.correction import jury_records, with_team

    design = index.samples[name]
    # The sample's checks read every newest human verdict, stale ones too, as `score-run`'s do
    # (one made elsewhere keeps its response out of the queue); the scores only current ones.
    every = [r for judge, cells in index.humans.items() if is_human(judge) for r in cells.values()]
    records = [r for r in every if not index.is_stale(r)]
    out = {"name": name, "sample_id": design.sample_id, "notes": [], "judges": {}, "error": None}
    try:  # the checks `score --correct-with` makes: where they fail, no numbers, the reason instead
        where = [(str(verdicts_path(index.run_dir, r["judge"], r["model"], r["variant"])), None) for r in every]
        checked = check_sample(design, every, where, GOLD, jury_records(index.run_dir))
        # A team's assignment says whose labels a response several people graded takes.
        checked = with_team(checked, [index.run_dir], every)
    except InputError as e:
        out["error"] = "; ".join(map(str, e.problems))
        return out
    out["notes"] = list(checked.notes)
    if not any(r.get("sample_id") == design.sample_id for r in records):
        out["error"] = "no human verdicts in this sample's queue yet"
        return out
    scores = score_table(_table(index, records), expected=expected_checks(index.current_checks))
    try:
        rows, block = correct(scores, checked, GOLD, name)
    except InputError as e:  # the `correct` extra is not installed
        out["error"] = str(e.problems[0])
        return out
    out["notes"] = block["notes"]
    for (j, s), row in sorted(rows.items()):
        model, variant = scores.systems[s]
        out["judges"].setdefault(scores.judges[j], []).append(
            {"model": model, "variant": variant, **{k: row[k] for k in (
                "judge_only", "score", "ci_low", "ci_high", "human_only", "human_only_ci_low",
                "human_only_ci_high", "n_labeled", "n_total", "bias", "method", "reason")}})
    for board in out["judges"].values():
        board.sort(key=lambda r: (r["score"] is None, -(r["score"] or 0.0), r["model"], r["variant"]))
    return out


def live_boards(index: RunIndex) -> list[dict]:
    """`sample_board` for each of the run's samples, computed again only after a verdict is
    written (`RunIndex.humans_version`)."""
    got = index.computed.get("live_boards")
    if got is None or got[0] != index.humans_version:
        got = index.computed["live_boards"] = (index.humans_version,
                                               [sample_board(index, n) for n in sorted(index.samples)])
    return got[1]
