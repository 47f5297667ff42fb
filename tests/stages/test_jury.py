"""`gamut-local jury`: a judge made of judges, written as ordinary verdict records."""

import json

import numpy as np
import pytest

from gamut_local.analysis.jury import aggregate
from tests.support.simulate import ACCURATE, LENIENT, NOISY, SimJudge, simulate, write_verdicts

LABELS = ["meets", "partially_meets", "missing", "contradicts"]


def _write(run, judge, verdicts, probs=None):
    path = run / "verdicts" / judge / "m.multimodal.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [{"question_id": "q1", "model": "m", "variant": "multimodal", "judge": judge, "check_id": f"c{i}",
             "tier": "valuable", "verdict": v, "settings_hash": f"h-{judge}",
             "probs": None if probs is None or probs[i] is None else dict(zip(LABELS, probs[i]))}
            for i, v in enumerate(verdicts)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _jury(run, name="j"):
    from gamut_local.rundir.verdict_store import read_unit, to_records

    return {r["check_id"]: r for r in to_records(read_unit(run / "verdicts" / name / "m.multimodal.parquet"))}


def test_majority_ties_go_to_less_credit_and_invalid_is_no_vote(gamut, tmp_path):
    _write(tmp_path, "a", ["meets", "meets", "missing", "invalid"])
    _write(tmp_path, "b", ["meets", "missing", "meets", "invalid"])
    _write(tmp_path, "c", ["missing", "invalid", "contradicts", "invalid"])
    r = gamut("jury", tmp_path, "--judges", "a,b,c", "--rule", "majority", "--name", "j")
    assert r.exit_code == 0, r.output
    got = _jury(tmp_path)
    assert [got[f"c{i}"]["verdict"] for i in range(4)] == ["meets", "missing", "contradicts", "invalid"]
    assert got["c0"]["raw"] == "jury majority: a=meets b=meets c=missing"
    assert got["c0"]["method"] == "jury-majority" and got["c0"]["judge"] == "j"


def test_mean_probs_averages_the_members_probabilities(gamut, tmp_path):
    _write(tmp_path, "a", ["meets", "missing"], [[0.6, 0.1, 0.3, 0.0], [0.1, 0.1, 0.8, 0.0]])
    _write(tmp_path, "b", ["missing", "meets"], [[0.2, 0.0, 0.8, 0.0], [0.9, 0.1, 0.0, 0.0]])
    r = gamut("jury", tmp_path, "--judges", "a,b", "--rule", "mean-probs", "--name", "j")
    assert r.exit_code == 0 and "by majority" not in r.output, r.output
    got = _jury(tmp_path)
    assert got["c0"]["probs"] == pytest.approx(dict(zip(LABELS, [0.4, 0.05, 0.55, 0.0])))
    assert (got["c0"]["verdict"], got["c1"]["verdict"]) == ("missing", "meets")


def test_mean_probs_says_how_many_cells_it_decided_by_majority(gamut, tmp_path):
    """A cell where no member has probabilities falls back to majority (documented); the
    summary says on how many, so a jury of judges without probabilities is not taken for a
    probability average."""
    _write(tmp_path, "a", ["meets", "missing", "meets"], [[0.6, 0.1, 0.3, 0.0], None, None])
    _write(tmp_path, "b", ["missing", "missing", "meets"])
    r = gamut("jury", tmp_path, "--judges", "a,b", "--rule", "mean-probs", "--name", "j")
    assert r.exit_code == 0 and "0 invalid; 2 by majority, no member had probabilities there" in r.output, r.output
    got = _jury(tmp_path)
    assert [got[f"c{i}"]["verdict"] for i in range(3)] == ["meets", "missing", "meets"]
    assert got["c0"]["probs"] is not None and got["c1"]["probs"] is None


def test_dawid_skene_recovers_each_members_confusion_matrix():
    sim = simulate(0, n_questions=150, judges=[SimJudge("a", ACCURATE), SimJudge("b", LENIENT), SimJudge("c", NOISY)])
    mask = np.broadcast_to(sim.mask, sim.truth.shape)
    labels = np.stack([sim.judged[j][mask] for j in "abc"], axis=1)
    result = aggregate("dawid-skene", labels, np.full(labels.shape + (4,), np.nan), list("abc"))
    for name, want in (("a", ACCURATE), ("b", LENIENT), ("c", NOISY)):
        # Within sampling error: a few hundred cells of the rarest true label.
        assert np.allclose(result["confusion"][name], want, atol=0.08), name
    # Better than its best member: the jury agrees with the truth more often.
    truth = sim.truth[mask]
    assert (result["codes"] == truth).mean() > max((labels[:, k] == truth).mean() for k in range(3))


def test_jury_verdicts_are_read_like_any_judges_and_can_be_corrected(gamut, tmp_path):
    sim = simulate(1, n_questions=30)
    for j in ("accurate", "lenient", "noisy"):
        write_verdicts(sim, tmp_path, j)
    r = gamut("jury", tmp_path, "--judges", "accurate,lenient,noisy", "--rule", "dawid-skene", "--name", "panel")
    assert r.exit_code == 0, r.output
    info = json.loads((tmp_path / "juries" / "panel.json").read_text())
    assert info["members"] == ["accurate", "lenient", "noisy"] and set(info["confusion"]) == set(info["members"])
    assert gamut("sample", tmp_path, "--responses", 10).exit_code == 0
    design = json.loads((tmp_path / "samples" / "calibration.json").read_text())
    from tests.support.simulate import sampled_cells

    write_verdicts(sim, tmp_path, None, "human-ann", sampled_cells(sim, design), design)
    out = tmp_path / "scores.json"
    r = gamut("score", tmp_path / "verdicts", "--out", out,
              "--correct-with", "human-*", "--sample", tmp_path / "samples" / "calibration.json")
    assert r.exit_code == 0, r.output
    rows = [m for m in json.loads(out.read_text())["models"] if m["judge"] == "panel"]
    assert len(rows) == 4 and all(m["corrected"]["score"] is not None for m in rows)


def test_same_jury_again_is_fine_another_under_its_name_is_refused(gamut, tmp_path):
    _write(tmp_path, "a", ["meets"])
    _write(tmp_path, "b", ["missing"])
    assert gamut("jury", tmp_path, "--judges", "a,b", "--name", "j").exit_code == 0
    assert gamut("jury", tmp_path, "--judges", "a,b", "--name", "j").exit_code == 0
    r = gamut("jury", tmp_path, "--judges", "a,b", "--rule", "mean-probs", "--name", "j")
    assert r.exit_code == 1 and "other members, rules" in r.output


@pytest.mark.parametrize("args,message", [
    (("--judges", "a", "--name", "j"), "two or more"), (("--judges", "a,zz", "--name", "j"), "no verdict files"),
    (("--judges", "a,b", "--rule", "vote", "--name", "j"), "--rule"),
    (("--judges", "a,b", "--name", "a"), "new judge name"), (("--judges", "a,b", "--name", "../x"), "file name")])
def test_bad_arguments_are_one_line_and_exit_1(gamut, tmp_path, args, message):
    _write(tmp_path, "a", ["meets"])
    _write(tmp_path, "b", ["missing"])
    r = gamut("jury", tmp_path, *args)
    assert r.exit_code == 1 and message in r.output and "Traceback" not in r.output
    assert not (tmp_path / "juries").exists()


def test_report_shows_each_members_confusion_matrix(gamut, tmp_path):
    sim = simulate(1, n_questions=10)
    for j in ("accurate", "lenient", "noisy"):
        write_verdicts(sim, tmp_path, j)
    assert gamut("jury", tmp_path, "--judges", "accurate,lenient,noisy", "--rule", "dawid-skene",
                 "--name", "panel").exit_code == 0
    assert gamut("jury", tmp_path, "--judges", "accurate,lenient", "--name", "pair").exit_code == 0  # majority
    from gamut_local.reporting.jury import section

    text = section(tmp_path)  # report.md's Juries section (a whole report costs 20-40 s here)
    info = json.loads((tmp_path / "juries" / "panel.json").read_text())
    assert "## Juries" in text and "### Jury `panel`" in text and "### Jury `pair`" in text
    for member, matrix in info["confusion"].items():
        block = text.split("### Jury `panel`")[1].split(f"`{member}`:\n\n", 1)[1].split("\n\n", 1)[0].splitlines()
        assert len(block) == 2 + len(matrix)
        for row, line in zip(matrix, block[2:]):
            assert [float(x) for x in line.strip("|").split("|")[1:]] == [round(x, 2) for x in row]
    assert (tmp_path / "figures" / "jury-panel.png").stat().st_size > 1000
    assert not (tmp_path / "figures" / "jury-pair.png").exists()  # majority: no matrices to draw
