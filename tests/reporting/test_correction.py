"""`report --correct-with`: the corrected-scores section, its CSV and figure, from the same
numbers scores.json holds."""

import csv
import json

import numpy as np
import pytest

from gamut_local.testing.simulate import sampled_cells, simulate, write_verdicts


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
    # A later report keeps the correction while the scores are current.
    assert gamut("report", run).exit_code == 0
    assert "## Corrected scores" in (run / "report.md").read_text()


def test_report_without_a_sample_stops_before_writing(gamut, run):
    (run / "samples" / "calibration.json").unlink()
    r = gamut("report", run, "--correct-with", "human-*")
    assert r.exit_code == 1 and "run `gamut-local sample` first" in r.output
    assert not (run / "report.md").exists()
