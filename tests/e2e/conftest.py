"""The e2e run, once per session, in-process on the suite's SmolLM2 engine (`full_run`):
test_run.py reads it, test_killed.py and test_slurm_run.py compare what a killed `judge` and a
SLURM run wrote with it."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import pytest

from gamut_local.config import load_run_config
from gamut_local.rundir.layout import verdict_files
from gamut_local.rundir import verdict_store
from gamut_local.rundir.store import read_jsonl
from tests.support.small_run import write_config


@pytest.fixture(scope="session")
def open_smollm2(one_engine, smollm2_vllm_spec):
    """`open_engine` that hands every stage the suite's SmolLM2 engine and leaves it open
    (candidate and judge are the same weights)."""

    @contextmanager
    def open_engine(spec):
        yield one_engine.get(smollm2_vllm_spec)

    return open_engine


@pytest.fixture(scope="session")
def full_run(tmp_path_factory, open_smollm2):
    from gamut_local.stages.pipeline import run

    root = tmp_path_factory.mktemp("full")
    cfg = write_config(root)
    spec = load_run_config(cfg)
    stages = run(spec, cfg, open_engine=open_smollm2)
    out = Path(spec.output_dir)
    return {"cfg": cfg, "spec": spec, "out": out, "stages": stages,
            "answers": [r for _, r in read_jsonl(out / "answers" / "smol.text_only.jsonl")],
            "verdicts": [r for p in verdict_files(out) for _, r in verdict_store.records(p)]}
