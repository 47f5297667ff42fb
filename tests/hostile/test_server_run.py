"""`gamut-local run` with a served candidate and a served judge, each on its own fault server on
127.0.0.1 (no model loads): every server is asked what it is once per run, the judge's
start-up serving the manifest's settings hash, the judge stage's and its engine's alike."""

from __future__ import annotations

import json

from gamut_local.rundir import verdict_store
from tests.hostile.test_server_judges import gamut, served
from tests.support.openai_fault_server import FaultServer


def test_a_run_asks_each_server_what_it_is_once(world):
    """The manifest, written before generating, needs the judge's start-up (models, version,
    tokenizer, probe); the judge stage takes that one rather than asking again."""
    with FaultServer() as cand_server, FaultServer(tokenize=True) as judge_server:
        cfg = world.config(models=[{**served(cand_server), "name": "cand"}],
                           judges=[{**served(judge_server), "name": "judge"}])
        res = gamut(world, "run", "--config", cfg)
        assert res.returncode == 0, res.stdout + res.stderr
        for server in (cand_server, judge_server):
            assert server.hits["/v1/models"] == 1 and server.hits["/version"] == 1, server.hits
        assert len(cand_server.requests) == 4  # its answers, no probe
        root = world.run_dir / "verdicts" / "judge"
        verdicts = [r for unit in verdict_store.units_in(root) for _, r in verdict_store.records(unit)]
        assert verdicts and len(judge_server.requests) == len(verdicts) + 1  # one readout probe, then these
        # The manifest holds the hash the verdicts carry: the one start-up's.
        manifest = json.loads((world.run_dir / "manifest.json").read_text())
        judge_hash = next(m["settings_hash"] for m in manifest["models"] if m["role"] == "judge")
        assert {r["settings_hash"] for r in verdicts} == {judge_hash}


def test_a_judge_server_that_could_not_answer_before_generating_is_asked_again(world):
    """A judge's server not answering when the run starts (still loading) gets the manifest no
    hash; the judge stage asks it again rather than failing on the first answer, and the
    manifest then gets the hash its verdicts carry."""
    with FaultServer() as cand_server, FaultServer(tokenize=True) as judge_server:
        judge_server.path_faults = {"/v1/models": [("status", 404)]}  # not serving the model yet
        cfg = world.config(models=[{**served(cand_server), "name": "cand"}],
                           judges=[{**served(judge_server), "name": "judge"}])
        res = gamut(world, "run", "--config", cfg)
        assert res.returncode == 0, res.stdout + res.stderr
        assert judge_server.hits["/v1/models"] == 2 and judge_server.hits["/version"] == 1, judge_server.hits
        root = world.run_dir / "verdicts" / "judge"
        verdicts = [r for unit in verdict_store.units_in(root) for _, r in verdict_store.records(unit)]
        manifest = json.loads((world.run_dir / "manifest.json").read_text())
        judge_hash = next(m["settings_hash"] for m in manifest["models"] if m["role"] == "judge")
        assert verdicts and judge_hash is not None and {r["settings_hash"] for r in verdicts} == {judge_hash}
        assert set(manifest["stages"]) >= {"compile", "generate", "judge"}  # the stages' records kept
