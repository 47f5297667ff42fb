"""Calibration against human verdicts, checked against direct per-cell computations and the
`krippendorff` package."""

from __future__ import annotations

import krippendorff
import numpy as np
import pytest

from gamut_local.analysis.calibration import calibrate, kind_of, reliability
from gamut_local.vocab import JUDGE_LABELS, TIERS, VERDICTS

CHECKS = ["id.fact", "list.element.1", "list.element.2", "pool.option.3", "steps.order", "x.meta_insight"]


def _records(seed=0, cells=300, humans=("human-a", "human-b", "human-c")):
    """A model judge with probabilities and three humans who mostly agree with a hidden truth."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(cells):
        base = {"question_id": f"q{i // len(CHECKS)}", "model": "m", "variant": "multimodal",
                "check_id": CHECKS[i % len(CHECKS)], "tier": TIERS[i % 3]}
        truth = int(rng.integers(0, 4))
        for h in humans:
            if rng.random() < 0.1:  # a human skips a cell now and then
                continue
            label = truth if rng.random() < 0.8 else int(rng.integers(0, 4))
            out.append({**base, "judge": h, "verdict": JUDGE_LABELS[label]})
        label = truth if rng.random() < 0.7 else int(rng.integers(0, 5))
        p = rng.dirichlet(np.ones(4))
        probs = None if label == 4 else {lab: float(x) for lab, x in zip(JUDGE_LABELS, p)}
        out.append({**base, "judge": "judge-x", "verdict": VERDICTS[label], "probs": probs})
    return out


def _by_cell(records):
    cells = {}
    for r in records:
        cells.setdefault((r["question_id"], r["check_id"]), {})[r["judge"]] = r
    return cells


def _gold(judges: dict, humans) -> str | None:
    votes = [judges[h]["verdict"] for h in humans if h in judges]
    if not votes:
        return None
    counts = {v: votes.count(v) for v in set(votes)}
    best = max(counts.values())
    top = [v for v, c in counts.items() if c == best]
    return top[0] if len(top) == 1 else None


def test_accuracy_confusion_and_ece_match_a_direct_computation():
    records = _records()
    humans = ("human-a", "human-b", "human-c")
    got = calibrate(records, gold="human-*")
    assert got["model_judges"] == ["judge-x"] and got["humans"] == list(humans)
    pairs = [(_gold(j, humans), j["judge-x"]) for j in _by_cell(records).values()]
    scored = [(g, x) for g, x in pairs if g is not None]
    assert got["n_gold_cells"] == len(scored)
    assert got["n_gold_ties"] == sum(1 for (g, _), j in zip(pairs, _by_cell(records).values())
                                     if g is None and any(h in j for h in humans))
    block = got["judges"]["judge-x"]["vs_gold"]
    assert block["accuracy"] == pytest.approx(np.mean([g == x["verdict"] for g, x in scored]), abs=1e-15)
    conf = np.zeros((5, 5), int)
    for g, x in scored:
        conf[VERDICTS.index(g), VERDICTS.index(x["verdict"])] += 1
    assert block["confusion"] == conf.tolist()
    # ECE by its definition, bin by bin.
    rows = [(x["probs"][x["verdict"]], g == x["verdict"]) for g, x in scored if x["probs"]]
    ece = 0.0
    for k in range(10):
        b = [(c, ok) for c, ok in rows if min(int(c * 10), 9) == k]
        if b:
            ece += len(b) / len(rows) * abs(np.mean([ok for _, ok in b]) - np.mean([c for c, _ in b]))
    cal = got["judges"]["judge-x"]["calibration"]
    assert cal["n"] == len(rows) and cal["ece"] == pytest.approx(ece, abs=1e-12)
    assert set(cal["by_tier"]) == set(TIERS) and set(block["by_kind"]) == {kind_of(c) for c in CHECKS}
    assert sum(b["n"] for b in block["by_tier"].values()) == block["n"]


def test_inter_annotator_alpha_matches_the_krippendorff_package():
    records = _records(seed=3)
    got = calibrate(records)["inter_annotator"]
    humans = ["human-a", "human-b", "human-c"]
    cells = list(_by_cell(records).values())
    order = {"meets": 3, "partially_meets": 2, "missing": 1, "contradicts": 0}
    data = np.array([[order[c[h]["verdict"]] if h in c else np.nan for c in cells] for h in humans])
    for level in ("nominal", "ordinal"):
        assert got["krippendorff_alpha"][level] == pytest.approx(
            krippendorff.alpha(reliability_data=data, level_of_measurement=level), abs=1e-12)
    ab = next(p for p in got["pairs"] if (p["a"], p["b"]) == ("human-a", "human-b"))
    both = [c for c in cells if "human-a" in c and "human-b" in c]
    assert ab["n"] == len(both)
    assert ab["accuracy"] == pytest.approx(np.mean([c["human-a"]["verdict"] == c["human-b"]["verdict"]
                                                   for c in both]), abs=1e-15)


def test_a_named_gold_judge_and_ties():
    base = {"question_id": "q", "model": "m", "variant": "multimodal", "tier": "valuable"}
    records = [
        {**base, "check_id": "a.fact", "judge": "human-a", "verdict": "meets"},
        {**base, "check_id": "a.fact", "judge": "human-b", "verdict": "missing"},  # tie: no gold
        {**base, "check_id": "a.fact", "judge": "j", "verdict": "meets"},
        {**base, "check_id": "b.fact", "judge": "human-a", "verdict": "missing"},
        {**base, "check_id": "b.fact", "judge": "j", "verdict": "missing"},
        {**base, "check_id": "c.fact", "judge": "j", "verdict": "meets"},  # no human: left out
    ]
    got = calibrate(records)
    assert (got["n_gold_cells"], got["n_gold_ties"], got["n_cells"]) == (1, 1, 2)
    assert got["judges"]["j"]["vs_gold"]["accuracy"] == 1.0
    assert got["judges"]["j"]["vs_human"]["human-b"]["accuracy"] == 0.0
    assert got["judges"]["j"]["calibration"] is None and "j.calibration" in got["notes"]
    named = calibrate([{**r, "judge": "gold"} if r["judge"] == "human-b" else r for r in records], gold="gold")
    assert named["gold_judges"] == ["gold"] and named["judges"]["j"]["vs_gold"]["accuracy"] == 0.0
    assert "gold" in calibrate(records, gold="nobody")["notes"]


def test_reliability_of_a_perfectly_calibrated_judge_is_near_zero():
    rng = np.random.default_rng(0)
    conf = rng.uniform(0.25, 1.0, 200_000)
    r = reliability(conf, rng.random(len(conf)) < conf)
    assert r["ece"] < 0.01 and sum(b["n"] for b in r["bins"]) == len(conf)
    assert reliability(np.full(100, 0.9), np.zeros(100, bool))["ece"] == pytest.approx(0.9)


@pytest.mark.parametrize("check_id, kind", [("id.fact", "fact"), ("list.element.3", "element"),
                                            ("pool.coverage", "coverage"), ("pool.coverage.4", "coverage"),
                                            ("p.full_order", "full_order"), ("free-text-1", "given"),
                                            ("a.b.step.2", "step"), ("x.y", "given")])
def test_kind_of(check_id, kind):
    assert kind_of(check_id) == kind


def test_the_table_path_gives_the_records_path_result():
    from gamut_local.analysis.calibration import calibrate_table
    from gamut_local.data.verdict_table import table_from_records

    records = _records(seed=5)
    # A judge that graded no human-annotated cell is still listed as a model judge.
    records += [{"question_id": "elsewhere", "model": "m", "variant": "multimodal", "check_id": "id.fact",
                 "tier": "valuable", "judge": "judge-y", "verdict": "meets"}]
    assert calibrate_table(table_from_records(records)) == calibrate(records)
