"""`gamut-local sample`: a seeded stratified random sample of a run's responses, its design
recorded, never silently redrawn."""

import json

import numpy as np
import pytest

from gamut_local.analysis.design import draw, inclusion, read_sample
from tests.support.simulate import simulate, write_verdicts


@pytest.fixture
def run(tmp_path):
    sim = simulate(0, n_questions=40)
    write_verdicts(sim, tmp_path, "lenient")
    return tmp_path


def _design(run):
    return json.loads((run / "samples" / "calibration.json").read_text())


def test_per_model_draws_n_of_each_system_in_rounds(gamut, run):
    r = gamut("sample", run, "--responses", 10, "--seed", 7)
    assert r.exit_code == 0, r.output
    d = _design(run)
    assert (d["schema_version"], d["kind"], d["per"], d["seed"]) == (1, "gamut-local calibration sample", "model", 7)
    assert [(s["population"], s["sampled"], s["inclusion_probability"]) for s in d["strata"]] == [(40, 10, 0.25)] * 4
    assert [r["order"] for r in d["responses"]] == list(range(40))
    # Round by round, one response of every system: any prefix is a stratified sample.
    assert [r["model"] for r in d["responses"][:8]] == ["sys-0", "sys-1", "sys-2", "sys-3"] * 2
    per_system = {m: {r["question_id"] for r in d["responses"] if r["model"] == m} for m in ("sys-0", "sys-1")}
    assert per_system["sys-0"] != per_system["sys-1"]  # each system its own random questions


def test_shared_draws_the_same_questions_for_every_system(gamut, run):
    assert gamut("sample", run, "--responses", 5, "--shared", "--seed", 1).exit_code == 0
    d = _design(run)
    by_system = {}
    for r in d["responses"]:
        by_system.setdefault(r["model"], []).append(r["question_id"])
    assert d["per"] == "shared" and len({tuple(q) for q in by_system.values()}) == 1
    assert [r["question_id"] for r in d["responses"][:4]] == [by_system["sys-0"][0]] * 4  # paired rounds


def test_same_arguments_same_sample_and_nothing_rewritten(gamut, run):
    gamut("sample", run, "--responses", 10, "--seed", 7)
    path = run / "samples" / "calibration.json"
    before = path.stat().st_mtime_ns, path.read_bytes()
    r = gamut("sample", run, "--responses", 10, "--seed", 7)
    assert r.exit_code == 0 and "already drawn" in r.output
    assert (path.stat().st_mtime_ns, path.read_bytes()) == before


def test_another_design_under_the_same_name_is_refused(gamut, run):
    gamut("sample", run, "--responses", 10, "--seed", 7)
    r = gamut("sample", run, "--responses", 10, "--seed", 8)
    assert r.exit_code == 1 and "calibration.json" in r.output and "another design" in r.output
    assert _design(run)["seed"] == 7
    assert gamut("sample", run, "--responses", 10, "--seed", 8, "--name", "second").exit_code == 0


def test_seeds_draw_differently_and_order_of_listing_does_not_matter():
    pop = {("a", "multimodal"): [f"q{i}" for i in range(50)], ("b", "text_only"): [f"q{i}" for i in range(30)]}
    one = draw(pop, 5, per="model", seed=1, name="x")
    again = draw(dict(reversed(list(pop.items()))), 5, per="model", seed=1, name="x")
    other = draw(pop, 5, per="model", seed=2, name="x")
    assert one == again and one.responses != other.responses and one.sample_id != other.sample_id


def test_shared_sample_leaves_questions_not_every_system_answered_outside_the_population():
    pop = {("a", "multimodal"): ["q1", "q2", "q3", "q4"], ("b", "multimodal"): ["q1", "q2", "q3"]}
    d = draw(pop, 2, per="shared", seed=0, name="x")
    population, sampled, prob = inclusion(d, [("a", "multimodal"), ("b", "multimodal")], ["q1", "q2", "q3", "q4"])
    assert population.tolist() == [[True, True, True, False], [True, True, True, False]]
    assert np.allclose(prob[:, :3], 2 / 3) and sampled.sum() == 4 and not sampled[:, 3].any()


@pytest.mark.parametrize("args,message", [
    (("--responses", 0), "--responses"), (("--responses", 3, "--seed", -1), "--seed"),
    (("--responses", 3, "--per", "domain"), "--per"), (("--responses", 3, "--name", "../x"), "file name")])
def test_bad_arguments_are_one_line_and_exit_1(gamut, run, args, message):
    r = gamut("sample", run, *args)
    assert r.exit_code == 1 and message in r.output and "Traceback" not in r.output
    assert not (run / "samples").exists()


def test_a_run_without_model_verdicts_is_refused(gamut, tmp_path):
    r = gamut("sample", tmp_path, "--responses", 3)
    assert r.exit_code == 1 and "run judge before drawing a sample" in r.output


def test_a_damaged_design_file_is_named_with_its_field(tmp_path):
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"schema_version": 1, "kind": "gamut-local calibration sample", "sample_id": "x"}))
    with pytest.raises(Exception) as e:
        read_sample(path)
    assert str(path) in str(e.value) and "seed" in str(e.value)


def test_plan_sample_from_a_pilot(gamut, run):
    from tests.support.simulate import sampled_cells

    sim = simulate(0, n_questions=40)
    gamut("sample", run, "--responses", 15, "--seed", 3)
    write_verdicts(sim, run, None, "human-ann", sampled_cells(sim, _design(run), upto=40), _design(run))  # 10 per system
    r = gamut("plan-sample", run, "--half-width", 20, "--json")
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)
    assert [(x["judge"], x["pilot_n"], x["n_total"]) for x in rows] == [("lenient", 10, 40)] * 4
    for x in rows:
        assert x["reachable"] and x["corrected_n"] <= x["human_only_n"] <= 40
        assert x["corrected_keypresses"] == round(x["corrected_n"] * x["checks_per_response"])
    r = gamut("plan-sample", run, "--half-width", 0)
    assert r.exit_code == 1 and "--half-width" in r.output
