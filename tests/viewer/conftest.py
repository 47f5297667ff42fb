"""The viewer's run directory: the bundled sample with its gold verdicts and a seeded synthetic
second judge (no model), scored by the real score stage."""

from __future__ import annotations

import pytest


@pytest.fixture
def sample_run(tmp_path, gamut):
    """Scored by `gamut-local score`, so scores.json is exactly what users have."""
    from gamut_local.rundir.layout import scores_path, verdict_files
    from tests.support.sample_run import build_sample_run

    run = build_sample_run(tmp_path / "run", seed=0)
    res = gamut("score", *verdict_files(run), "--out", scores_path(run))
    assert res.exit_code == 0, res.output
    return run


@pytest.fixture
def assigned_team(gamut):
    """`assigned_team(run, responses, overlap)`: the run's sample drawn (`responses` per model),
    alice and bob added, and the sample assigned to them through the CLI; their sign-in tokens."""
    from gamut_local.rundir import annotators
    from gamut_local.stages.sample import draw_sample

    def make(run, responses: int, overlap: float) -> dict[str, str]:
        draw_sample(run, responses, per="model", seed=1)
        tokens = {n: annotators.add(run, n) for n in ("alice", "bob")}
        res = gamut("annotators", "assign", run, "--annotator", "alice", "--annotator", "bob", "--overlap", str(overlap))
        assert res.exit_code == 0, res.output
        return tokens

    return make


@pytest.fixture
def client_for():
    """A test client over a run, addressed to 127.0.0.1 as the browser would address it."""
    from starlette.testclient import TestClient

    from gamut_local.viewer.app import create_app
    from gamut_local.viewer.index import open_run

    def make(run, **kwargs):
        return TestClient(create_app(open_run(run), **kwargs), base_url="http://127.0.0.1:8765")

    return make
