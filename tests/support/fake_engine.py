"""A small deterministic stand-in engine, for tests of everything around the engine (input
checks, resume, faults), where loading a real model would only cost time.

Answers and labels are a hash of the conversation, so a rerun reproduces them. `FAKE_DELAY`
(seconds per engine call) gives a test time to kill a process mid-run. Asked for output held
to a JSON schema (`draft`), it answers a one-item meta-rubric citing the first snippet, so the
steps after drafting have something valid to read. `LOADS` lists the
specs loaded in this process, so a test can assert that bad input failed before any load.

Only tests select it: `install(monkeypatch)` replaces the engine loader that the stages use
(in-process), and tests/hostile/fake_cli.py does the same in a subprocess. It mirrors the
result types of `gamut_local.engines` field for field (this layer may not import engines).
"""

from __future__ import annotations

import importlib
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from gamut_local.hashing import short_hash

LOADS: list[str] = []
LABELS = ("meets", "partially_meets", "missing", "contradicts")


@dataclass
class FakeCompletion:
    text: str
    finish_reason: str | None
    prompt_tokens: int
    completion_tokens: int
    num_cached_tokens: int | None
    reasoning: str | None = None
    reasoning_tokens: int | None = None
    failure: None = None  # a fake request never fails transiently


@dataclass
class FakeClassification:
    probs: dict[str, float]
    label: str | None
    raw: str
    method: str
    prompt_tokens: int
    num_cached_tokens: int | None
    attempts: int = 1
    failure: None = None  # a fake request never fails transiently


def _digest(conversation) -> int:
    text = json.dumps(conversation, default=lambda o: f"<{type(o).__name__}>", sort_keys=True)
    return int(short_hash(text, chars=8), 16)


def _meta_rubric(n: int) -> str:
    item = {"id": "fact-1", "type": "simple", "tier": "answer_critical", "subject": "the subject",
            "fact": f"it is thing {n % 997}", "evidence": ["S1"]}
    return json.dumps({"items": [item]})


@dataclass
class FakeEngine:
    name: str
    backend: str = "fake"
    delay: float = field(default_factory=lambda: float(os.environ.get("FAKE_DELAY", "0")))
    calls: int = 0

    def _tick(self):
        self.calls += 1
        if self.delay:
            time.sleep(self.delay)

    def chat(self, conversations, sampling):
        self._tick()
        if getattr(sampling, "json_schema", None) is not None:
            return [FakeCompletion(_meta_rubric(_digest(c)), "stop", 10, 30, 0) for c in conversations]
        return [FakeCompletion(f"answer {_digest(c) % 997}", "stop", 10, 3, 0) for c in conversations]

    def classify(self, conversations, labels):
        self._tick()
        out = []
        for c in conversations:
            label = list(labels)[_digest(c) % len(labels)]
            out.append(FakeClassification({x: float(x == label) for x in labels}, label, label,
                                          "structured_choice", 20, 10))
        return out

    def close(self):
        pass


def load_fake(spec, startup=None) -> FakeEngine:
    LOADS.append(spec.name)
    return FakeEngine(spec.name)


# Where the loader is looked up: the package's name, `engines.load_and_close`'s and the pipeline's keeper.
TARGETS = ("gamut_local.engines.load_engine", "gamut_local.engines.loading.load_engine",
           "gamut_local.stages.pipeline.load_engine")


def sample_models(monkeypatch, tmp_path) -> Path:
    """The sample config's model folder as the fake engine needs it (a config naming no real
    architecture), with GAMUT_MODEL_CACHE and GAMUT_RUNS under `tmp_path`; returns the folder
    of models."""
    models = tmp_path / "models"
    (models / "smollm2-135m-instruct").mkdir(parents=True)
    (models / "smollm2-135m-instruct" / "config.json").write_text('{"architectures": ["Fake"]}')
    monkeypatch.setenv("GAMUT_MODEL_CACHE", str(models))
    monkeypatch.setenv("GAMUT_RUNS", str(tmp_path / "runs"))
    return models


def patch_loader(monkeypatch, loader) -> None:
    """Put `loader` in place of the engine loader at every one of TARGETS, for the test.

    Every module that holds the loader is imported before any is patched: a module first
    imported while the package's loader is already patched binds the patched one at import
    (`from gamut_local.engines import load_engine`), monkeypatch records that as the value to
    restore, and the stand-in would outlive the test."""
    for target in TARGETS:
        importlib.import_module(target.rsplit(".", 1)[0])
    for target in TARGETS:
        monkeypatch.setattr(target, loader)


def install(monkeypatch) -> list[str]:
    """Make every stage (and `gamut-local run`) use the fake engine; returns LOADS, cleared."""
    LOADS.clear()
    patch_loader(monkeypatch, load_fake)
    return LOADS
