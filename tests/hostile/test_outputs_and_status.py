"""Hostile input on what commands report and write: `status` and `slurm --submit`
over a damaged `slurm/jobs.json`, `status`'s counts, a back end whose extra is not installed,
`report --allow-incomplete` on systems that share no question (whole outputs or none), the
viewer asked for a page while it reads a run it then refuses, and the manifest after a
settings change. Every failure: non-zero exit, no traceback, the file and field named, every
file byte-identical afterwards."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import pytest

SAMPLE = Path(__file__).resolve().parents[2] / "gamut_local" / "data" / "sample" / "questions.jsonl"


def _tree(folder: Path) -> dict[str, str]:
    """Every file under `folder` (the run directory included) by its hash."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


# ------------------------------------------------------------------ slurm/jobs.json, damaged

GOOD_JOB = {"key": "generate.cand", "stage": "generate", "job_id": "4242", "script": "s.sbatch",
            "array": "0-1", "log": "run/slurm/logs/gen-4242_%a.out"}


def _jobs(**job) -> str:
    return json.dumps({"submissions": [{"time": "t", "config": "run.yaml", "jobs": [{**GOOD_JOB, **job}]}]})


DAMAGED = {  # what a damaged record holds -> the field the message must name
    "truncated": (_jobs()[:57], ["not valid JSON", "cut short"]),
    "empty": ("", ["not valid JSON"]),
    "not UTF-8": (b"\xff\xfe{}", ["not valid JSON"]),
    "a list": ("[]", ["submissions", "missing"]),
    "no submissions": ('{"subs": []}', ["submissions", "missing"]),
    "jobs not a list": ('{"submissions": [{"config": "run.yaml", "jobs": 3}]}', ["submissions.0.jobs"]),
    "a job not an object": ('{"submissions": [{"jobs": ["x"]}]}', ["submissions.0.jobs.0"]),
    "no job id": (_jobs(job_id=None), ["submissions.0.jobs.0.job_id", "missing"]),
    "no key": (_jobs(key=""), ["submissions.0.jobs.0.key"]),
    "job id not digits": (_jobs(job_id="12;rm"), ["submissions.0.jobs.0.job_id", "'12;rm'"]),
    "array backwards": (_jobs(array="5-2"), ["submissions.0.jobs.0.array", "'5-2'"]),
    "array not a range": (_jobs(array="0-x"), ["submissions.0.jobs.0.array", "'0-x'"]),
    "array of a billion tasks": (_jobs(array="0-999999999"), ["submissions.0.jobs.0.array"]),
    "array a number": (_jobs(array=3), ["submissions.0.jobs.0.array"]),
    "log a list": (_jobs(log=["a"]), ["submissions.0.jobs.0.log"]),
    "config a number": ('{"submissions": [{"config": 1, "jobs": []}]}', ["submissions.0.config"]),
}


def _damage(world, content) -> Path:
    jobs = world.run_dir / "slurm" / "jobs.json"
    jobs.parent.mkdir(parents=True, exist_ok=True)
    jobs.write_bytes(content if isinstance(content, bytes) else content.encode())
    return jobs


@pytest.mark.parametrize("case", sorted(DAMAGED))
@pytest.mark.parametrize("given", ["config", "run directory"])
def test_status_names_a_damaged_jobs_record(world, expect, case, given):
    content, words = DAMAGED[case]
    cfg = world.config()
    jobs = _damage(world, content)
    target = world.run_dir if given == "run directory" else cfg  # a run directory: its config is in the record
    before = _tree(world.root)
    out = expect(1, "status", *(["--config"] if given == "config" else []), target, named=[str(jobs), *words])
    assert "internal error" not in out and _tree(world.root) == before


@pytest.fixture
def sbatch(world, monkeypatch):
    """A stand-in sbatch on PATH that logs its calls; returns the log's path."""
    bin_dir = world.root.parent / f"{world.root.name}-bin"
    bin_dir.mkdir()
    log = bin_dir / "calls.log"
    (bin_dir / "sbatch").write_text(f"#!{sys.executable}\nimport sys\n"
                                    f"open({str(log)!r}, 'a').write(' '.join(sys.argv) + '\\n')\nprint('4243')\n")
    (bin_dir / "sbatch").chmod(0o755)
    # A controller that does not answer: the request check is skipped, as without sinfo.
    (bin_dir / "sinfo").write_text("#!/bin/sh\necho 'Unable to contact slurm controller' >&2\nexit 1\n")
    (bin_dir / "sinfo").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return log


@pytest.mark.parametrize("case", ["truncated", "no job id", "array backwards", "jobs not a list"])
@pytest.mark.parametrize("force", [False, True])
def test_submit_refuses_a_damaged_jobs_record_before_any_sbatch(world, expect, sbatch, case, force):
    """Read first: with --force too, a record found damaged only after the new jobs were
    queued would leave jobs that no file records."""
    content, words = DAMAGED[case]
    cfg = world.config()
    jobs = _damage(world, content)
    before = _tree(world.root)
    expect(1, "slurm", "--config", cfg, "--submit", *(["--force"] if force else []), named=[str(jobs), *words])
    assert not sbatch.exists() and _tree(world.root) == before


def test_a_good_record_is_read_and_a_resubmission_appends_to_it(world, expect, sbatch):
    cfg = world.config()
    _damage(world, _jobs(array="0-1,3%2"))
    out = expect(0, "status", "--config", cfg, inputs_change=True)
    assert "job 4242" in out
    expect(0, "slurm", "--config", cfg, "--submit", "--force", inputs_change=True)
    subs = json.loads((world.run_dir / "slurm" / "jobs.json").read_text())["submissions"]
    assert len(subs) == 2 and subs[0]["jobs"][0]["array"] == "0-1,3%2" and subs[1]["jobs"][0]["job_id"] == "4243"


@pytest.mark.parametrize("job", [{"log": None}, {"array": None, "key": "score"}, {"array": "0-1:1"}])
def test_optional_fields_of_a_record_may_be_empty(world, expect, job):
    cfg = world.config()
    _damage(world, _jobs(**job))
    assert "job 4242" in expect(0, "status", "--config", cfg, inputs_change=True)


# ------------------------------------------------------------------ status: what it counts

def _two_questions(world) -> None:
    """Two sample questions whose flexible lists compile to fewer checks at small_pool_max 0."""
    rows = [json.loads(line) for line in SAMPLE.read_text().splitlines() if line]
    rows = [r for r in rows if r["question_id"] in ("animals-tabby-cat", "animals-horse")]
    for r in rows:
        r.pop("image")
    world.write_jsonl(world.dataset, rows)


@pytest.mark.parametrize("pool, expected", [(0, 13 + 14), (6, 16 + 17)])
def test_status_counts_extra_answers_with_the_runs_compile_setting(world, expect, pool, expected):
    """A system given as extra answers (nothing generated for it) is judged on its answered
    questions, with the checks the run's `compile.small_pool_max` makes (13 + 14 checks at 0,
    16 + 17 at the default 6, counted by hand from the sample's rubrics)."""
    _two_questions(world)
    world.answers(world.root / "ref.jsonl", model="ref", qids=("animals-tabby-cat", "animals-horse"))
    cfg = world.config(extra_answers=["ref.jsonl"], compile={"small_pool_max": pool})
    out = expect(0, "status", "--config", cfg, inputs_change=True)
    assert f"0/{expected} verdicts of the answers of 2 systems" in out
    expect(0, "judge", "--config", cfg, "--model", "ref", inputs_change=True)
    out = expect(0, "status", "--config", cfg, inputs_change=True)
    assert f"{expected}/{expected} verdicts of the answers of 2 systems" in out


# ------------------------------------------------------------------ a back end whose extra is absent

@pytest.mark.parametrize("hidden, backend, extra", [
    (["httpx"], "openai", "gamut_local[openai]"),
    (["vllm"], "vllm", "gamut_local[vllm]"),
    (["torch"], "transformers", "gamut_local[transformers]"),
    (["transformers"], "transformers", "gamut_local[transformers]"),
    (["transformers", "vllm"], "auto", "gamut_local[vllm]"),
])
def test_a_backend_without_its_extra_names_the_extra(world, monkeypatch, hidden, backend, extra):
    """As on a core install: the module cannot be imported (None in sys.modules makes Python
    refuse it), and loading the engine, or reading a served judge's identity, says which extra
    to install, for the config's `backend` field."""
    from gamut_local.config import JudgeSpec
    from gamut_local.engines import judge_identity, load_engine
    from gamut_local.errors import InputError

    for name in hidden:
        monkeypatch.setitem(sys.modules, name, None)
    path = str(world.root / "models" / "judge") if backend != "openai" else "served-model"
    spec = JudgeSpec(name="j", path=path, backend=backend,
                     **({"server": {"base_url": "http://127.0.0.1:9/v1"}} if backend == "openai" else {}))
    calls = [load_engine] + ([judge_identity] if backend == "openai" else [])
    for call in calls:
        with pytest.raises(InputError) as e:
            call(spec)
        (p,) = e.value.problems
        assert p.field == "backend" and f"pip install '{extra}'" in p.message and hidden[0] in p.message


def test_a_served_judge_without_httpx_stops_judge_cleanly(world, expect, monkeypatch):
    """Through the command: the served judge's identity (its settings hash) is read first."""
    monkeypatch.setitem(sys.modules, "httpx", None)
    world.answers(world.root / "ref.jsonl", model="ref")
    cfg = world.config(judges=[{"name": "judge", "path": "served-model", "backend": "openai",
                                "server": {"base_url": "http://127.0.0.1:9/v1"}}], extra_answers=["ref.jsonl"])
    out = expect(1, "judge", "--config", cfg, "--model", "ref", named=["run.yaml", "judges.0.backend",
                                                                      "pip install 'gamut_local[openai]'"])
    assert "ModuleNotFoundError" not in out and "internal error" not in out


def test_every_optional_import_is_in_an_extra():
    """Each third-party module the package imports is a core dependency or in an extra of
    pyproject.toml (by distribution name): `backend: openai` once needed httpx, which only the
    `test` extra listed."""
    import ast
    import tomllib

    root = Path(__file__).resolve().parents[2]
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    declared = " ".join([*project["dependencies"], *(d for ds in project["optional-dependencies"].values()
                                                     for d in ds if ds is not project["optional-dependencies"]["test"])])
    # module -> distribution, where the names differ
    dist = {"PIL": "pillow", "yaml": "pyyaml", "skimage": "scikit-image", "ppi_py": "ppi-python",
            "crowdkit": "crowd-kit", "huggingface_hub": "huggingface_hub", "qwen_vl_utils": "qwen-vl-utils",
            "pydantic_core": "pydantic", "click": "typer"}
    optional = {"torchvision"}  # imported only to see whether vLLM's image path works here
    found = {}
    for path in (root / "gamut_local").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else []
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top != "gamut_local":
                    found.setdefault(top, str(path.relative_to(root)))
    undeclared = {m: f for m, f in found.items() if m not in optional and dist.get(m, m).replace("_", "-") not in declared.replace("_", "-")}
    assert not undeclared, undeclared
    extras = project["optional-dependencies"]
    assert any(d.startswith("httpx") for d in extras["openai"])


# ------------------------------------------------------------------ report: no common question; whole or nothing

def _systems(world, judge: str, systems: dict[tuple[str, str], tuple[str, ...]], drop: str | None = None) -> None:
    """`judge`'s verdicts in the run directory: each (model, variant) on its own questions;
    `drop`: a check id left out of every response (none complete)."""
    for (model, variant), qids in systems.items():
        rows = [{"question_id": q, "model": model, "variant": variant, "judge": judge, "check_id": c["check_id"],
                 "tier": c["tier"], "verdict": "meets" if i % 2 else "missing"}
                for i, q in enumerate(qids) for c in world.checks if c["check_id"] != drop]
        world.write_jsonl(world.run_dir / "verdicts" / judge / f"{model}.{variant}.jsonl", rows)


DISJOINT = {  # a run whose systems share no question with complete verdicts, per shape
    "two systems, one judge": lambda w: _systems(w, "gold", {("a", "text_only"): ("q1", "q2"),
                                                             ("b", "text_only"): ("q3", "q4")}),
    "one system, no response complete": lambda w: _systems(w, "gold", {("a", "text_only"): ("q1", "q2")}, drop="c2"),
    "two variants of one model": lambda w: _systems(w, "gold", {("a", "multimodal"): ("q1",),
                                                                ("a", "text_only"): ("q2", "q3")}),
    "a second judge disjoint, the first complete": lambda w: (
        _systems(w, "gold", {("a", "text_only"): ("q1", "q2", "q3", "q4"), ("b", "text_only"): ("q1", "q2", "q3", "q4")}),
        _systems(w, "j2", {("a", "text_only"): ("q1", "q2"), ("b", "text_only"): ("q3", "q4")})),
    "two judges, both disjoint": lambda w: (
        _systems(w, "gold", {("a", "text_only"): ("q1",), ("b", "text_only"): ("q2",)}),
        _systems(w, "j2", {("a", "text_only"): ("q3",), ("b", "text_only"): ("q4",)})),
}


# Without a dataset, coverage is judged from the verdicts: a check no response has, or a
# variant on questions of its own, is then not a gap; systems of one variant on other questions are.
@pytest.mark.parametrize("shape, with_dataset", [(s, True) for s in sorted(DISJOINT)] + [
    (s, False) for s in sorted(DISJOINT) if "one model" not in s and "no response complete" not in s])
def test_report_allow_incomplete_on_systems_sharing_no_question(world, expect, shape, with_dataset):
    """The tool's own advice (`--allow-incomplete`) once stopped with an internal error
    (`min()` of an empty list in the leaderboard figure) after writing scores/ and half of
    tables/. Now: a whole report whose leaderboard has no rank and no score where nothing is
    shared, and says why."""
    DISJOINT[shape](world)
    args = ["--dataset", world.dataset] if with_dataset else []
    expect(1, "report", world.run_dir, *args, named=["--allow-incomplete"])
    assert not (world.run_dir / "report.md").exists() and not (world.run_dir / "scores").exists()
    out = expect(0, "report", world.run_dir, *args, "--allow-incomplete", inputs_change=True)
    assert "internal error" not in out
    md = (world.run_dir / "report.md").read_text()
    assert "share no question that each has complete" in md
    board = json.loads((world.run_dir / "tables" / "report.json").read_text())["leaderboard"]
    empty = [r for r in board if r["n_questions"] == 0]
    assert empty and all(r["rank"] is None and r["gamut_score"] is None for r in empty)
    assert [r["rank"] for r in board if r["n_questions"]] in ([], [1, 2])
    assert not list(world.run_dir.glob(".report-staging-*"))
    # The figures the report shows are all there, and a second report is the first's files.
    shown = [line.split("(")[1].rstrip(")") for line in md.splitlines() if line.startswith("![")]
    assert all((world.run_dir / p).is_file() for p in shown)
    before = _tree(world.run_dir)
    expect(0, "report", world.run_dir, *args, "--allow-incomplete", inputs_change=True)
    assert _tree(world.run_dir) == before


@pytest.mark.parametrize("broken", ["tiers", "leaderboard", "domains"])
def test_a_report_that_fails_half_way_changes_nothing(world, expect, monkeypatch, broken):
    """Every output is whole or absent: a report stopped by a failure after scores/ and
    tables/ are written (here: a bug planted in one figure) leaves the run directory as it was,
    the earlier report included, and says nothing was written."""
    from gamut_local.reporting import figures

    _systems(world, "gold", {("a", "text_only"): ("q1", "q2", "q3", "q4"), ("b", "text_only"): ("q1", "q2", "q3", "q4")})
    expect(0, "report", world.run_dir, "--dataset", world.dataset, inputs_change=True)
    _systems(world, "gold", {("a", "text_only"): ("q1", "q2", "q3", "q4"), ("b", "text_only"): ("q2", "q3", "q4")})
    before = _tree(world.run_dir)

    def bug(tables, path):
        raise ZeroDivisionError("a planted bug")

    monkeypatch.setitem(figures.FIGURES, broken, bug)
    out = expect(2, "report", world.run_dir, "--dataset", world.dataset, "--allow-incomplete", inputs_change=True)
    assert "internal error: ZeroDivisionError" in out and "nothing was written" in out
    assert _tree(world.run_dir) == before
    assert not list(world.run_dir.glob(".report-staging-*"))
    monkeypatch.undo()
    expect(0, "report", world.run_dir, "--dataset", world.dataset, "--allow-incomplete", inputs_change=True)
    assert "3 of 4 questions" in (world.run_dir / "report.md").read_text()


def test_a_staging_folder_a_killed_report_left_is_not_an_input(world, expect):
    """A report killed mid-way (SIGKILL: no clean-up) leaves its staging folder: the next
    report neither reads it nor moves it in, and a rerun finds its scores current."""
    _systems(world, "gold", {("a", "text_only"): ("q1", "q2", "q3", "q4")})
    (world.run_dir / ".report-staging-dead" / "tables").mkdir(parents=True)
    (world.run_dir / ".report-staging-dead" / "tables" / "leaderboard.csv").write_text("half")
    expect(0, "report", world.run_dir, "--dataset", world.dataset, inputs_change=True)
    from gamut_local.rundir.layout import verdict_files

    assert not any(".report-staging-" in str(p) for p in verdict_files(world.run_dir))
    assert (world.run_dir / "tables" / "leaderboard.csv").read_text() != "half"
    scores = (world.run_dir / "scores" / "scores.json").stat().st_mtime_ns
    expect(0, "report", world.run_dir, "--dataset", world.dataset, inputs_change=True)
    assert (world.run_dir / "scores" / "scores.json").stat().st_mtime_ns == scores


# ------------------------------------------------------------------ the viewer while it reads a run it refuses

BAD_RUNS = {  # damage the background read finds (run_files, which lists the files, does not)
    "a verdict line that is not JSON": lambda run: _append(run / "verdicts" / "gold" / "reference-complete.multimodal.jsonl",
                                                           b"{not json\n{}\n", ["reference-complete.multimodal.jsonl:"]),
    "a verdict with an unknown label": lambda run: _append(
        run / "verdicts" / "gold" / "reference-omissive.multimodal.jsonl",
        json.dumps({"question_id": "food-espresso", "model": "reference-omissive", "variant": "multimodal",
                    "judge": "gold", "check_id": "identity", "tier": "answer_critical",
                    "verdict": "great"}).encode() + b"\n", ["reference-omissive.multimodal.jsonl:", "verdict"]),
    "a dataset cut short": lambda run: _cut(run),
}


def _append(path: Path, data: bytes, words: list[str]) -> list[str]:
    with open(path, "ab") as f:
        f.write(data)
    return words


def _cut(run: Path) -> list[str]:
    dataset = run.parent / "cut.jsonl"
    dataset.write_bytes(SAMPLE.read_bytes()[:3000])
    return ["cut.jsonl"]


@pytest.fixture
def gated(tmp_path):
    """(run, make): the sample run, and make(damage) -> (client, gate): a viewer over it whose
    background read (the real one) starts only once `gate` is set."""
    import threading

    from starlette.testclient import TestClient

    from tests.support.sample_run import build_sample_run
    from gamut_local.viewer.app import create_app
    from gamut_local.viewer.index import read_run
    from gamut_local.viewer.opening import Opening, run_files

    run = build_sample_run(tmp_path / "run", seed=0)

    def make(dataset: Path | None = None, wait_s: float = 30.0):
        gate = threading.Event()

        def read(found):
            gate.wait(30)
            return read_run(found)

        opening = Opening(run_files(run, dataset), read)
        app = create_app(opening, wait_s=wait_s)
        return TestClient(app, base_url="http://127.0.0.1:8765"), gate, opening

    return run, make


PAGES = ["/questions", "/api/questions", "/question/food-espresso", "/api/queue?pos=0", "/queue", "/image/food-espresso"]


@pytest.mark.parametrize("damage", sorted(BAD_RUNS))
@pytest.mark.parametrize("page", PAGES)
def test_a_page_asked_for_while_a_refused_run_is_read_says_why(gated, damage, page, capsys):
    """The read fails while the request waits for it: the answer is the refusal (503, the file
    and field named), never a 500 internal error, and no traceback on the console."""
    import threading

    run, make = gated
    words = BAD_RUNS[damage](run)
    client, gate, opening = make(run.parent / "cut.jsonl" if damage == "a dataset cut short" else None)
    before = _tree(run)
    threading.Timer(0.3, gate.set).start()  # the read fails while the request is waiting
    res = client.get(page)
    assert res.status_code == 503, (res.status_code, res.text[:300])
    text = res.json()["error"] if page.startswith("/api/") else res.text
    assert "cannot be opened" in text and "internal error" not in text
    for w in words:
        assert w in text, text
    again = client.get(page)  # and so on, once it is known
    assert again.status_code == 503 and again.text == res.text
    assert "Traceback" not in capsys.readouterr().err
    assert _tree(run) == before


@pytest.mark.parametrize("page", PAGES + ["/", "/api/overview"])
def test_a_page_asked_for_while_reading_takes_long_says_so(gated, page):
    """A page that needs the verdicts, asked for while they are still being read past the
    wait: 503 "still reading" with Retry-After, not a request that hangs or a 500; the overview
    answers at once from the scores file."""
    run, make = gated
    client, gate, opening = make(wait_s=0.2)
    res = client.get(page)
    if page in ("/", "/api/overview"):
        assert res.status_code == 200 and (res.json()["opening"] if page.startswith("/api/") else True)
    else:
        assert res.status_code == 503 and res.headers["retry-after"] == "2"
        text = res.json()["error"] if page.startswith("/api/") else res.text
        assert "still reading" in text
    gate.set()
    opening.done.wait(60)
    assert client.get(page).status_code == 200


# ------------------------------------------------------------------ the manifest describes the records beside it

def _manifest(world) -> dict:
    return json.loads((world.run_dir / "manifest.json").read_text())


def _hashes(world, folder: str) -> set[str]:
    from gamut_local.rundir.store import read_jsonl

    return {r["settings_hash"] for p in (world.run_dir / folder).rglob("*.jsonl") for _, r in read_jsonl(p)}


@pytest.mark.parametrize("stage, change", [
    ("generate", {"models": [{"name": "cand", "path": "models/cand", "vision": False, "sampling": {"max_tokens": 77}}]}),
    ("generate", {"models": [{"name": "cand", "path": "models/cand", "vision": False, "system_prompt": "Be brief."}]}),
    ("judge", {"judges": [{"name": "judge", "path": "models/judge", "chat_template_kwargs": {"enable_thinking": False}}]}),
    ("generate", {"seed": 7}),
])
def test_a_standalone_stage_after_a_settings_change_rewrites_the_manifest(world, expect, stage, change):
    """`run` rewrote manifest.json; `generate` and `judge` on their own kept the first one, so
    after a settings change it described settings no record beside it was made with."""
    expect(0, "run", "--config", world.config(), inputs_change=True)
    first = _manifest(world)
    cfg = world.config(**change)
    expect(0, "generate", "--config", cfg, inputs_change=True)
    expect(0, "judge", "--config", cfg, inputs_change=True) if stage == "judge" else None
    from gamut_local.config import load_run_config

    spec = load_run_config(cfg)
    now = _manifest(world)
    assert now["config"] == spec.model_dump(mode="json") != first["config"]
    by_role = {(m["role"], m["name"]): m["settings_hash"] for m in now["models"]}
    if stage == "generate" and "models" in change:
        assert by_role[("candidate", "cand")] == spec.models[0].settings_hash() in _hashes(world, "answers")
    assert now["stages"] == first["stages"]  # what `run` recorded of its stages is kept


def test_an_unchanged_config_leaves_the_manifest_alone(world, expect):
    expect(0, "run", "--config", world.config(), inputs_change=True)
    before = (world.run_dir / "manifest.json").read_bytes()
    expect(0, "generate", "--config", world.config(), inputs_change=True)
    expect(0, "judge", "--config", world.config(), inputs_change=True)
    assert (world.run_dir / "manifest.json").read_bytes() == before
