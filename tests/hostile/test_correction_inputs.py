"""Hostile inputs to corrected scores: human verdicts that disagree with the sample
design, design files edited after the draw, juries made of the wrong judges, bad plan-sample
arguments. Every path into a corrected score (score on a folder, a run, files, a human file
outside its folder; score-run; report; plan-sample; the viewer's live leaderboard) runs the
same sample checks, so each case runs on each path.

The clean-failure rule: exit 1, no traceback, the file and field named, and every file under
the test's folder (the run's own included) byte-identical afterwards.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from gamut_local.analysis.design import content_id
from tests.support.sample_run import SAMPLE, SYNTHETIC_JUDGE, build_sample_run

MODEL = "reference-complete"
HUMAN = "human-ann"


class Run:
    """The bundled sample run with a drawn sample, graded in full in its queue by `human-ann`
    (the sample's gold verdicts, carrying `sample_id` and `inclusion_probability` as the
    viewer's queue writes them), and a run config for score-run."""

    def __init__(self, root: Path, gamut):
        self.root, self.gamut = root, gamut
        self.run = build_sample_run(root / "run", seed=0)
        assert gamut("sample", self.run, "--responses", 6, "--seed", 0).exit_code == 0
        self.sample = self.run / "samples" / "calibration.json"
        self.design = json.loads(self.sample.read_text())
        self.gold = [json.loads(line) for line in (SAMPLE / "verdicts" / "gold.jsonl").read_text().splitlines()]
        prob = {st["model"]: st["inclusion_probability"] for st in self.design["strata"]}
        self.drawn = {(r["model"], r["question_id"]) for r in self.design["responses"]}
        for model in prob:
            rows = [{**g, "judge": HUMAN, "sample_id": self.design["sample_id"], "inclusion_probability": prob[model]}
                    for g in self.gold if g["model"] == model and (model, g["question_id"]) in self.drawn]
            self.write(self.human_file(model), rows)
        (root / "models" / "j").mkdir(parents=True)
        (root / "models" / "j" / "config.json").write_text('{"architectures": ["Fake"]}')
        self.config = root / "run.yaml"
        self.config.write_text(json.dumps({
            "name": "hostile-correction", "dataset": str(SAMPLE / "questions.jsonl"), "output_dir": "run",
            "variants": ["multimodal"], "judges": [{"name": SYNTHETIC_JUDGE, "path": "models/j"}],
            "extra_answers": [str(SAMPLE / "answers" / "reference.jsonl")]}))

    def human_file(self, model: str = MODEL) -> Path:
        return self.run / "verdicts" / HUMAN / f"{model}.multimodal.jsonl"

    @staticmethod
    def write(path: Path, rows: list[dict]) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        return path

    def rows(self, path: Path) -> list[dict]:
        return [json.loads(line) for line in path.read_text().splitlines()]

    def snapshot(self) -> dict[str, str]:
        return {str(p.relative_to(self.root)): hashlib.sha256(p.read_bytes()).hexdigest()
                for p in sorted(self.root.rglob("*")) if p.is_file()}

    def clean_failure(self, argv, named) -> str:
        """Run argv; hold it to the clean-failure rule; its output."""
        before = self.snapshot()
        r = self.gamut(*argv)
        assert r.exit_code == 1, f"exit {r.exit_code}:\n{r.output}\n{r.exception!r}"
        assert "Traceback" not in r.output and "internal error" not in r.output, r.output
        for text in named:
            assert str(text) in r.output, f"{text!r} not in:\n{r.output}"
        assert self.snapshot() == before, "a file changed"
        return r.output

    def set_design(self, **change) -> None:
        """Edit the design, then give it the sample_id its new content has (a hand-made design
        that is consistent with its id, so the check under test is the one that speaks)."""
        body = {k: v for k, v in {**self.design, **change}.items() if k not in ("schema_version", "kind", "sample_id")}
        self.sample.write_text(json.dumps({**self.design, **change, "sample_id": content_id(body)}))


@pytest.fixture
def cw(tmp_path, monkeypatch, gamut):
    monkeypatch.chdir(tmp_path)
    return Run(tmp_path, gamut)


# ------------------------------------------------------------------ the paths into a corrected score

def _loose(cw: Run) -> Path:
    """The human's verdicts in one file outside any `human-*` folder, given by name."""
    rows = [r for p in sorted((cw.run / "verdicts" / HUMAN).glob("*.jsonl")) for r in cw.rows(p)]
    shutil.rmtree(cw.run / "verdicts" / HUMAN)
    return cw.write(cw.root / "elsewhere" / "ann.jsonl", rows)


PATHS = {
    "score-folder": lambda cw: ["score", cw.run / "verdicts", "--out", cw.root / "out" / "s.json",
                                "--correct-with", "human-*", "--sample", cw.sample],
    "score-run-folder": lambda cw: ["score", cw.run, "--out", cw.root / "out" / "s.json",
                                    "--correct-with", "human-*", "--sample", cw.sample],
    "score-files": lambda cw: ["score", *sorted((cw.run / "verdicts").glob("*/*.jsonl")), "--out",
                               cw.root / "out" / "s.json", "--correct-with", "human-*", "--sample", cw.sample],
    "score-loose-file": lambda cw: ["score", cw.run / "verdicts" / "gold", cw.run / "verdicts" / SYNTHETIC_JUDGE,
                                    cw.root / "elsewhere" / "ann.jsonl", "--out", cw.root / "out" / "s.json",
                                    "--correct-with", "human-*", "--sample", cw.sample],
    "score-run": lambda cw: ["score-run", "--config", cw.config, "--correct-with", "human-*"],
    "report": lambda cw: ["report", cw.run, "--correct-with", "human-*"],
    "plan-sample": lambda cw: ["plan-sample", cw.run, "--half-width", 10],
}


def _argv(cw: Run, path: str):
    return PATHS[path](cw)


def _undrawn(cw: Run, rows: list[dict]) -> list[dict]:
    """A verdict of an undrawn response that says it was made in the sample's queue."""
    g = next(g for g in cw.gold if g["model"] == MODEL and (MODEL, g["question_id"]) not in cw.drawn)
    return rows + [{**g, "judge": HUMAN, "sample_id": rows[0]["sample_id"],
                    "inclusion_probability": rows[0]["inclusion_probability"]}]


def _with(**change):
    return lambda cw, rows: [{**rows[0], **change}] + rows[1:]


def _without(field):
    return lambda cw, rows: [{k: v for k, v in rows[0].items() if k != field}] + rows[1:]


BAD_VERDICTS = {
    "undrawn-response": (_undrawn, "sample_id"),
    "other-probability": (_with(inclusion_probability=0.5), "inclusion_probability"),
    "nan-probability": (_with(inclusion_probability=float("nan")), "inclusion_probability"),
    "inf-probability": (_with(inclusion_probability=float("inf")), "inclusion_probability"),
    "zero-probability": (_with(inclusion_probability=0), "inclusion_probability"),
    "probability-as-text": (lambda cw, rows: _with(inclusion_probability=str(rows[0]["inclusion_probability"]))(
        cw, rows), "inclusion_probability"),
    "probability-as-bool": (_with(inclusion_probability=True), "inclusion_probability"),
    "probability-missing": (_without("inclusion_probability"), "inclusion_probability"),
}


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("case", BAD_VERDICTS)
def test_a_human_verdict_that_disagrees_with_the_design_stops_every_path(cw, path, case):
    mutate, field = BAD_VERDICTS[case]
    cw.write(cw.human_file(), mutate(cw, cw.rows(cw.human_file())))
    named_file = _loose(cw) if path == "score-loose-file" else cw.human_file()
    cw.clean_failure(_argv(cw, path), [named_file, field])


@pytest.mark.parametrize("case", ["undrawn-response", "nan-probability", "probability-missing"])
def test_the_viewer_shows_the_same_refusal_and_no_numbers(cw, case):
    mutate, field = BAD_VERDICTS[case]
    cw.write(cw.human_file(), mutate(cw, cw.rows(cw.human_file())))
    before = cw.snapshot()
    res = _viewer(cw.run).get("/api/overview")
    assert res.status_code == 200, res.text
    (board,) = res.json()["corrected"]
    assert board["judges"] == {} and str(cw.human_file()) in board["error"] and field in board["error"]
    assert cw.snapshot() == before


def _viewer(run: Path):
    """The viewer over the run, read-only, as the browser addresses it."""
    from starlette.testclient import TestClient

    from gamut_local.viewer.app import create_app
    from gamut_local.viewer.index import open_run

    return TestClient(create_app(open_run(run), read_only=True), base_url="http://127.0.0.1:8765")


# ------------------------------------------------------------------ verdicts from other queues

def _another_queue(cw: Run, case: str) -> None:
    """One drawn response's first check graded elsewhere: another sample's queue, or the
    disagreement queue (no sample_id): the response is not a random label."""
    rows = cw.rows(cw.human_file())
    first = dict(rows[0])
    if case == "another-sample":
        first["sample_id"] = "calibration-000000000000"
    else:
        del first["sample_id"], first["inclusion_probability"]
    cw.write(cw.human_file(), [first] + rows[1:])


def _labeled(doc: dict) -> dict:
    return {(m["judge"], m["model"]): m["corrected"]["n_labeled"] for m in doc["models"] if m["corrected"]}


def _corrected_by_path(cw: Run) -> dict[str, dict]:
    """Each path's corrected rows (n_labeled per judge and system)."""
    out = {}
    for path in ("score-folder", "score-run-folder", "score-files"):
        r = cw.gamut(*_argv(cw, path))
        assert r.exit_code == 0, r.output
        out[path] = _labeled(json.loads((cw.root / "out" / "s.json").read_text()))
    for path in ("score-run", "report"):
        r = cw.gamut(*_argv(cw, path))
        assert r.exit_code == 0, r.output
        out[path] = _labeled(json.loads((cw.run / "scores" / "scores.json").read_text()))
    return out


@pytest.mark.parametrize("case", ["another-sample", "disagreement-queue"])
def test_a_verdict_from_another_queue_unlabels_its_response_on_every_path(cw, case):
    before = _corrected_by_path(cw)
    want = {(judge, st["model"]): 6 for judge in ("gold", SYNTHETIC_JUDGE) for st in cw.design["strata"]}
    assert all(got == want for got in before.values()), before
    _another_queue(cw, case)
    after = _corrected_by_path(cw)
    assert all(got == {**want, ("gold", MODEL): 5, (SYNTHETIC_JUDGE, MODEL): 5} for got in after.values()), after
    (board,) = _viewer(cw.run).get("/api/overview").json()["corrected"]
    assert {(j, r["model"]): r["n_labeled"] for j, rows in board["judges"].items() for r in rows} == after["report"]
    # Given by name from outside its folder, the same.
    _loose(cw)
    r = cw.gamut(*_argv(cw, "score-loose-file"))
    assert r.exit_code == 0, r.output
    assert _labeled(json.loads((cw.root / "out" / "s.json").read_text())) == after["score-folder"]
    assert "outside the calibration sample" in r.output


# ------------------------------------------------------------------ the design file

def _edit_population(cw: Run) -> None:
    """The population edited under the same sample_id: it would change n_total."""
    design = json.loads(cw.sample.read_text())
    st = design["strata"][0]
    drawn = {r["question_id"] for r in design["responses"] if r["model"] == st["model"]}
    st["questions"] = [q for q in st["questions"] if q in drawn or q == st["questions"][-1]]
    st["population"], st["inclusion_probability"] = len(st["questions"]), st["sampled"] / len(st["questions"])
    cw.sample.write_text(json.dumps(design))


def _entry(field: str, k: int, **change):
    """An edit of the design: entry `k` of its `field` list changed."""
    def edit(cw: Run):
        entries = [dict(e) for e in cw.design[field]]
        entries[k].update(change)
        cw.set_design(**{field: entries})
    return edit


def _stratum(**change):
    return _entry("strata", 0, **change)


def _response(**change):
    return _entry("responses", 2, **change)


def _no_stratum(cw: Run):
    """A response of a system the design has no stratum for (nor the run any verdicts of)."""
    extra = {"model": "ghost", "variant": "multimodal", "question_id": "food-espresso",
             "order": len(cw.design["responses"])}
    cw.set_design(responses=cw.design["responses"] + [extra])


BAD_DESIGNS = {
    "population-edited": (_edit_population, "sample_id"),
    "probability-zero": (_stratum(inclusion_probability=0.0), "strata.0.inclusion_probability"),
    "probability-above-one": (_stratum(inclusion_probability=1.5), "strata.0.inclusion_probability"),
    "probability-nan": (_stratum(inclusion_probability=float("nan")), "strata.0.inclusion_probability"),
    "probability-inf": (_stratum(inclusion_probability=float("inf")), "strata.0.inclusion_probability"),
    "probability-not-the-draws": (_stratum(inclusion_probability=0.2), "strata.0.inclusion_probability"),
    "population-not-its-questions": (_stratum(population=40), "strata.0.population"),
    "sampled-not-the-responses": (_stratum(sampled=5, inclusion_probability=5 / 13), "strata.0.sampled"),
    "response-without-stratum": (_no_stratum, "responses.18.model"),
    "response-outside-population": (_response(question_id="not-a-question"), "responses.2.question_id"),
    "response-twice": (lambda cw: _response(**{k: cw.design["responses"][0][k] for k in ("model", "question_id")})(cw),
                       "responses.2"),
    "order-broken": (_response(order=0), "responses.order"),
}


@pytest.mark.parametrize("path", ["score-folder", "score-files", "score-run", "report", "plan-sample"])
@pytest.mark.parametrize("case", BAD_DESIGNS)
def test_a_design_that_is_not_its_draw_stops_every_path(cw, path, case):
    edit, field = BAD_DESIGNS[case]
    edit(cw)
    cw.clean_failure(_argv(cw, path), [cw.sample, field])


def test_the_viewer_offers_no_queue_or_board_for_an_edited_design(cw):
    _edit_population(cw)
    client = _viewer(cw.run)
    over = client.get("/api/overview").json()
    assert over["corrected"] == [] and client.get("/api/sample?name=calibration").status_code == 404


def test_a_design_with_a_system_these_verdicts_lack_corrects_the_others_and_says_so(cw):
    """A consistent design drawn from more systems than the inputs hold (scoring some systems'
    files only): the others are corrected as before; the missing system is named."""
    r = cw.gamut(*_argv(cw, "score-folder"))
    assert r.exit_code == 0, r.output
    before = json.loads((cw.root / "out" / "s.json").read_text())
    shutil.rmtree(cw.run / "verdicts" / HUMAN)  # graded by nobody: so only the design differs
    for judge in ("gold", SYNTHETIC_JUDGE):
        (cw.run / "verdicts" / judge / "reference-omissive.multimodal.jsonl").unlink()
    r = cw.gamut("score", cw.run / "verdicts", "--out", cw.root / "out" / "t.json", "--correct-with", "gold",
                 "--sample", cw.sample)
    assert r.exit_code == 0, r.output
    doc = json.loads((cw.root / "out" / "t.json").read_text())
    assert any("reference-omissive (multimodal), which these verdicts have no scores of" in n
               for n in doc["correction"]["notes"])
    assert {m["model"] for m in doc["models"]} == {m["model"] for m in before["models"]} - {"reference-omissive"}


# ------------------------------------------------------------------ juries

@pytest.mark.parametrize("judges,named", [
    (f"{SYNTHETIC_JUDGE},*", "'*' cannot be used in a file name"),
    (f"gold,{SYNTHETIC_JUDGE}*", "cannot be used in a file name"),
    (f"{SYNTHETIC_JUDGE},{HUMAN}", f"'{HUMAN}' is a human judge"),
    (f"{SYNTHETIC_JUDGE},ghost", "no verdict files of the judge 'ghost'"),
    (f"{SYNTHETIC_JUDGE},../run/verdicts/gold", "cannot be used in a file name"),
    (f"{SYNTHETIC_JUDGE},{SYNTHETIC_JUDGE}", "two or more different judges"),
    ("gold", "two or more different judges"),
])
def test_a_jury_takes_only_model_judges_that_exist_named_exactly(cw, judges, named):
    cw.clean_failure(["jury", cw.run, "--judges", judges, "--name", "panel"], ["--judges" if "verdict files" not in
                                                                                named else "verdicts", named])
    assert not (cw.run / "juries").exists() and not (cw.run / "verdicts" / "panel").exists()


def test_a_jury_with_a_gold_member_is_not_corrected_against_it(cw):
    r = cw.gamut("jury", cw.run, "--judges", f"gold,{SYNTHETIC_JUDGE}", "--name", "panel")
    assert r.exit_code == 0, r.output
    record = cw.run / "juries" / "panel.json"
    for path in ("score-folder", "score-files", "report"):
        argv = [a if a != "human-*" else "gold" for a in _argv(cw, path)]
        cw.clean_failure(argv, [record, "members", "'panel'"])
    # A jury made, before juries were checked, with a human member.
    doc = json.loads(record.read_text())
    record.write_text(json.dumps({**doc, "members": [HUMAN, SYNTHETIC_JUDGE]}))
    for path in ("score-run-folder", "score-run", "plan-sample"):
        cw.clean_failure(_argv(cw, path), [record, "members", HUMAN])
    record.write_text("{not json")
    cw.clean_failure(_argv(cw, "score-folder"), [record, "members"])


# ------------------------------------------------------------------ plan-sample's arguments

@pytest.mark.parametrize("half_width", ["inf", "-inf", "nan", "0", "-3", "1e999"])
def test_plan_sample_refuses_a_half_width_it_cannot_plan_for(cw, half_width):
    cw.clean_failure(["plan-sample", cw.run, "--half-width", half_width], ["--half-width", "finite number"])


def test_a_shared_sample_of_systems_that_share_no_question_is_refused(cw):
    gold = cw.run / "verdicts" / "gold" / "reference-omissive.multimodal.jsonl"
    keep = [r for r in cw.rows(gold) if r["question_id"] == "food-espresso"]
    shutil.rmtree(cw.run / "verdicts" / HUMAN)
    shutil.rmtree(cw.run / "verdicts" / SYNTHETIC_JUDGE)
    cw.write(gold, keep)
    other = cw.run / "verdicts" / "gold" / "reference-complete.multimodal.jsonl"
    cw.write(other, [r for r in cw.rows(other) if r["question_id"] != "food-espresso"])
    cw.clean_failure(["sample", cw.run, "--responses", 3, "--shared", "--name", "shared"], ["--shared", "share no"])
