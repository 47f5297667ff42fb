"""`score --correct-with`: each model judge's rows gain PPI++ corrected scores from a human's
verdicts on the recorded random sample, and only on it."""

import json

import numpy as np
import pytest

from gamut_local.analysis.correction import estimate_on
from gamut_local.analysis.metrics import score_responses
from tests.support.simulate import sampled_cells, simulate, write_verdicts

KEYS = {"judge", "gold", "sample_id", "score", "ci_low", "ci_high", "human_only", "human_only_ci_low",
        "human_only_ci_high", "n_labeled", "n_total", "bias", "judge_only", "method", "reason", "tiers"}


@pytest.fixture
def run(tmp_path, gamut):
    sim = simulate(4, n_questions=120)
    write_verdicts(sim, tmp_path, "lenient")
    assert gamut("sample", tmp_path, "--responses", 30, "--seed", 2).exit_code == 0
    design = json.loads((tmp_path / "samples" / "calibration.json").read_text())
    return sim, tmp_path, design


def _score(gamut, run_dir, *extra):
    out = run_dir / "out" / "scores.json"
    files = sorted((run_dir / "verdicts").glob("*/*.jsonl"))
    r = gamut("score", *files, "--out", out, *extra)
    return r, (json.loads(out.read_text()) if r.exit_code == 0 else None)


def _corrected(gamut, run_dir):
    return _score(gamut, run_dir, "--correct-with", "human-*", "--sample", run_dir / "samples" / "calibration.json")


def test_corrected_rows_are_the_estimator_on_the_sampled_fully_graded_responses(gamut, run):
    sim, run_dir, design = run
    cells = sampled_cells(sim, design)
    write_verdicts(sim, run_dir, None, "human-ann", cells, design)
    r, doc = _corrected(gamut, run_dir)
    assert r.exit_code == 0, r.output
    judge, _ = sim.response_scores(score_responses, "lenient")
    truth, _ = sim.response_scores(score_responses)
    for row in doc["models"]:
        c = row["corrected"]
        if row["judge"] == "human-ann":
            assert c is None
            continue
        s = sim.systems.index(row["model"])
        assert set(c) == KEYS and (c["judge"], c["gold"], c["sample_id"]) == ("lenient", "human-ann", design["sample_id"])
        want = estimate_on(judge[s], np.where(cells[s], truth[s], np.nan), cells[s])
        assert {k: c[k] for k in want} == want  # full precision, bit for bit
        assert c["judge_only"] == pytest.approx(row["gamut_score"], abs=1e-9)
        assert set(c["tiers"]) == {"answer_critical", "valuable", "context"}
    assert doc["correction"]["gold_judges"] == ["human-ann"] and doc["correction"]["per"] == "model"
    assert len(doc["correction"]["differences"]) == 6  # 4 systems: 6 pairs, one judge
    assert "corrected" in r.output


def test_labels_outside_the_sample_or_on_part_of_a_response_do_not_count(gamut, run):
    sim, run_dir, design = run
    cells = sampled_cells(sim, design)
    write_verdicts(sim, run_dir, None, "human-ann", cells, design)
    _, before = _corrected(gamut, run_dir)
    # The disagreement queue's labels: responses outside the random sample, graded in full.
    write_verdicts(sim, run_dir, None, "human-queue", ~cells & (np.arange(120) % 3 == 0)[None, :])
    # One sampled response of sys-0 graded only in part.
    path = run_dir / "verdicts" / "human-ann" / "sys-0.multimodal.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[1:]))
    r, after = _corrected(gamut, run_dir)
    assert r.exit_code == 0, r.output
    rows = {(m["judge"], m["model"]): m["corrected"] for m in after["models"]}
    old = {(m["judge"], m["model"]): m["corrected"] for m in before["models"]}
    assert rows[("lenient", "sys-0")]["n_labeled"] == old[("lenient", "sys-0")]["n_labeled"] - 1
    for s in ("sys-1", "sys-2", "sys-3"):
        new = {k: v for k, v in rows[("lenient", s)].items() if k != "gold"}
        assert new == {k: v for k, v in old[("lenient", s)].items() if k != "gold"}


def test_a_sampled_response_graded_in_another_queue_is_not_labeled_and_is_noted(gamut, run):
    """The disagreement queue chooses what people see: a drawn response that a human graded
    there (no sample_id) counts only once graded in the sample's queue."""
    sim, run_dir, design = run
    cells = sampled_cells(sim, design)
    write_verdicts(sim, run_dir, None, "human-ann", cells, design)
    _, before = _corrected(gamut, run_dir)
    path = run_dir / "verdicts" / "human-ann" / "sys-1.multimodal.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    first = json.loads(lines[0])
    del first["sample_id"], first["inclusion_probability"]  # as the disagreement queue writes it
    path.write_text("".join(lines[1:]) + json.dumps(first) + "\n")
    r, after = _corrected(gamut, run_dir)
    assert r.exit_code == 0, r.output
    row = {m["model"]: m["corrected"] for m in after["models"] if m["judge"] == "lenient"}
    old = {m["model"]: m["corrected"] for m in before["models"] if m["judge"] == "lenient"}
    assert row["sys-1"]["n_labeled"] == old["sys-1"]["n_labeled"] - 1
    assert row["sys-2"] == old["sys-2"]
    assert before["correction"]["notes"] == []
    assert after["correction"]["notes"] and "human-ann: 1 verdicts made outside" in after["correction"]["notes"][0]
    assert "outside the calibration sample" in r.output


def test_a_verdict_claiming_the_sample_on_a_response_it_did_not_draw_is_refused(gamut, run):
    sim, run_dir, design = run
    cells = sampled_cells(sim, design)
    write_verdicts(sim, run_dir, None, "human-ann", cells, design)
    path = run_dir / "verdicts" / "human-ann" / "sys-0.multimodal.jsonl"
    drawn = {r["question_id"] for r in design["responses"] if r["model"] == "sys-0"}
    other = next(q for q in sim.questions if q not in drawn)
    rec = {**json.loads(path.read_text().splitlines()[0]), "question_id": other}
    with path.open("a") as f:
        f.write(json.dumps(rec) + "\n")
    r, doc = _corrected(gamut, run_dir)
    assert r.exit_code == 1 and doc is None
    assert str(path) in r.output and "sample_id" in r.output and "did not draw" in r.output


def test_a_system_without_labels_is_null_with_a_reason(gamut, run):
    sim, run_dir, design = run
    cells = sampled_cells(sim, design)
    cells[2] = False
    write_verdicts(sim, run_dir, None, "human-ann", cells, design)
    r, doc = _corrected(gamut, run_dir)
    assert r.exit_code == 0, r.output
    c = next(m["corrected"] for m in doc["models"] if m["judge"] == "lenient" and m["model"] == "sys-2")
    assert c["score"] is None and c["ci_low"] is None and c["n_labeled"] == 0 and "0 labeled" in c["reason"]
    assert "corrected: none" in r.output


def test_without_correct_with_rows_say_none(gamut, run):
    _, run_dir, _ = run
    r, doc = _score(gamut, run_dir)
    assert r.exit_code == 0 and doc["correction"] is None and all(m["corrected"] is None for m in doc["models"])


@pytest.mark.parametrize("args,message", [
    (("--correct-with", "human-*"), "give both"),
    (("--correct-with", "nobody-*", "--sample", "SAMPLE"), "no judge matches 'nobody-*'"),
    (("--correct-with", "human-*", "--sample", "MISSING"), "sample design not found")])
def test_bad_correction_arguments_are_one_line_and_exit_1(gamut, run, args, message):
    _, run_dir, _ = run
    sample = run_dir / "samples" / "calibration.json"
    args = [sample if a == "SAMPLE" else run_dir / "nope.json" if a == "MISSING" else a for a in args]
    r, _ = _score(gamut, run_dir, *args)
    assert r.exit_code == 1 and message in r.output and "Traceback" not in r.output
