"""`report --correct-with`: the corrected-scores section, its CSV and figure, from the same
numbers scores.json holds."""

import csv
import json

import numpy as np
import pytest

from tests.support.simulate import sampled_cells, simulate, write_verdicts


@pytest.fixture
def run(tmp_path, gamut):
    sim = simulate(6, n_questions=60)
    write_verdicts(sim, tmp_path, "lenient")
    assert gamut("sample", tmp_path, "--responses", 20, "--seed", 1).exit_code == 0
    design = json.loads((tmp_path / "samples" / "calibration.json").read_text())
    cells = sampled_cells(sim, design)
    cells[3] = False  # one system without labels: its row says why
    write_verdicts(sim, tmp_path, None, "human-ann", cells, design)
    return tmp_path


def test_report_gains_the_section_table_and_figure_and_keeps_them(gamut, run):
    r = gamut("report", run, "--correct-with", "human-*")
    assert r.exit_code == 0, r.output
    doc = json.loads((run / "scores" / "scores.json").read_text())
    rows = {(m["model"]): m["corrected"] for m in doc["models"] if m["judge"] == "lenient"}
    text = (run / "report.md").read_text()
    assert "## Corrected scores" in text and "figures/corrected.png" in text
    assert (run / "figures" / "corrected.png").stat().st_size > 1000
    with open(run / "tables" / "corrected.csv", newline="") as f:
        table = {r["model"]: r for r in csv.DictReader(f)}
    for model, c in rows.items():
        if c["score"] is None:
            assert table[model]["score"] == "" and "0 labeled" in table[model]["reason"]
            continue
        assert float(table[model]["score"]) == c["score"]  # full precision in the CSV
        assert f"{c['score']:.1f} [{c['ci_low']:.1f}, {c['ci_high']:.1f}]" in text
    assert np.isnan(float(table["sys-3"]["bias"] or "nan"))
    _ranking_shown(run, doc, text)
    # A later report keeps the correction while the scores are current.
    assert gamut("report", run).exit_code == 0
    assert "## Corrected scores" in (run / "report.md").read_text()


def test_report_without_a_sample_stops_before_writing(gamut, run):
    (run / "samples" / "calibration.json").unlink()
    r = gamut("report", run, "--correct-with", "human-*")
    assert r.exit_code == 1 and "run `gamut-local sample` first" in r.output
    assert not (run / "report.md").exists()


def _row(judge, model, score):
    return {"judge": judge, "model": model, "variant": "multimodal", "score": score}


def _diff(judge, a, b, lo, hi):
    return {"judge": judge, "a": [a, "multimodal"], "b": [b, "multimodal"], "ci_low": lo, "ci_high": hi}


def test_rank_intervals_place_a_system_only_where_a_difference_excludes_zero():
    from gamut_local.analysis.correction import rank_intervals

    flat = [_row("j", "a", 80.0), _row("j", "b", 70.0), _row("j", "c", 65.0), _row("j", "d", None),
            _row("k", "a", 10.0), _row("k", "b", 20.0)]
    diffs = [_diff("j", "a", "b", 2.0, 18.0),  # a above b
             _diff("j", "a", "c", 5.0, 25.0),  # a above c
             _diff("j", "b", "c", -3.0, 13.0),  # b, c not separated
             _diff("j", "a", "d", None, None),
             _diff("k", "a", "b", -15.0, -5.0)]  # b above a (negative difference)
    assert rank_intervals(flat, diffs) == {("j", "a", "multimodal"): (1, 1), ("j", "b", "multimodal"): (2, 3),
                                           ("j", "c", "multimodal"): (2, 3), ("k", "a", "multimodal"): (2, 2),
                                           ("k", "b", "multimodal"): (1, 1)}


def _ranking_shown(run, doc, text):
    """The corrected ranking with its rank intervals, and every difference, in the report."""
    from gamut_local.analysis.correction import rank_intervals
    from gamut_local.reporting.correction import rows

    ranks = rank_intervals(rows(doc), doc["correction"]["differences"])
    # scores.json carries the same ranking the report shows
    assert {(r["judge"], r["model"], r["variant"]): (r["rank_best"], r["rank_worst"])
            for r in doc["correction"]["ranking"]} == ranks
    systems = {m["model"] for m in doc["models"]}
    assert "### Corrected ranking" in text and set(ranks) == {("lenient", m, "multimodal") for m in systems - {"sys-3"}}
    for (judge, model, variant), (lo, hi) in ranks.items():
        rank = str(lo) if lo == hi else f"{lo}–{hi}"
        assert f"| {judge} | {model} ({variant}) |" in text and f"| {rank} |" in text
    with open(run / "tables" / "corrected_differences.csv", newline="") as f:
        table = list(csv.DictReader(f))
    assert len(table) == len(doc["correction"]["differences"]) == len(systems) * (len(systems) - 1) // 2
    assert (run / "figures" / "corrected-differences.png").stat().st_size > 1000
