"""Agreement between people (`analysis.human_agreement`) equal to the `krippendorff` package and
scikit-learn's `cohen_kappa_score`, on random data and on the edges (all agree, one label,
missing cells)."""

import itertools
import warnings

import krippendorff
import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from gamut_local.analysis.agreement import ORDINAL_CODE
from gamut_local.analysis.human_agreement import agreement, cohen_kappa, krippendorff_alpha
from gamut_local.vocab import VERDICTS

INVALID = VERDICTS.index("invalid")


def _package_alpha(codes, level):
    scale = np.where((codes >= 0) & (codes != INVALID), ORDINAL_CODE[np.clip(codes, 0, INVALID)], -1)
    data = np.where(scale >= 0, scale, np.nan).astype(float)
    return krippendorff.alpha(reliability_data=data, level_of_measurement=level, value_domain=[0, 1, 2, 3])


def _random(seed, people=3, cells=200, missing=0.3, agree=0.7):
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 4, cells)
    codes = np.where(rng.random((people, cells)) < agree, truth, rng.integers(0, 4, (people, cells)))
    codes[rng.random((people, cells)) < missing] = -1
    return codes


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("people", [2, 3, 5])
def test_alpha_and_kappa_equal_the_packages_on_random_data(seed, people):
    codes = _random(seed, people)
    codes[0, :5] = INVALID  # says nothing about the response: no value
    alpha, notes = krippendorff_alpha(codes)
    assert not notes
    for level in ("nominal", "ordinal"):
        assert alpha[level] == pytest.approx(_package_alpha(codes, level), abs=1e-12)
    for i, j in itertools.combinations(range(people), 2):
        pair, why = cohen_kappa(codes[i], codes[j])
        both = (codes[i] >= 0) & (codes[i] != INVALID) & (codes[j] >= 0) & (codes[j] != INVALID)
        assert why is None and pair["n"] == both.sum()
        assert pair["cohen_kappa"] == pytest.approx(cohen_kappa_score(codes[i][both], codes[j][both]), abs=1e-12)
        assert pair["agreement"] == pytest.approx(np.mean(codes[i][both] == codes[j][both]))


def test_full_agreement_on_several_labels_is_one():
    codes = np.tile(np.array([0, 1, 2, 3, 0, 2]), (2, 1))
    alpha, _ = krippendorff_alpha(codes)
    assert alpha == {"nominal": 1.0, "ordinal": 1.0} and _package_alpha(codes, "nominal") == pytest.approx(1.0)
    assert cohen_kappa(codes[0], codes[1])[0]["cohen_kappa"] == pytest.approx(cohen_kappa_score(codes[0], codes[1]))


def test_one_label_for_every_cell_is_undefined_as_the_packages_say():
    codes = np.zeros((2, 10), dtype=int)
    alpha, notes = krippendorff_alpha(codes)
    assert alpha == {"nominal": None, "ordinal": None} and set(notes) == {"nominal", "ordinal"}
    with pytest.warns(RuntimeWarning):  # the package divides 0 by 0: NaN
        assert np.isnan(_package_alpha(codes, "nominal"))
    pair, why = cohen_kappa(codes[0], codes[1])
    assert pair["cohen_kappa"] is None and "one and the same" in why and pair["agreement"] == 1.0
    with warnings.catch_warnings():  # scikit-learn warns and gives NaN
        warnings.simplefilter("ignore")
        assert np.isnan(cohen_kappa_score(codes[0], codes[1]))


def test_missing_cells_and_no_shared_cell():
    a = np.array([0, 1, -1, -1, 2, 3])
    b = np.array([-1, -1, 2, 3, -1, -1])
    pair, why = cohen_kappa(a, b)
    assert pair == {"n": 0, "agreement": None, "cohen_kappa": None} and why
    alpha, notes = krippendorff_alpha(np.stack([a, b]))
    assert alpha["nominal"] is None and "two raters" in notes["nominal"]
    out = agreement(np.stack([a, b, a]), ["x", "y", "z"])
    assert [(p["a"], p["b"]) for p in out["pairs"]] == [("x", "z")]  # y shares no cell with anyone


def test_agreement_counts_shared_cells_and_disagreements():
    codes = np.array([[0, 1, 2, -1, 3],
                      [0, 2, -1, 1, 3],
                      [-1, -1, 1, 1, -1]])
    out = agreement(codes, ["a", "b", "c"])
    assert out["n_cells"] == 5 and out["disagreements"] == 2  # cells 1 (1 vs 2) and 2 (2 vs 1)
    assert {(p["a"], p["b"]): p["n"] for p in out["pairs"]} == {("a", "b"): 3, ("a", "c"): 1, ("b", "c"): 1}
    assert out["krippendorff_alpha"]["nominal"] == pytest.approx(_package_alpha(codes, "nominal"))


def test_one_person_has_no_alpha():
    alpha, notes = krippendorff_alpha(np.array([[0, 1, 2]]))
    assert alpha == {"nominal": None, "ordinal": None} and "at least 2" in notes["nominal"]


def test_a_judge_that_agrees_with_people_more_than_they_agree_is_flagged():
    from gamut_local.analysis.human_agreement import overlap_agreement
    from gamut_local.rundir.assignments import Assignments

    rng = np.random.default_rng(0)
    responses = {("m", "multimodal", f"q{i}"): ("ann", "bea") for i in range(30)}
    responses[("m", "multimodal", "solo")] = ("ann",)
    a = Assignments("s", "s-1", 0.5, 1, ("ann", "bea"), responses)
    truth = rng.integers(0, 4, (30, 5))
    records, judge = [], {}
    for i in range(30):
        for c in range(5):
            cell = ("m", "multimodal", f"q{i}", f"c{c}")
            noisy = truth[i, c] if rng.random() < 0.5 else rng.integers(0, 4)  # bea is careless
            for who, v in (("ann", truth[i, c]), ("bea", noisy)):
                records.append({"model": "m", "variant": "multimodal", "question_id": f"q{i}", "check_id": f"c{c}",
                                "judge": f"human-{who}", "tier": "answer_critical", "verdict": VERDICTS[v],
                                "sample_id": "s-1"})
            judge[cell] = int(truth[i, c]) if rng.random() < 0.9 else int(rng.integers(0, 4))
    records.append({**records[0], "question_id": "solo", "judge": "human-ann"})  # not on the overlap
    records.append({**records[0], "question_id": "q0", "check_id": "c9", "sample_id": "another"})  # not its queue
    out = overlap_agreement(a, records, "s-1", {"ann": set(responses), "bea": set()}, {"good": judge})
    assert out["overlap_responses"] == 30 and out["overlap_graded"] == 0 and out["n_cells"] == 150
    k_ab = cohen_kappa_score([VERDICTS.index(r["verdict"]) for r in records[0:300:2]],
                             [VERDICTS.index(r["verdict"]) for r in records[1:300:2]])
    assert out["people_kappa"] == pytest.approx(k_ab)
    codes = [judge[("m", "multimodal", f"q{i}", f"c{c}")] for i in range(30) for c in range(5)]
    k_j = np.mean([cohen_kappa_score(codes, [VERDICTS.index(r["verdict"]) for r in records[k:300:2]])
                   for k in (0, 1)])
    assert out["judge_vs_people"]["good"] == pytest.approx(k_j) and out["noisier_truth"] == ["good"]
    assert out["unadjudicated"] == out["disagreements"] > 0
