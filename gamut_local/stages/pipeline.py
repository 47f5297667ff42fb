"""`gamut-local run`: compile -> generate -> judge -> score -> report for one run config.

A thin sequence of stage calls; each stage reads and writes files in the run directory, so
rerunning resumes. Everything is checked before any model loads (dataset, images, model
paths, extra answer/verdict files). `manifest.json` records what is needed to reproduce the
run: the resolved config, package versions, model paths, prompt-template hashes, seeds, the
git commit and each stage's wall time.

Scores: `scores/scores.json` holds every judge's verdicts plus the run's `extra_verdicts`
(e.g. the sample's gold verdicts) scored together, one entry per (judge, model, variant).
"""

from __future__ import annotations

import importlib.util

import json
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from rich.console import Console

from gamut_local.config import RunSpec
from gamut_local.data.consistency import current_checks, table_problems
from gamut_local.data.dataset import load_questions
from gamut_local.data.records import load_answers
from gamut_local.data.verdict_table import read_verdicts
from gamut_local.engines import load_engine, model_problem, pick_backend, route_engine_logs
from gamut_local.errors import InputError
from gamut_local.reporting.progress import plain_console, progress_bars
from gamut_local.rundir.layout import check_chunk_size, parse_shard
from gamut_local.rundir.manifest import write_manifest
from gamut_local.rundir.paths import run_dir_problems
from gamut_local.stages.compile import compile_rubric
from gamut_local.stages.generate import generate
from gamut_local.stages.judge import extra_answer_problems, judge, judge_setups
from gamut_local.stages.report import write_report
from gamut_local.stages.sample import draw_sample
from gamut_local.stages.score import score_run


def _collect(fn, problems: list):
    try:
        return fn()
    except InputError as e:
        problems += e.problems
        return None


def preflight(spec: RunSpec, chunk_size: int | None = None) -> None:
    """Every input problem at once, before a model loads: a bad path costs a second, not a GPU hour.

    The dataset (images fully decoded), the extra answers (against the dataset and the
    generated models' names) and extra verdicts (against the dataset's checks and tiers),
    every model folder, the judges' image settings, the output directory and the chunk size.
    """
    problems = run_dir_problems(spec.output_dir, {"dataset": [spec.dataset], "extra_answers": spec.extra_answers,
                                                  "extra_verdicts": spec.extra_verdicts}, spec.source)
    _collect(lambda: check_chunk_size(chunk_size), problems)
    questions = _collect(lambda: load_questions(spec.dataset), problems)
    answers = _collect(lambda: load_answers(spec.extra_answers), problems) if spec.extra_answers else []
    verdicts = _collect(lambda: read_verdicts(spec.extra_verdicts), problems) if spec.extra_verdicts else None
    if questions is not None:
        by_id = {q.question_id: q for q in questions}
        if answers:
            problems += extra_answer_problems(spec, answers, by_id, extra_only=True)
        if verdicts is not None:
            problems += table_problems(verdicts, list(by_id), current_checks(questions, spec.compile.small_pool_max))
    for m in [*spec.models, *spec.judges]:
        problem = model_problem(m)
        if problem:
            problems.append(problem)
    if spec.calibration is not None and importlib.util.find_spec("ppi_py") is None:
        problems.append(spec.problem("calibration", "corrected scores need the `correct` extra (ppi-python): "
                                     "pip install 'gamut_local[correct]', or remove `calibration:`"))
    if problems:
        raise InputError(problems)


class EngineKeeper:
    """Keeps the last engine open, so a judge with the same weights and engine settings as the
    candidate before it (the CPU sample: SmolLM2 both) reuses it instead of starting again."""

    def __init__(self):
        self.key, self.engine = None, None

    @contextmanager
    def __call__(self, spec, startup=None):
        # The chat template's keywords and the reasoning parser are the engine's too (a thinking
        # candidate and a non-thinking judge of the same weights need two engines), and so is
        # the server a `backend: openai` model is served by, and the start-up its engine reads
        # labels by: a served judge, handed its own, never takes a candidate's engine (which reads none).
        key = (pick_backend(spec), spec.path, json.dumps(spec.engine.model_dump(), sort_keys=True),
               json.dumps(spec.chat_template_kwargs, sort_keys=True), spec.reasoning_parser,
               json.dumps(spec.server.model_dump() if spec.server else None, sort_keys=True), startup)
        if key != self.key:
            self.close()
            self.engine, self.key = load_engine(spec, startup), key
        yield self.engine

    def close(self):
        if self.engine is not None:
            self.engine.close()
        self.key, self.engine = None, None


@dataclass(frozen=True)
class StageRun:
    """One stage of `run`: its wall time, what it returned (a path, or per model or judge what
    it did) and the pilot's `limit` (the report says "pilot")."""

    seconds: float
    result: object
    limit: int | None = None

    def as_json(self) -> dict:
        """The manifest's record of the stage."""
        result = [asdict(r) for r in self.result] if isinstance(self.result, list) else self.result
        return {"seconds": self.seconds, "result": result, **({"limit": self.limit} if self.limit is not None else {})}


def run(spec: RunSpec, config_path: str | Path, *, chunk_size: int | None = None, console: Console | None = None,
        open_engine=None, limit: int | None = None, allow_incomplete: bool = False,
        verbose: bool = False) -> dict[str, StageRun]:
    """All stages for one config (`spec`, as loaded from `config_path`, which the manifest
    names); returns each stage's `StageRun`, as also kept in the manifest.

    `open_engine` (spec -> context manager yielding an engine) defaults to an EngineKeeper.
    `limit`: a pilot on the first `limit` questions (rundir.layout.Shard); incomplete by
    design, so it is scored and reported as such (`allow_incomplete` for a full run).
    `verbose`: engines print their own output on the console instead of `logs/engine-run.log`.
    """
    pilot = parse_shard(None, limit)
    console = console or plain_console(stderr=True)
    config_path = Path(config_path)
    preflight(spec, chunk_size)
    # Each judge resolved once, here (a served judge's server asked what it is): the manifest's
    # settings hash, the judge stage's and its engine's readout all come from that start-up.
    setups = judge_setups(spec.judges)
    first = {name: s.settings_hash for name, s in setups.items()}
    write_manifest(spec, config_path, judge_hashes=first)
    stages: dict[str, StageRun] = {}

    def judges_ready(judge_hashes: dict[str, str | None]) -> None:
        if judge_hashes != first:  # a judge's server answered only once generating was done
            write_manifest(spec, config_path, judge_hashes=judge_hashes)

    def timed(name, fn):
        t0 = time.perf_counter()
        result = fn()
        stages[name] = StageRun(round(time.perf_counter() - t0, 2), result, limit)
        write_manifest(spec, config_path, {name: stages[name].as_json()}, refresh=False)
        return result

    keeper = EngineKeeper()
    open_engine = open_engine or keeper
    # Both stages' engines write one log: a judge may reuse the candidate's engine and its processes.
    route_engine_logs(spec.output_dir, "run", verbose)
    try:
        with progress_bars(console) as bars:
            timed("compile", lambda: str(compile_rubric(spec)))
            timed("generate", lambda: generate(spec, shard=pilot, chunk_size=chunk_size, console=console,
                                               progress=bars, open_engine=open_engine, verbose=verbose))
            timed("judge", lambda: judge(spec, shard=pilot, chunk_size=chunk_size, console=console,
                                         progress=bars, open_engine=open_engine, verbose=verbose,
                                         setups=setups, on_ready=judges_ready))
    finally:
        keeper.close()
    allow = allow_incomplete or limit is not None
    cal, sample = spec.calibration, calibration_name(limit)
    if cal is not None:
        timed("sample", lambda: str(draw_sample(Path(spec.output_dir), cal.responses, per=cal.per, seed=cal.seed,
                                                name=sample, console=console).path))
    gold = None if cal is None else cal.gold
    timed("score", lambda: str(score_run(spec, allow_incomplete=allow, correct_with=gold, sample=sample).path))
    timed("report", lambda: str(write_report(Path(spec.output_dir), Path(spec.dataset), seed=spec.seed,
                                             allow_incomplete=allow, pilot=limit, correct_with=gold,
                                             sample=sample)))
    return stages


def calibration_name(limit: int | None) -> str:
    """The sample `run` draws: a pilot's (`--limit`) responses are fewer than the full run's,
    so its sample is another design under its own name, and the full run's never clashes."""
    return "calibration" if limit is None else f"calibration-pilot-{limit}"
