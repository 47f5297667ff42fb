"""A small real run over the bundled sample, for the tests that run real engines end to end:
a config like configs/runs/sample.yaml, smaller (short answers, one reference model), on the
suite's SmolLM2 settings, so a `judge` subprocess loads what an in-process run used."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from gamut_local.config import PROJECT_ROOT, load_run_config
from tests.support.engines import VLLM_CPU_TEST_ENGINE
from gamut_local.demo.smollm2 import FOLDER_NAME, model_cache_dir

SAMPLE_DIR = PROJECT_ROOT / "gamut_local" / "data" / "sample"
SMOLLM2 = model_cache_dir() / FOLDER_NAME
ENGINE = VLLM_CPU_TEST_ENGINE.model_dump(mode="json", exclude_unset=True)


def write_config(run_root: Path, **over) -> Path:
    """A run like configs/runs/sample.yaml, smaller: short answers, one reference model."""
    ref = run_root / "reference-complete.jsonl"
    if not ref.exists():
        ref.parent.mkdir(parents=True, exist_ok=True)
        ref.write_text("".join(line + "\n" for line in
                               (SAMPLE_DIR / "answers" / "reference.jsonl").read_text().splitlines()
                               if '"reference-complete"' in line))
    cfg = {"name": "t", "dataset": str(SAMPLE_DIR / "questions.jsonl"), "output_dir": str(run_root / "run"),
           "models": [{"name": "smol", "path": str(SMOLLM2), "backend": "vllm", "vision": False,
                       "engine": ENGINE, "sampling": {"max_tokens": 48}}],
           "variants": ["text_only"],
           "judges": [{"name": "smolj", "path": str(SMOLLM2), "backend": "vllm", "vision": False,
                       "engine": ENGINE}],
           "extra_answers": [str(ref)], "extra_verdicts": [str(SAMPLE_DIR / "verdicts" / "gold.jsonl")],
           "chunk_size": 64, **over}
    path = run_root / "run.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def copy_answers(full_run, root: Path) -> Path:
    """A fresh run directory holding the full run's answers: the judge's work is all left."""
    cfg = write_config(root)
    dest = Path(load_run_config(cfg).output_dir) / "answers"
    shutil.copytree(full_run["out"] / "answers", dest)
    return cfg
