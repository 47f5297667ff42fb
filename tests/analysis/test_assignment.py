"""A team's assignment of the calibration sample (`analysis.assignment`, `reporting.team`,
`annotators assign`): balanced per stratum, in round order, an exact seeded overlap, and a
changed team that moves only ungraded work; bad input refused cleanly, nothing written."""

import json
import math

import numpy as np
import pytest

from gamut_local.analysis.assignment import overlap_set, plan, progress, queue, replan, rounds, seed_of
from gamut_local.analysis.design import draw
from gamut_local.errors import InputError
from tests.support.simulate import sampled_cells, simulate, write_verdicts


def _design(systems=7, questions=60, n=23, seed=3, name="calibration"):
    pop = {(f"m{k}", "multimodal" if k % 2 else "text_only"): [f"q{i:03d}" for i in range(questions)]
           for k in range(systems)}
    return draw(pop, n, per="model", seed=seed, name=name)


def _per_stratum(a):
    out = {}
    for (m, v, _), who in a.responses.items():
        for x in who:
            out.setdefault((m, v), {k: 0 for k in a.annotators})[x] += 1
    return out


@pytest.mark.parametrize("team,overlap", [(["a", "b"], 0.0), (["a", "b", "c"], 0.1), (list("abcde"), 0.25)])
def test_every_stratum_is_shared_within_one(team, overlap):
    a = plan(_design(), team, overlap)
    for counts in _per_stratum(a).values():
        assert max(counts.values()) - min(counts.values()) <= 1, counts
    totals = [sum(c[x] for c in _per_stratum(a).values()) for x in team]
    assert max(totals) - min(totals) <= 1, totals


def test_queues_walk_the_design_in_round_order_and_span_it():
    design = _design()
    a = plan(design, ["a", "b", "c"], 0.1)
    position = {resp: k for k, (resp, _, _) in enumerate(rounds(design))}
    round_of = {resp: r for resp, _, r in rounds(design)}
    last = max(round_of.values())
    for x in a.annotators:
        mine = queue(a, x, set())
        assert [position[r] for r in mine] == sorted(position[r] for r in mine)
        assert round_of[mine[0]] == 0 and round_of[mine[-1]] >= last - 1  # all of the design, not a block
    # Everyone grades the first k of their queue: each stratum's graded rounds are the same
    # few (the team's work is a stratified sample, not one system's first), within one round.
    for k in (3, 10, 25):
        graded = {(x): set(queue(a, x, set())[:k]) for x in a.annotators}
        done = set().union(*graded.values())
        per = {}
        for resp, h, _ in rounds(design):
            per[h] = per.get(h, 0) + (resp in done)
        assert max(per.values()) - min(per.values()) <= 1, per


@pytest.mark.parametrize("overlap", [0.0, 0.05, 0.1, 0.33, 0.5, 0.99])
def test_overlap_share_is_exact_to_rounding_and_spread(overlap):
    design = _design()
    a = plan(design, ["a", "b", "c"], overlap)
    n = len(design.responses)
    twice = [r for r, who in a.responses.items() if len(who) == 2]
    assert len(twice) == math.floor(overlap * n + 0.5)
    assert all(len(set(who)) == len(who) for who in a.responses.values())
    per = {}
    for m, v, _ in twice:
        per[(m, v)] = per.get((m, v), 0) + 1
    if twice:  # equal strata: each gets its share, within one
        counts = [per.get((st.model, st.variant), 0) for st in design.strata]
        assert max(counts) - min(counts) <= 1
    if len(twice) >= 14:  # spread over the rounds: both halves of the design hold some
        round_of = {resp: r for resp, _, r in rounds(design)}
        half = max(round_of.values()) / 2
        assert any(round_of[r] < half for r in twice) and any(round_of[r] > half for r in twice)


@pytest.mark.parametrize("systems,n,overlap", [(7, 2, 0.25), (28, 1, 0.1), (3, 2, 0.2)])
def test_strata_whose_share_of_the_overlap_rounds_to_none_get_none(systems, n, overlap):
    """Small strata: some get no overlap response at all, and that is no error."""
    design = _design(systems=systems, n=n)
    a = plan(design, ["a", "b", "c"], overlap)
    twice = [r for r, who in a.responses.items() if len(who) == 2]
    assert len(twice) == math.floor(overlap * len(design.responses) + 0.5)
    assert len({(m, v) for m, v, _ in twice}) <= len(twice) < systems


def test_the_same_design_gives_the_same_assignment_another_design_another_overlap():
    design = _design()
    a, b = plan(design, ["a", "b", "c"], 0.2), plan(design, ["a", "b", "c"], 0.2)
    assert a == b and a.seed == seed_of(design.sample_id)
    other = _design(seed=4)
    assert overlap_set(design, 0.2, a.seed) != overlap_set(other, 0.2, seed_of(other.sample_id))
    assert overlap_set(design, 0.2, 1) != overlap_set(design, 0.2, 2)


def _grade_first(a, k: int, who=None):
    return {x: set(queue(a, x, set())[:k]) for x in (who or a.annotators)}


def test_a_new_member_takes_a_share_of_ungraded_work_only():
    design = _design()
    a = plan(design, ["a", "b"], 0.1)
    graded = _grade_first(a, 12)
    b = replan(a, design, ["a", "b", "c"], graded)
    assert b.annotators == ("a", "b", "c")
    for x, done in graded.items():  # graded work stays exactly where it was
        for resp in done:
            assert x in b.responses[resp]
    moved = {r for r in a.responses if set(a.responses[r]) != set(b.responses[r])}
    assert moved and not any(r in done for done in graded.values() for r in moved)
    left = {x: len(queue(b, x, graded.get(x, set()))) for x in b.annotators}
    assert max(left.values()) - min(left.values()) <= 1, left  # c gets a third of what is left
    for r, who in b.responses.items():  # still one or two people, never one twice
        assert len(who) == len(a.responses[r]) and len(set(who)) == len(who)


def test_a_removed_member_keeps_what_they_graded_and_gives_up_the_rest():
    design = _design()
    a = plan(design, ["a", "b", "c"], 0.1)
    graded = _grade_first(a, 8)
    b = replan(a, design, ["a", "c"], graded)
    assert b.annotators == ("a", "c")
    assert {r for r, who in b.responses.items() if "b" in who} == graded["b"]
    assert queue(b, "b", graded["b"]) == []
    for x in ("a", "c"):
        assert graded[x] <= {r for r, who in b.responses.items() if x in who}
    p = progress(b, graded)
    assert p["annotators"]["b"] == {"assigned": 8, "graded": 8}
    assert p["team"]["responses"] == len(design.responses)
    assert sum(v["assigned"] for v in p["annotators"].values()) == sum(map(len, b.responses.values()))


def test_an_unassigned_grader_fills_a_free_slot_but_an_adjudicator_stays_outside():
    design = _design()
    a = plan(design, ["a", "b"], 0.2)
    solo = next(r for r, who in a.responses.items() if len(who) == 1)
    pair = next(r for r, who in a.responses.items() if len(who) == 2)
    graded = {**{x: {pair} for x in a.responses[pair]}, "z": {pair}}  # z adjudicated the pair
    b = replan(a, design, ["a", "b"], graded)
    assert b.responses[pair] == a.responses[pair]
    other = next(x for x in "ab" if x not in a.responses[solo])
    c = replan(a, design, ["a", "b"], {other: {solo}})  # graded before the team was set up
    assert c.responses[solo] == (other,)


@pytest.mark.parametrize("bad", [1.5, float("nan"), -0.1, 1.0, float("inf"), True])
def test_bad_overlaps_are_refused(bad):
    with pytest.raises(InputError, match="--overlap"):
        plan(_design(), ["a", "b"], bad)


# ---------------------------------------------------------------- on a run, through the CLI

@pytest.fixture
def run(tmp_path, gamut):
    sim = simulate(2, n_questions=40, qualities=(0.8, 0.2, -0.4))
    write_verdicts(sim, tmp_path, "lenient")
    assert gamut("sample", tmp_path, "--responses", 10, "--seed", 1).exit_code == 0
    design = json.loads((tmp_path / "samples" / "calibration.json").read_text())
    return tmp_path, sim, design


def _snapshot(root):
    return {p: p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_assign_writes_the_file_and_keeps_what_people_graded(gamut, run):
    from gamut_local.reporting import team

    run_dir, sim, design = run
    first = sampled_cells(sim, design, upto=4)  # carol graded the first 4 in the queue already
    write_verdicts(sim, run_dir, None, "human-carol", first, design)
    r = gamut("annotators", "assign", run_dir, "--annotator", "alice", "--annotator", "bob",
              "--overlap", "0.1")
    assert r.exit_code == 0, r.output
    assert "30 responses, 3 graded by two people" in r.output and "carol: 4 assigned, 4 graded" in r.output
    a = team.load(run_dir)
    assert a.annotators == ("alice", "bob") and a.sample == "calibration" and a.overlap == 0.1
    graded = team.graded_by(run_dir, team.design_of(run_dir, "calibration"))
    assert len(graded["carol"]) == 4 and all("carol" in a.responses[r] for r in graded["carol"])
    # the rule is the correction's: a partly graded response is not graded
    s, q = np.argwhere(sampled_cells(sim, design, upto=5) & ~first)[0]
    partial = np.zeros_like(first)
    partial[s, q] = True
    recs = [x for x in sim.records(None, "human-dave", partial)][:-1]
    path = run_dir / "verdicts" / "human-dave" / f"{sim.systems[s]}.multimodal.jsonl"
    path.parent.mkdir(parents=True)
    prob = {st["model"]: st["inclusion_probability"] for st in design["strata"]}
    path.write_text("".join(json.dumps({**x, "sample_id": design["sample_id"],
                                        "inclusion_probability": prob[x["model"]]}) + "\n" for x in recs))
    assert team.graded_by(run_dir, team.design_of(run_dir, "calibration"))["dave"] == set()
    b = team.rebalance(run_dir, ["alice", "bob", "erin"])
    assert b.annotators == ("alice", "bob", "erin") and team.load(run_dir) == b
    assert all(b.responses[r] == a.responses[r] for r in graded["carol"])


@pytest.mark.parametrize("args,where", [
    (("--overlap", "1.5"), "--overlap"),
    (("--overlap", "nan"), "--overlap"),
    (("--overlap", "0.1", "--sample", "nosuch"), "samples/nosuch.json: name"),
    (("--overlap", "0.1", "--annotator", "Bad Name"), "--annotator"),
])
def test_bad_arguments_are_one_clean_line_and_change_nothing(gamut, run, args, where):
    run_dir, _, _ = run
    before = _snapshot(run_dir)
    r = gamut("annotators", "assign", run_dir, "--annotator", "alice", *args)
    assert r.exit_code == 1 and where in r.output and "Traceback" not in r.output, r.output
    assert _snapshot(run_dir) == before


@pytest.mark.parametrize("damage,field", [
    (lambda d: d.update(overlap=float("nan")), "overlap"),
    (lambda d: d["responses"][2].update(annotators=[]), "responses.2.annotators"),
    (lambda d: d["responses"][1].pop("question_id"), "responses.1.question_id"),
    (lambda d: d.update(annotators=["ok", "../x"]), "annotators.1"),
    (lambda d: d.update(seed="7"), "seed"),
])
def test_a_damaged_assignment_file_is_named_with_its_field(gamut, run, damage, field):
    from gamut_local.reporting import team

    run_dir, _, _ = run
    assert gamut("annotators", "assign", run_dir, "--annotator", "alice", "--annotator", "bob").exit_code == 0
    path = run_dir / "team" / "assignments.json"
    doc = json.loads(path.read_text())
    damage(doc)
    path.write_text(json.dumps(doc))
    before = _snapshot(run_dir)
    with pytest.raises(InputError) as e:
        team.rebalance(run_dir, ["alice"])
    assert any(p.file == str(path) and p.field == field for p in e.value.problems), e.value.problems
    r = gamut("score", run_dir / "verdicts", "--out", run_dir / "out.json", "--correct-with", "human-*",
              "--sample", run_dir / "samples" / "calibration.json")  # a corrected score reads it too
    assert r.exit_code == 1 and f"{path}: {field}" in r.output.replace("\n", "") and "Traceback" not in r.output
    assert _snapshot(run_dir) == before
    path.write_text("{not json")
    with pytest.raises(InputError) as e:
        team.load(run_dir)
    assert e.value.problems[0].file == str(path)
