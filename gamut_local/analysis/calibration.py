"""Model judges against human verdicts: accuracy, Cohen's kappa and confusion per judge vs each
human and vs a gold reference, inter-annotator agreement, and how well a judge's label
probabilities are calibrated (reliability bins, expected calibration error), each overall,
per tier and per check kind.

Gold is named by a pattern over judge names (`fnmatch`): `human-*` takes, for each (question,
model, variant, check) cell, the majority label of every human judge who graded it (a tie
leaves the cell without gold, counted in `n_gold_ties`); `gold` takes that one judge. Model
judges are the judges that are neither human (`human-*`) nor gold. A model judge's `invalid`
verdict counts as wrong. Calibration uses the probability the judge gave to the label it
chose, as its confidence that the label is right. All figures at full precision; None with a
reason in `notes` where a statistic is undefined.
"""

from __future__ import annotations

import itertools

import numpy as np

from gamut_local.analysis import stats
from gamut_local.rundir.human import is_gold, is_human
from gamut_local.vocab import JUDGE_LABELS, TIERS, VERDICTS

N_BINS = 10
_CODE = {v: i for i, v in enumerate(VERDICTS)}
# Krippendorff's ordinal scale: contradicts < missing < partially_meets < meets; invalid = no value.
_ORDINAL = np.array([3, 2, 1, 0, -1], dtype=np.int64)
RULES = ("fact", "element", "coverage", "option", "step", "order", "full_order", "relation", "aspect",
         "meta_insight")


def kind_of(check_id: str) -> str:
    """The compiler rule behind a check id (`<item>.<rule>[.<n>]`), or `given` for written checks."""
    parts = check_id.split(".")
    if len(parts) > 2 and parts[-1].isdigit():
        parts = parts[:-1]
    return parts[-1] if len(parts) >= 2 and parts[-1] in RULES else "given"


def _cells(records, keep) -> tuple[dict, dict, list]:
    """codes[judge][cell] and probs[judge][cell] for the judges `keep` accepts; cell info list."""
    index: dict[tuple, int] = {}
    info: list[tuple[str, str]] = []
    codes: dict[str, dict[int, int]] = {}
    probs: dict[str, dict[int, float]] = {}
    for r in records:
        if not keep(r["judge"]):
            continue
        key = (r["question_id"], r["model"], r.get("variant", "multimodal"), r["check_id"])
        cell = index.setdefault(key, len(index))
        if cell == len(info):
            info.append((r["tier"], kind_of(r["check_id"])))
        codes.setdefault(r["judge"], {})[cell] = _CODE[r["verdict"]]
        p = r.get("probs")
        if p and r["verdict"] in p:
            probs.setdefault(r["judge"], {})[cell] = float(p[r["verdict"]])
    return codes, probs, info


def _majority(codes: dict, judges: list[str], n_cells: int) -> tuple[np.ndarray, int]:
    """Gold code per cell (-1 = none): the strict majority of the judges' valid labels."""
    votes = np.zeros((n_cells, len(JUDGE_LABELS)), dtype=np.int64)
    for j in judges:
        for cell, code in codes.get(j, {}).items():
            if code < len(JUDGE_LABELS):
                votes[cell, code] += 1
    top = votes.max(axis=1)
    winners = (votes == top[:, None]).sum(axis=1)
    gold = np.where((top > 0) & (winners == 1), votes.argmax(axis=1), -1)
    return gold, int(((top > 0) & (winners > 1)).sum())


def _vector(codes: dict, judge: str, n_cells: int) -> np.ndarray:
    out = np.full(n_cells, -1, dtype=np.int64)
    got = codes.get(judge, {})
    if got:
        out[np.fromiter(got.keys(), np.int64, len(got))] = np.fromiter(got.values(), np.int64, len(got))
    return out


def compare(reference: np.ndarray, judged: np.ndarray, where: str, notes: dict) -> dict:
    """Accuracy, Cohen's kappa and the confusion (rows: reference, columns: judge; VERDICTS
    order) over the cells both have."""
    both = (reference >= 0) & (judged >= 0)
    conf = stats.confusion_matrix(reference[both], judged[both], len(VERDICTS))
    n = int(both.sum())
    kappa, why = stats.defined(stats.cohen_kappa, conf)
    if why:
        notes[f"{where}.cohen_kappa"] = why
    if not n:
        notes[f"{where}.accuracy"] = "no cell graded by both"
    return {"n": n, "accuracy": float(np.trace(conf) / n) if n else None, "cohen_kappa": kappa,
            "confusion": conf.tolist(), "labels": list(VERDICTS)}


def reliability(confidence: np.ndarray, correct: np.ndarray, n_bins: int = N_BINS) -> dict:
    """Equal-width confidence bins: count, mean confidence and accuracy per bin, and the
    expected calibration error sum_b (n_b / n) |accuracy_b - confidence_b|."""
    n = len(confidence)
    b = np.minimum((confidence * n_bins).astype(np.int64), n_bins - 1)
    count = np.bincount(b, minlength=n_bins)
    conf_sum = np.bincount(b, weights=confidence, minlength=n_bins)
    hit_sum = np.bincount(b, weights=correct.astype(float), minlength=n_bins)
    bins = []
    for k in range(n_bins):
        c = int(count[k])
        bins.append({"low": k / n_bins, "high": (k + 1) / n_bins, "n": c,
                     "confidence": float(conf_sum[k] / c) if c else None,
                     "accuracy": float(hit_sum[k] / c) if c else None})
    ece = float(np.abs(hit_sum - conf_sum).sum() / n) if n else None
    return {"n": n, "ece": ece, "bins": bins}


def _judge_block(judge, codes, probs, gold, humans, groups, n_cells, notes, n_bins) -> dict:
    v = _vector(codes, judge, n_cells)
    block = {"vs_gold": None, "vs_human": {}, "calibration": None}
    if (gold >= 0).any():
        block["vs_gold"] = compare(gold, v, f"{judge}.vs_gold", notes)
        for gname, masks in groups.items():
            block["vs_gold"][f"by_{gname}"] = {
                name: compare(np.where(m, gold, -1), v, f"{judge}.vs_gold.{gname}.{name}", notes)
                for name, m in masks.items() if m.any()}
    for h in humans:
        block["vs_human"][h] = compare(_vector(codes, h, n_cells), v, f"{judge}.vs_human.{h}", notes)
    p = np.full(n_cells, np.nan)
    got = probs.get(judge, {})
    if got:
        p[np.fromiter(got.keys(), np.int64, len(got))] = np.fromiter(got.values(), float, len(got))
    usable = np.isfinite(p) & (gold >= 0) & (v >= 0)
    if not usable.any():
        notes[f"{judge}.calibration"] = "no cell with gold and this judge's label probabilities"
        return block
    correct = v == gold

    def rel(mask, _name=None):
        m = usable & mask
        return reliability(p[m], correct[m], n_bins)

    block["calibration"] = rel(np.ones(n_cells, dtype=bool))
    for gname, masks in groups.items():
        block["calibration"][f"by_{gname}"] = {k: rel(m) for k, m in masks.items() if (usable & m).any()}
    return block


def _inter_annotator(codes, annotators, n_cells, notes) -> dict:
    pairs = []
    for a, b in itertools.combinations(annotators, 2):
        entry = compare(_vector(codes, a, n_cells), _vector(codes, b, n_cells), f"inter_annotator.{a}|{b}", notes)
        pairs.append({"a": a, "b": b, **entry})
    alpha = {}
    data = np.stack([_vector(codes, a, n_cells) for a in annotators]) if annotators else np.zeros((0, 0), int)
    for level in ("nominal", "ordinal"):
        value, why = (None, "needs at least 2 annotators") if len(annotators) < 2 else stats.defined(
            stats.krippendorff_alpha, np.where(data >= 0, _ORDINAL[np.maximum(data, 0)], -1), 4, level)
        alpha[level] = value
        if why:
            notes[f"inter_annotator.krippendorff_alpha.{level}"] = why
    return {"annotators": annotators, "pairs": pairs, "krippendorff_alpha": alpha}


def calibrate_table(table, gold: str = "human-*", n_bins: int = N_BINS) -> dict:
    """`calibrate` over a `data.verdict_table.VerdictTable`: only the rows on cells that a human
    or gold judge graded become records (a few thousand, however large the run)."""
    judges = list(table.judges)
    reference = [i for i, j in enumerate(judges) if is_gold(j, gold) or is_human(j)]
    V, C, M = len(table.variants), max(len(table.checks), 1), max(len(table.models), 1)
    key = ((table.question.astype(np.int64) * M + table.model) * V + table.variant) * C + table.check
    ref_keys = np.unique(key[np.isin(table.judge, reference)])
    rows = np.flatnonzero(np.isin(key, ref_keys))
    records = []
    for i in rows.tolist():
        code, p = int(table.verdict[i]), table.probs[i]
        records.append({"question_id": table.questions[table.question[i]], "model": table.models[table.model[i]],
                        "variant": table.variants[table.variant[i]], "check_id": table.checks[table.check[i]],
                        "judge": judges[table.judge[i]], "tier": TIERS[table.tier[i]], "verdict": VERDICTS[code],
                        "probs": None if np.isnan(p).all() else dict(zip(JUDGE_LABELS, p.tolist()))})
    return calibrate(records, gold, n_bins, judges=judges)


def calibrate(records, gold: str = "human-*", n_bins: int = N_BINS, judges: list[str] | None = None) -> dict:
    """Everything `agree --gold` adds, from verdict dicts of model judges and humans
    (`judges`: every judge of the run, when the records are only those on reference cells)."""
    judges = sorted(set(judges or ()) | {r["judge"] for r in records})
    gold_judges = [j for j in judges if is_gold(j, gold)]
    humans = [j for j in judges if is_human(j)]
    models = [j for j in judges if j not in gold_judges and j not in humans]
    notes: dict[str, str] = {}
    if not gold_judges:
        notes["gold"] = f"no judge matches {gold!r} (judges: {', '.join(judges) or 'none'})"
    reference = set(gold_judges) | set(humans)
    # Only cells some reference graded matter; one pass finds them, a second keeps those.
    ref_cells = {(r["question_id"], r["model"], r.get("variant", "multimodal"), r["check_id"])
                 for r in records if r["judge"] in reference}
    codes, probs, info = _cells(
        (r for r in records if r["judge"] in reference or
         (r["question_id"], r["model"], r.get("variant", "multimodal"), r["check_id"]) in ref_cells),
        lambda j: True)
    n = len(info)
    gold_code, ties = _majority(codes, gold_judges, n)
    tiers = np.array([t for t, _ in info], dtype=object)
    kinds = np.array([k for _, k in info], dtype=object)
    groups = {"tier": {t: tiers == t for t in TIERS},
              "kind": {k: kinds == k for k in sorted(set(kinds.tolist()))}}
    return {
        "gold": gold, "gold_judges": gold_judges, "humans": humans, "model_judges": models,
        "n_cells": n, "n_gold_cells": int((gold_code >= 0).sum()), "n_gold_ties": ties, "n_bins": n_bins,
        "judges": {j: _judge_block(j, codes, probs, gold_code, humans, groups, n, notes, n_bins) for j in models},
        "inter_annotator": _inter_annotator(codes, sorted(reference), n, notes),
        "notes": notes,
    }
