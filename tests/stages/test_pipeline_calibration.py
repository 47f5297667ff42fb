"""`gamut-local run` with `calibration:` (the demo's config): the sample is drawn after judging
and the scores and report are corrected by the gold judges' verdicts on it. The fake engine
stands in for the model: what is under test is everything around it."""

from __future__ import annotations

import json
from pathlib import Path

from gamut_local.rundir.layout import scores_path

CONFIG = Path(__file__).resolve().parents[2] / "configs" / "runs" / "sample.yaml"


def test_the_demo_config_shows_corrected_scores(gamut, tmp_path, monkeypatch):
    from tests.support import fake_engine

    fake_engine.sample_models(monkeypatch, tmp_path)
    fake_engine.install(monkeypatch)
    r = gamut("run", "--config", CONFIG, "--limit", 3)
    assert r.exit_code == 0, r.output
    run = tmp_path / "runs" / "sample"
    design = json.loads((run / "samples" / "calibration-pilot-3.json").read_text())
    assert {(s["model"], s["sampled"], s["population"]) for s in design["strata"]} == {
        (m, 2, 3) for m in ("reference-complete", "reference-omissive", "reference-contradicting", "smollm2-135m")}
    doc = json.loads(scores_path(run).read_text())
    assert doc["correction"]["gold_judges"] == ["gold"] and doc["correction"]["sample_id"] == design["sample_id"]
    rows = {m["model"]: m["corrected"] for m in doc["models"] if m["judge"] == "smollm2-135m"}
    assert rows["smollm2-135m"]["score"] is None and "0 labeled" in rows["smollm2-135m"]["reason"]
    assert rows["reference-complete"]["reason"].startswith("all 2 labeled human scores are equal")
    shown = [c for c in rows.values() if c["score"] is not None]
    assert shown and all(c["n_labeled"] == 2 and c["n_total"] == 3 for c in shown)
    text = (run / "report.md").read_text()
    assert "## Corrected scores" in text and f"{shown[0]['score']:.1f} [" in text
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["stages"]["sample"]["result"].endswith("calibration-pilot-3.json")


def test_without_the_correct_extra_the_run_stops_before_any_model_loads(tmp_path, monkeypatch):
    import importlib.util

    from gamut_local.config import load_run_config
    from gamut_local.errors import InputError
    from gamut_local.stages.pipeline import preflight
    from tests.support import fake_engine

    fake_engine.sample_models(monkeypatch, tmp_path)
    spec = load_run_config(CONFIG)
    preflight(spec)  # installed: fine
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ppi_py" else real(name, *a))
    try:
        preflight(spec)
        raise AssertionError("preflight passed without ppi_py")
    except InputError as e:
        (p,) = e.problems
    line = next(i for i, x in enumerate(CONFIG.read_text().splitlines(), 1) if x.startswith("calibration:"))
    assert (p.file, p.line, p.field) == (str(CONFIG), line, "calibration") and "`correct` extra" in p.message
