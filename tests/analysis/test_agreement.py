"""`agree` on synthetic multi-judge verdicts, checked against scipy, krippendorff and score.py."""

import json
from collections import Counter

import krippendorff
import numpy as np
import pytest
from scipy import stats as sps

from gamut_local.errors import InputError
from gamut_local.rundir.store import write_jsonl
from gamut_local.data.verdict_table import table_from_records
from gamut_local.reporting.current import agreement_document
from tests.support.scoring import agree_files, agree_records
from tests.support.scoring import score_records
from tests.support.synthetic import make_records
from gamut_local.vocab import VERDICTS

PAIR_KEYS = {"judge_a", "judge_b", "kendall_tau_b", "spearman_rho", "identical_ranking",
             "max_abs_diff", "mean_diff", "adjacent_swaps", "cohen_kappa", "confusion", "n_questions"}
ORDER = {"contradicts": 0, "missing": 1, "partially_meets": 2, "meets": 3}


def _scores(records, judge):
    """System scores as `gamut-local score` computes them, unrounded via response means."""
    res = score_records([r for r in records if r["judge"] == judge], n_boot=10)
    return {(m["model"], m["variant"]): m["gamut_score"] for m in res["models"]}


def _by_key(records, judge):
    return {(r["question_id"], r["model"], r["variant"], r["check_id"]): r["verdict"]
            for r in records if r["judge"] == judge}


@pytest.fixture(scope="module")
def records():
    return make_records(seed=1, models=("m1", "m2", "m3", "m4", "m5", "m6"),
                        variants=("multimodal", "text_only"), questions=25)


@pytest.fixture(scope="module")
def result(records):
    return agree_records(records)


def test_output_has_exactly_the_issue_keys(result):
    assert {"pairs", "krippendorff_alpha", "vs_gold"} <= set(result)
    assert [(p["judge_a"], p["judge_b"]) for p in result["pairs"]] == [
        ("gold", "judge-a"), ("gold", "judge-b"), ("judge-a", "judge-b")]
    for p in result["pairs"]:
        assert set(p) == PAIR_KEYS
    assert set(result["krippendorff_alpha"]) == {"nominal", "ordinal"}
    assert set(result["vs_gold"]) == {"judge-a", "judge-b"}
    for g in result["vs_gold"].values():
        assert set(g) == {"accuracy", "cohen_kappa", "confusion", "score_bias"}
    assert result["notes"] == {}
    json.dumps(result)  # plain JSON types only


def test_rank_statistics_match_scipy_on_score_module_scores(records, result):
    for p in result["pairs"]:
        a, b = _scores(records, p["judge_a"]), _scores(records, p["judge_b"])
        systems = sorted(a)
        x = np.array([a[s] for s in systems])
        y = np.array([b[s] for s in systems])
        # score.py rounds to 0.01 points; rank statistics are unaffected unless two models
        # fall within 0.01, which the fixture avoids.
        assert p["kendall_tau_b"] == pytest.approx(sps.kendalltau(x, y, variant="b").statistic, abs=1e-6)
        assert p["spearman_rho"] == pytest.approx(sps.spearmanr(x, y).statistic, abs=1e-6)
        assert p["mean_diff"] == pytest.approx(np.mean(y - x), abs=0.01)
        assert p["max_abs_diff"] == pytest.approx(np.max(np.abs(y - x)), abs=0.01)
        order = np.argsort(-x, kind="stable")
        swaps = sum(y[order[i]] < y[order[i + 1]] for i in range(len(order) - 1))
        assert p["adjacent_swaps"] == swaps
        assert p["identical_ranking"] == bool((np.argsort(x) == np.argsort(y)).all())


def test_kappa_and_confusion_match_direct_counts(records, result):
    for p in result["pairs"]:
        a, b = _by_key(records, p["judge_a"]), _by_key(records, p["judge_b"])
        shared = sorted(set(a) & set(b))
        counts = Counter((a[k], b[k]) for k in shared)
        conf = np.array(p["confusion"])
        assert conf.shape == (5, 5) and conf.sum() == len(shared)
        for i, vi in enumerate(VERDICTS):
            for j, vj in enumerate(VERDICTS):
                assert conf[i, j] == counts[(vi, vj)]
        n = len(shared)
        p_o = sum(a[k] == b[k] for k in shared) / n
        p_e = sum((sum(a[k] == v for k in shared) / n) * (sum(b[k] == v for k in shared) / n) for v in VERDICTS)
        assert p["cohen_kappa"] == pytest.approx((p_o - p_e) / (1 - p_e), abs=1e-6)


def test_krippendorff_alpha_matches_package(records, result):
    judges = ["gold", "judge-a", "judge-b"]
    maps = [_by_key(records, j) for j in judges]
    keys = sorted(set().union(*maps))
    data = np.array([[ORDER.get(m.get(k), np.nan) if m.get(k) != "invalid" else np.nan for k in keys]
                     for m in maps], dtype=float)
    for level in ("nominal", "ordinal"):
        ref = krippendorff.alpha(reliability_data=data, value_domain=[0, 1, 2, 3], level_of_measurement=level)
        assert result["krippendorff_alpha"][level] == pytest.approx(ref, abs=1e-6)


def test_vs_gold(records, result):
    gold = _by_key(records, "gold")
    gold_scores = _scores(records, "gold")
    for judge, g in result["vs_gold"].items():
        mine = _by_key(records, judge)
        assert g["accuracy"] == pytest.approx(np.mean([gold[k] == mine[k] for k in gold]), abs=1e-6)
        assert np.array(g["confusion"])[:, 4].sum() == sum(v == "invalid" for v in mine.values())
        scores = _scores(records, judge)
        assert g["score_bias"] == pytest.approx(np.mean([scores[s] - gold_scores[s] for s in scores]), abs=0.01)
    # The noisier judge matches people less well.
    assert result["vs_gold"]["judge-a"]["cohen_kappa"] > result["vs_gold"]["judge-b"]["cohen_kappa"]


def test_missing_keys_are_counted_and_pairs_compare_on_shared_keys(records):
    # judge-b graded only the first 15 questions.
    cut = [r for r in records if not (r["judge"] == "judge-b" and r["question_id"] >= "q015")]
    res = agree_records(cut)
    n_keys = len(_by_key(records, "gold"))
    assert res["keys"]["total"] == n_keys
    assert res["keys"]["missing"] == {"gold": 0, "judge-a": 0, "judge-b": n_keys * 10 // 25}
    assert res["keys"]["shared_by_pair"]["gold|judge-b"] == n_keys * 15 // 25
    pair = next(p for p in res["pairs"] if (p["judge_a"], p["judge_b"]) == ("gold", "judge-b"))
    shared = [r for r in records if r["question_id"] < "q015" and r["judge"] in ("gold", "judge-b")]
    a, b = _scores(shared, "gold"), _scores(shared, "judge-b")
    assert pair["mean_diff"] == pytest.approx(np.mean([b[s] - a[s] for s in a]), abs=0.01)


def test_two_models():
    res = agree_records(make_records(seed=2, models=("big", "small"), questions=10))
    for p in res["pairs"]:
        assert p["kendall_tau_b"] in (-1.0, 1.0)
        assert p["spearman_rho"] == pytest.approx(p["kendall_tau_b"])
        assert p["adjacent_swaps"] == (1 if p["kendall_tau_b"] < 0 else 0)


def test_tied_scores_give_null_rank_statistics_with_reason():
    recs = make_records(seed=3, judges=(("judge-a", 1.0), ("judge-b", 1.0)), questions=5)
    for r in recs:
        r["verdict"] = "meets"  # every model scores 100 for both judges
    res = agree_records(recs)
    p = res["pairs"][0]
    assert p["kendall_tau_b"] is None and p["spearman_rho"] is None
    assert "constant" in res["notes"]["pairs[judge-a|judge-b].kendall_tau_b"]
    assert p["identical_ranking"] is True and p["adjacent_swaps"] == 0
    assert p["mean_diff"] == 0.0
    assert p["cohen_kappa"] is None  # one category used by both: chance agreement is 1
    assert "same category" in res["notes"]["pairs[judge-a|judge-b].cohen_kappa"]
    assert res["krippendorff_alpha"] == {"nominal": None, "ordinal": None}
    assert "expected disagreement is 0" in res["notes"]["krippendorff_alpha.nominal"]


def test_judge_always_giving_one_verdict():
    recs = make_records(seed=4, judges=(("gold", 1.0), ("lazy", 1.0)))
    for r in recs:
        if r["judge"] == "lazy":
            r["verdict"] = "missing"
    res = agree_records(recs)
    p = res["pairs"][0]
    assert p["cohen_kappa"] == pytest.approx(0.0, abs=1e-6)  # agrees no better than chance
    assert p["kendall_tau_b"] is None  # lazy gives every model 0
    assert res["vs_gold"]["lazy"]["score_bias"] < 0
    assert np.array(res["vs_gold"]["lazy"]["confusion"])[:, 2].sum() == len(recs) // 2


def test_model_with_no_responses_for_one_judge_is_left_out_with_note():
    recs = make_records(seed=5, judges=(("judge-a", 0.9), ("judge-b", 0.9)))
    recs = [r for r in recs if not (r["judge"] == "judge-b" and r["model"] == "m-tiny")]
    res = agree_records(recs)
    assert "m-tiny/multimodal" in res["notes"]["pairs[judge-a|judge-b].systems_left_out"]
    a, b = _scores(recs, "judge-a"), _scores(recs, "judge-b")
    x = [a[s] for s in sorted(b)]
    y = [b[s] for s in sorted(b)]
    assert res["pairs"][0]["kendall_tau_b"] == pytest.approx(sps.kendalltau(x, y).statistic, abs=1e-6)


def test_judges_that_share_no_keys():
    a = make_records(seed=6, judges=(("judge-a", 1.0),), models=("m1", "m2"))
    b = make_records(seed=7, judges=(("judge-b", 1.0),), models=("m3", "m4"))
    res = agree_records(a + b)
    p = res["pairs"][0]
    assert p["cohen_kappa"] is None and p["kendall_tau_b"] is None and p["mean_diff"] is None
    assert np.array(p["confusion"]).sum() == 0
    assert "share no" in res["notes"]["pairs[judge-a|judge-b]"]
    assert res["krippendorff_alpha"]["nominal"] is None
    assert "two raters" in res["notes"]["krippendorff_alpha.nominal"]


def test_one_judge_gives_defined_output():
    """`agree` refuses one judge (an empty comparison would look like a result); the panel
    itself still gives defined output for it."""
    records = make_records(seed=8, judges=(("judge-a", 1.0),))
    with pytest.raises(InputError, match="only one judge"):
        agree_records(records)
    res = agreement_document(table_from_records(records)).model_dump(mode="json")
    assert res["pairs"] == [] and res["vs_gold"] == {}
    assert res["notes"]["pairs"] == "needs at least 2 judges, got 1"
    assert res["krippendorff_alpha"] == {"nominal": None, "ordinal": None}


def test_tier_disagreement_is_an_input_error():
    recs = make_records(seed=9, judges=(("judge-a", 1.0), ("judge-b", 1.0)), questions=2)
    bad = next(r for r in recs if r["judge"] == "judge-b" and r["tier"] == "context")
    bad["tier"] = "valuable"
    with pytest.raises(InputError, match="disagree on the tier"):
        agree_records(recs)


def test_agree_files_and_cli(gamut, tmp_path, records):
    paths = []
    for judge in ("gold", "judge-a", "judge-b"):
        p = tmp_path / "verdicts" / judge / "all.jsonl"
        write_jsonl(p, [r for r in records if r["judge"] == judge])
        paths.append(p)
    assert agree_files(paths)["pairs"] == agree_records(records)["pairs"]
    out = tmp_path / "agreement.json"
    res = gamut("agree", *paths, "--out", str(out))
    assert res.exit_code == 0, res.output
    assert json.loads(out.read_text())["krippendorff_alpha"] == agree_records(records)["krippendorff_alpha"]
    assert "gold vs judge-a" in res.output

    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"question_id": "q1", "model": "m", "judge": "j", "check_id": "c", '
                      '"tier": "answer_critical", "verdict": "great"}\nnot json\n')
    res = gamut("agree", paths[0], broken, "--out", tmp_path / "x.json")
    assert res.exit_code == 1
    assert f"{broken}:2:" in res.output and f"{broken}:1: verdict" in res.output
    assert "Traceback" not in res.output and not (tmp_path / "x.json").exists()


def test_pair_scores_are_what_the_rank_statistics_used(records, result):
    for p, ps in zip(result["pairs"], result["pair_scores"]):
        assert (ps["judge_a"], ps["judge_b"]) == (p["judge_a"], p["judge_b"])
        x = [m["a"] for m in ps["models"]]
        y = [m["b"] for m in ps["models"]]
        assert len(x) == 12
        assert p["kendall_tau_b"] == pytest.approx(sps.kendalltau(x, y).statistic, abs=1e-6)
        assert p["mean_diff"] == pytest.approx(np.mean(np.subtract(y, x)), abs=1e-3)
