"""`agree --gold`'s files: calibration.json and the reliability diagram, from the sample run with
a human's verdicts (newest revision wins)."""

from __future__ import annotations

import json

from gamut_local.reporting.calibration import calibration_files, markdown
from gamut_local.rundir.layout import verdict_files
from gamut_local.rundir.store import append_jsonl
from tests.support.sample_run import build_sample_run


def test_calibration_files_from_a_run_with_human_verdicts(tmp_path):
    run = build_sample_run(tmp_path / "run")
    gold = [json.loads(x) for p in sorted((run / "verdicts" / "gold").glob("*.jsonl"))
            for x in p.read_text().splitlines()]
    human = [{**r, "judge": "human-ann", "revision": 1} for r in gold[:40]]
    path = run / "verdicts" / "human-ann" / "mixed.jsonl"
    append_jsonl(path, human)
    # A change of mind on the first cell: the newer record must win.
    changed = "contradicts" if human[0]["verdict"] != "contradicts" else "meets"
    append_jsonl(path, [{**human[0], "verdict": changed, "revision": 2}])
    cal = calibration_files(verdict_files(run), "human-*", tmp_path / "calibration.json", tmp_path / "rel.png")
    assert cal["n_gold_cells"] == 40 and cal["model_judges"] == ["gold", "synthetic-judge"]
    # gold agrees with the human everywhere but the changed cell.
    assert cal["judges"]["gold"]["vs_gold"]["accuracy"] == 39 / 40
    assert json.loads((tmp_path / "calibration.json").read_text()) == json.loads(json.dumps(cal))
    assert (tmp_path / "rel.png").read_bytes()[:4] == b"\x89PNG"
    text = "\n".join(markdown(cal, "rel.png"))
    assert "| `synthetic-judge` |" in text and "![reliability diagram](rel.png)" in text


def test_report_section_only_for_runs_with_human_verdicts(tmp_path):
    from gamut_local.reporting.calibration import report_section

    run = build_sample_run(tmp_path / "run")
    assert report_section(run, verdict_files(run)) == ""
    gold = [json.loads(x) for p in sorted((run / "verdicts" / "gold").glob("*.jsonl"))
            for x in p.read_text().splitlines()]
    append_jsonl(run / "verdicts" / "human-ann" / "x.multimodal.jsonl", [{**r, "judge": "human-ann"} for r in gold[:30]])
    text = report_section(run, verdict_files(run))
    assert text.lstrip().startswith("## Calibration against human verdicts")
    assert (run / "tables" / "calibration.json").is_file() and (run / "figures" / "reliability.png").is_file()
    assert "figures/reliability.png" in text


def _with_human(tmp_path):
    run = build_sample_run(tmp_path / "run")
    gold = [json.loads(x) for p in sorted((run / "verdicts" / "gold").glob("*.jsonl"))
            for x in p.read_text().splitlines()]
    for model in {r["model"] for r in gold}:
        rows = [{**r, "judge": "human-ann", "revision": 1} for r in gold[:60] if r["model"] == model]
        append_jsonl(run / "verdicts" / "human-ann" / f"{model}.multimodal.jsonl", rows)
    return run


def test_agree_gold_writes_calibration_beside_its_out(tmp_path, gamut):
    run = _with_human(tmp_path)
    out = tmp_path / "agreement.json"
    res = gamut("agree", *verdict_files(run), "--out", out, "--gold", "human-*")
    assert res.exit_code == 0, res.output
    cal = json.loads((tmp_path / "agreement.calibration.json").read_text())
    assert cal["gold_judges"] == ["human-ann"] and cal["judges"]["gold"]["vs_gold"]["accuracy"] == 1.0
    assert (tmp_path / "agreement.reliability.png").read_bytes()[:4] == b"\x89PNG"
    assert "human-ann" in json.loads(out.read_text())["judges"]
    # A gold pattern that names no judge (a typo) stops before anything is written: it wrote an
    # agreement file and a calibration against nothing, and exited 0.
    typo = tmp_path / "typo.json"
    res = gamut("agree", *verdict_files(run), "--out", typo, "--gold", "humans-*")
    assert res.exit_code == 1 and "--gold: <record>: no judge matches 'humans-*' (judges: " in res.output, res.output
    assert not list(tmp_path.glob("typo*"))


def test_report_has_a_calibration_section_when_humans_annotated(tmp_path, gamut):
    run = _with_human(tmp_path)
    res = gamut("report", run)
    assert res.exit_code == 0, res.output
    text = (run / "report.md").read_text()
    assert "## Calibration against human verdicts" in text and "figures/reliability.png" in text
    assert (run / "tables" / "calibration.json").is_file()
    bare = build_sample_run(tmp_path / "bare")
    assert gamut("report", bare).exit_code == 0
    assert "Calibration against human verdicts" not in (bare / "report.md").read_text()
