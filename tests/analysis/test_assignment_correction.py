"""A team's verdicts in a corrected score: `score --correct-with 'human-*'` takes, for each labeled
response, the first-assigned annotator's labels with the adjudicated ones on the cells the two
assignees disagreed on, never a mean; equal to the corrected score computed by hand from that
rule. The report and `team_agreement` show the agreement between the people."""

import json

import numpy as np
import pytest

from gamut_local.analysis.correction import estimate
from gamut_local.analysis.metrics import score_responses_reference
from gamut_local.vocab import TIERS, VERDICTS
from tests.support.simulate import simulate, write_verdicts


def _flip(verdict: str) -> str:
    return "missing" if verdict != "missing" else "meets"


@pytest.fixture
def team_run(tmp_path, gamut):
    from gamut_local.reporting import team

    sim = simulate(5, n_questions=50, qualities=(0.7, 0.0, -0.5))
    write_verdicts(sim, tmp_path, "lenient")
    assert gamut("sample", tmp_path, "--responses", 20, "--seed", 3).exit_code == 0
    design = json.loads((tmp_path / "samples" / "calibration.json").read_text())
    a = team.assign(tmp_path, "calibration", ["alice", "bob"], 0.2)
    prob = {st["model"]: st["inclusion_probability"] for st in design["strata"]}
    s_of, q_of = {n: i for i, n in enumerate(sim.systems)}, {q: i for i, q in enumerate(sim.questions)}
    files: dict = {}
    labels: dict = {}  # (judge, response) -> {check: verdict}
    adjudicated = 0
    for resp, who in a.responses.items():
        cells = np.zeros(sim.truth.shape[:2], dtype=bool)
        cells[s_of[resp[0]], q_of[resp[2]]] = True
        for person in who:
            recs = sim.records(None, f"human-{person}", cells)
            for k, r in enumerate(recs):
                if person == "bob" and k % 3 == 0:  # bob reads every third check otherwise
                    r["verdict"] = _flip(r["verdict"])
                if len(who) == 2 and person == "bob" and k % 3 == 0 and k % 2 == 0:
                    adj = {**r, "judge": "human-carol", "verdict": "contradicts"}  # carol settles some
                    files.setdefault(("carol", resp[0]), []).append(adj)
                    labels.setdefault(("human-carol", resp), {})[r["check_id"]] = adj
                    adjudicated += 1
                labels.setdefault((f"human-{person}", resp), {})[r["check_id"]] = r
            files.setdefault((person, resp[0]), []).extend(recs)
    for (person, model), recs in files.items():
        path = tmp_path / "verdicts" / f"human-{person}" / f"{model}.multimodal.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps({**r, "sample_id": design["sample_id"],
                                            "inclusion_probability": prob[model]}) + "\n" for r in recs))
    assert adjudicated > 3
    return sim, tmp_path, design, a, labels


def _by_hand(labels, who, resp):
    """The rule: the first-assigned's labels, a cell both assignees labeled differently taking the
    adjudicator's label where there is one."""
    first = labels[(f"human-{who[0]}", resp)]
    mine = dict(first)
    if len(who) == 2:
        other = labels[(f"human-{who[1]}", resp)]
        carol = labels.get(("human-carol", resp), {})
        for check, r in first.items():
            if other[check]["verdict"] != r["verdict"] and check in carol:
                mine[check] = carol[check]
    rows = list(mine.values())
    score, _ = score_responses_reference([VERDICTS.index(r["verdict"]) for r in rows],
                                         [TIERS.index(r["tier"]) for r in rows], [0] * len(rows), 1)
    return float(score[0])


def test_score_corrected_with_team_verdicts_is_the_rule_by_hand(gamut, team_run):
    from gamut_local.analysis.metrics import score_responses

    sim, run_dir, design, a, labels = team_run
    out = run_dir / "out" / "scores.json"
    files = sorted((run_dir / "verdicts").glob("*/*.jsonl"))
    r = gamut("score", *files, "--out", out, "--correct-with", "human-*", "--sample",
              run_dir / "samples" / "calibration.json")
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    judge, _ = sim.response_scores(score_responses, "lenient")
    q_of = {q: i for i, q in enumerate(sim.questions)}
    differs_from_mean = 0
    for s, system in enumerate(sim.systems):
        mine = [(resp, who) for resp, who in a.responses.items() if resp[0] == system]
        y = [_by_hand(labels, who, resp) for resp, who in mine]
        for resp, who in mine:
            if len(who) == 2:
                mean = np.mean([_by_hand(labels, (p,), resp) for p in who])
                differs_from_mean += not np.isclose(mean, _by_hand(labels, who, resp))
        drawn = {q_of[resp[2]] for resp, _ in mine}
        yhat = [judge[s, q_of[resp[2]]] for resp, _ in mine]
        rest = [judge[s, q] for q in range(len(sim.questions)) if q not in drawn]
        want = estimate(y, yhat, rest)
        row = next(m["corrected"] for m in doc["models"] if m["model"] == system and m["judge"] == "lenient")
        assert row["n_labeled"] == len(mine) == 20
        for key in ("score", "ci_low", "ci_high", "human_only"):
            assert row[key] == pytest.approx(want[key], abs=1e-9), (system, key)
    assert differs_from_mean > 0  # the test tells the rule from a mean of the two


def test_team_agreement_counts_the_overlap_and_what_is_left_to_adjudicate(gamut, team_run):
    from gamut_local.reporting.team import team_agreement

    sim, run_dir, design, a, labels = team_run
    got = team_agreement(run_dir)
    pairs = [(resp, who) for resp, who in a.responses.items() if len(who) == 2]
    assert got["overlap_responses"] == len(pairs) == round(0.2 * 60) and got["overlap_graded"] == len(pairs)
    cells = [(resp, c) for resp, who in pairs for c in labels[(f"human-{who[0]}", resp)]]
    differ = [(resp, c) for resp, c in cells
              if labels[("human-alice", resp)][c]["verdict"] != labels[("human-bob", resp)][c]["verdict"]]
    settled = [(resp, c) for resp, c in differ if c in labels.get(("human-carol", resp), {})]
    assert got["n_cells"] == len(cells) and got["disagreements"] == len(differ)
    assert got["unadjudicated"] == len(differ) - len(settled) > 0
    assert [(p["a"], p["b"]) for p in got["pairs"]] == [("alice", "bob")] and got["pairs"][0]["n"] == len(cells)
    assert 0 < got["krippendorff_alpha"]["nominal"] < 1


def test_the_report_shows_the_people_agreement_beside_the_corrected_scores(gamut, team_run):
    from gamut_local.reporting.team import team_agreement

    _, run_dir, _, _, _ = team_run
    r = gamut("report", run_dir, "--correct-with", "human-*")
    assert r.exit_code == 0, r.output
    text = (run_dir / "report.md").read_text()
    got = team_agreement(run_dir)
    section = text[text.index("## Corrected scores"):]
    assert "### Agreement between people" in section
    assert f"nominal {got['krippendorff_alpha']['nominal']:.3f}" in section
    assert f"{got['unadjudicated']} not adjudicated yet" in section and "| alice – bob |" in section
    assert json.loads((run_dir / "tables" / "human_agreement.json").read_text()) == got
    # bob misreads a third of the checks: the lenient judge agrees with the two of them more
    assert got["judge_vs_people"]["lenient"] > got["people_kappa"] and got["noisier_truth"] == ["lenient"]
    assert "**Warning:** `lenient` agrees with the people more than the people agree with each other" in section
