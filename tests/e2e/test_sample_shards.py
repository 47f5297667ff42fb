"""The whole bundled sample judged in shards: each shard's unit holds its own questions, and
together they are the unsharded run's verdicts and scores. With the stand-in engine (labels a
hash of the prompt), so it is cheap enough to run over every question, every check the sample's
rubrics compile to and every reference system; that a real engine gives the same labels and
probabilities within 1e-5 whatever the shard's batches is test_slurm_run.py's, through a real
SLURM array on three of these questions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

# Imported before the stand-in engine goes in: the pipeline binds `load_engine` when it is first
# imported, and `install` would then record the stand-in as the value to put back afterwards.
import gamut_local.stages.pipeline  # noqa: F401
from gamut_local.data.records import verdict_key
from gamut_local.rundir import verdict_store
from gamut_local.rundir.layout import verdict_files
from tests.support.fake_engine import install
from tests.support.small_run import SAMPLE_DIR

SHARDS = 2


@pytest.fixture
def config(tmp_path):
    judge = tmp_path / "models" / "judge"
    judge.mkdir(parents=True)
    (judge / "config.json").write_text('{"architectures": ["Fake"]}')

    def make(name: str) -> Path:
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump({
            "name": name, "dataset": str(SAMPLE_DIR / "questions.jsonl"), "output_dir": str(tmp_path / name),
            "models": [], "judges": [{"name": "fj", "path": str(judge), "vision": False}],
            "extra_answers": [str(SAMPLE_DIR / "answers" / "reference.jsonl")],
            "extra_verdicts": [str(SAMPLE_DIR / "verdicts" / "gold.jsonl")], "chunk_size": 64}))
        return path

    return make


def _verdicts(run: Path) -> dict[tuple, tuple]:
    return {verdict_key(r): (r["verdict"], r["probs"]) for p in verdict_files(run) for _, r in verdict_store.records(p)}


def test_the_whole_samples_shards_are_the_unsharded_run(config, gamut, monkeypatch, tmp_path):
    install(monkeypatch)
    whole, sharded = config("whole"), config("sharded")
    for argv in (["judge", "--config", whole], ["score-run", "--config", whole],
                 *(["judge", "--config", sharded, "--shard", f"{i}/{SHARDS}"] for i in range(SHARDS)),
                 ["score-run", "--config", sharded]):
        res = gamut(*argv)
        assert res.exit_code == 0, res.output
    units = verdict_files(tmp_path / "sharded")
    assert {p.name.split(".shard-")[1] for p in units} == {f"{i}-of-{SHARDS}.parquet" for i in range(SHARDS)}
    questions = {}
    for p in units:
        for _, r in verdict_store.records(p):
            questions.setdefault(r["question_id"], set()).add(p.name.split(".shard-")[1])
    assert len(questions) == 13 and all(len(s) == 1 for s in questions.values()), questions  # disjoint
    got, want = _verdicts(tmp_path / "sharded"), _verdicts(tmp_path / "whole")
    assert got == want and {k[1] for k in want} == {"reference-complete", "reference-omissive",
                                                     "reference-contradicting"}
    scores = [json.loads((tmp_path / r / "scores" / "scores.json").read_text())["models"] for r in ("sharded", "whole")]
    assert scores[0] == scores[1]
