"""Fixtures of the hostile-input corpus: a small world (dataset, image, model folders, run
config) in tmp_path, the fake engine in place of real ones, and `expect`, which runs one
command and checks what every case must hold: the exit code, no traceback, the file/field
named, and every input byte-identical afterwards.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import yaml

CHECKS = [{"check_id": "c1", "text": "The response names the subject.", "tier": "answer_critical"},
          {"check_id": "c2", "text": "The response explains how it works.", "tier": "valuable"},
          {"check_id": "c3", "text": "The response gives some history.", "tier": "context"}]


def question(qid: str, **extra) -> dict:
    return {"question_id": qid, "domain": "d", "question": f"What is {qid}?",
            "question_text_only": f"What is the thing called {qid}?", "checks": CHECKS, **extra}


class World:
    """A run's inputs in one folder; `snapshot`/`unchanged` prove that a command left them alone."""

    question = staticmethod(question)
    checks = CHECKS

    def __init__(self, root: Path):
        self.root = root
        self.dataset = root / "data.jsonl"
        self.write_jsonl(self.dataset, [question(f"q{i}") for i in range(1, 5)])
        for name in ("cand", "judge"):
            (root / "models" / name).mkdir(parents=True)
            (root / "models" / name / "config.json").write_text('{"architectures": ["Fake"]}')
        self.run_dir = root / "run"

    def write_jsonl(self, path: Path, rows: list[dict]) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        return path

    def config(self, file: str = "run.yaml", text: str | None = None, **over) -> Path:
        cfg = {"name": "hostile", "dataset": "data.jsonl", "output_dir": "run",
               "models": [{"name": "cand", "path": "models/cand", "vision": False}],
               "variants": ["text_only"],
               "judges": [{"name": "judge", "path": "models/judge"}], "chunk_size": 4}
        cfg.update(over)
        path = self.root / file
        path.write_text(text if text is not None else yaml.safe_dump(cfg, sort_keys=False))
        return path

    def verdicts(self, path: Path, judge: str = "gold", model: str = "ref", qids=("q1", "q2", "q3", "q4"),
                 **over) -> Path:
        rows = [{"question_id": q, "model": model, "variant": "text_only", "judge": judge,
                 "check_id": c["check_id"], "tier": c["tier"], "verdict": "meets", **over}
                for q in qids for c in CHECKS]
        return self.write_jsonl(path, rows)

    def answers(self, path: Path, model: str = "ref", qids=("q1", "q2", "q3", "q4")) -> Path:
        return self.write_jsonl(path, [{"question_id": q, "model": model, "variant": "text_only",
                                        "response": f"{q} is a thing."} for q in qids])

    def snapshot(self) -> dict[str, str]:
        """Hashes of every file outside the run directory (the inputs)."""
        out = {}
        for p in sorted(self.root.rglob("*")):
            if p.is_file() and not p.is_symlink() and self.run_dir not in p.parents:
                out[str(p.relative_to(self.root))] = hashlib.sha256(p.read_bytes()).hexdigest()
        return out

    def lines(self, pattern: str) -> int:
        return sum(len(p.read_text().splitlines()) for p in self.run_dir.glob(pattern))


@pytest.fixture
def world(tmp_path, monkeypatch) -> World:
    monkeypatch.chdir(tmp_path)
    return World(tmp_path)


@pytest.fixture
def fake(monkeypatch) -> list[str]:
    """The fake engine in place of real ones; the list of specs it loaded."""
    from tests.support.fake_engine import install

    return install(monkeypatch)


@pytest.fixture
def expect(world, fake):
    """expect(code, *argv, named=[...]) -> output: runs `gamut-local argv` in-process and
    asserts the exit code, no traceback, each `named` text in the output, inputs unchanged."""
    from typer.testing import CliRunner

    from gamut_local.cli.main import app

    runner = CliRunner()

    def run(code: int, *argv, named=(), loads: int | None = None, inputs_change: bool = False) -> str:
        before = world.snapshot()
        res = runner.invoke(app, [str(a) for a in argv])
        out = res.output
        assert res.exit_code == code, f"exit {res.exit_code}, wanted {code}:\n{out}\n{res.exception!r}"
        assert "Traceback" not in out, out
        if code != 0:
            assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
        for text in named:
            assert str(text) in out, f"{text!r} not in:\n{out}"
        if loads is not None:
            assert len(fake) == loads, f"{fake} loaded, wanted {loads}"
        if not inputs_change:
            assert world.snapshot() == before, "an input file changed"
        return out

    return run


@pytest.fixture
def exported(world, expect):
    folder = world.root / "edit"
    expect(0, "export", world.dataset, "--out", folder, inputs_change=True)
    return folder
