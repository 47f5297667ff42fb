"""The tests' way to score and compare verdict records or files: through the stages' own entry
points (`stages.score.write_scores`, `stages.agree.write_agreement`), records written as
JSON Lines first, and what they wrote read back as the documents the files hold."""

import json
import math
import tempfile
from pathlib import Path

from gamut_local.analysis.scoring import N_BOOT, Coded
from gamut_local.data.reading import read_responses
from gamut_local.rundir.store import write_jsonl
from gamut_local.stages.agree import write_agreement
from gamut_local.stages.score import write_scores
from gamut_local.vocab import TIERS


def score_files(paths, dataset: Path | None = None, *, seed: int = 0, n_boot: int = N_BOOT) -> dict:
    """scores.json as `score` writes it, its per-response rows inline (`responses`)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "scores.json"
        doc = write_scores(out, [Path(p) for p in paths], dataset, seed=seed, n_boot=n_boot,
                           allow_incomplete=True).model_dump(mode="json")
        assert json.loads(out.read_text()) == doc
        read = read_responses(out.with_name(doc["responses_file"]))
    cols = {k: Coded.of(v).tolist() if isinstance(v, tuple) else list(v) for k, v in read.items() if v is not None}
    doc["responses"] = [{
        "judge": cols["judge"][i], "model": cols["model"][i], "variant": cols["variant"][i],
        "question_id": cols["question_id"][i], "score": _num(cols["score"][i]),
        "tier_scores": {t: _num(cols[t][i]) for t in TIERS}, "n_expected": int(cols["n_expected"][i]),
        "complete": bool(cols["complete"][i])} for i in range(len(cols["judge"]))]
    return doc


def score_records(records, *, seed: int = 0, n_boot: int = N_BOOT) -> dict:
    """`score_files` of verdict dicts (any mix of judges, models and variants)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "verdicts.jsonl"
        write_jsonl(path, [_complete(r) for r in records])
        return score_files([path], seed=seed, n_boot=n_boot)


def agree_files(paths) -> dict:
    """agreement.json as `agree` writes it."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "agreement.json"
        doc = write_agreement(out, [Path(p) for p in paths], allow_incomplete=True).model_dump(mode="json")
        assert json.loads(out.read_text()) == doc
        return doc


def agree_records(records) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "verdicts.jsonl"
        write_jsonl(path, [_complete(r) for r in records])
        return agree_files([path])


def _complete(record: dict) -> dict:
    return record


def _num(x) -> float | None:
    return None if x is None or math.isnan(x) else float(x)
