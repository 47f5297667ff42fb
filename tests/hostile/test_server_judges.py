"""Hostile cases for served judges (`backend: openai`): a server's faults must never change the
numbers (a start-up hiccup switching the readout, a transient outage kept as an `invalid`
verdict), and a secret must never be shown or stored (URL credentials, key-like query
parameters, a key pasted where a variable's name belongs).

Each case runs `gamut-local` as a process against the fault server on 127.0.0.1 (no model
loads) and holds the corpus' clean-failure rule: non-zero exit, no traceback, a message naming
the file and field, inputs byte-identical.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gamut_local.rundir import verdict_store
from gamut_local.vocab import JUDGE_LABELS
from tests.support.openai_fault_server import MODEL, FaultServer

KEY = "sk-planted-5f0c9e2a7b-never-shown"  # the API key, in the variable the config names
URL_SECRET = "urlsecret-81d4c0a9"  # a key in a URL (GAMUT_SERVER_URL of a SLURM client job)
N_VERDICTS = 12  # 4 reference answers x 3 checks


def served(server: FaultServer, **server_args) -> dict:
    return {"name": "served", "path": MODEL, "backend": "openai", "vision": False,
            "server": {"base_url": server.base_url, "retries": 2, "request_timeout": 2, **server_args}}


def config(world, judge: dict) -> Path:
    ref = world.answers(world.root / "ref.jsonl")
    return world.config(models=[], judges=[judge], extra_answers=[str(ref)])


def gamut(world, *argv, env: dict | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "400", **(env or {})}
    return subprocess.run([sys.executable, "-m", "gamut_local.cli", *map(str, argv)], cwd=world.root,
                          capture_output=True, text=True, env=env, timeout=180)


def verdicts(world) -> list[dict]:
    root = world.run_dir / "verdicts" / "served"
    return [r for unit in verdict_store.units_in(root) for _, r in verdict_store.records(unit)] if root.exists() else []


def clean_failure(res, *named) -> str:
    out = res.stdout + res.stderr
    assert res.returncode == 1, f"exit {res.returncode}:\n{out}"
    assert "Traceback" not in out and "internal error" not in out, out
    for text in named:
        assert text in out, f"{text!r} not in:\n{out}"
    return out


# -- faults never change the numbers ----------------------------------------------------------

def test_a_judge_command_asks_the_server_what_it_is_once(world):
    """The manifest's settings hash, the stage's and the engine's each ran the whole start-up
    (models, version, tokenizer, a probe verdict): three times per `judge`. The stage asks once
    and hands the answer to the other two."""
    with FaultServer(tokenize=True) as server:
        hits = _hits(world, server, config(world, served(server)))
        assert hits["/v1/models"] == 1 and hits["/version"] == 1, hits
        assert hits["chat"] == 1, hits  # the one readout probe before the first verdict


def test_a_judge_on_a_server_that_can_read_no_label_is_refused_before_any_verdict(world):
    """A candidate on such a server answers (test_server_candidates.py); a judge cannot."""
    with FaultServer(choice_support=False) as server:
        res = gamut(world, "judge", "--config", config(world, served(server)))
        clean_failure(res, "run.yaml", "judges.0.server.base_url", "neither label log-probabilities",
                      "nor constrained choice", "it cannot judge")
        assert verdicts(world) == []
        assert server.requests and all("Say hello" in r["messages"][0]["content"] for r in server.requests)


@pytest.mark.parametrize("path", ["/tokenize", "/detokenize", "/v1/models", "/version"])
def test_a_5xx_on_a_start_up_request_is_retried_and_the_readout_kept(world, path):
    """One 503 on the engine's first /tokenize once made the whole run fall back to structured
    choice (one-hot probabilities) under the first-token settings hash; on /v1/models it stopped
    `judge` with an internal error. Planted on the start-up's first request to the path."""
    with FaultServer(tokenize=True) as server:
        cfg = config(world, served(server))
        server.path_faults = {path: [("status", 503)]}
        res = gamut(world, "judge", "--config", cfg)
        assert res.returncode == 0, res.stdout + res.stderr
        assert not server.path_faults[path]  # the fault was met
        got = verdicts(world)
        assert len(got) == N_VERDICTS and {r["method"] for r in got} == {"first_token"}
        assert all(0 < r["probs"]["meets"] < 1 for r in got)  # read off log-probabilities, not one-hot


def test_a_start_up_request_still_failing_stops_cleanly_and_writes_nothing(world):
    with FaultServer(tokenize=True) as server:
        cfg = config(world, served(server))
        server.path_faults = {"/tokenize": [("status", 503)] * 50}
        before = world.snapshot()
        res = gamut(world, "judge", "--config", cfg)
        clean_failure(res, "run.yaml", "server.base_url", "/tokenize failed after 3 attempts", "HTTP 503",
                      "rerun")
        assert world.snapshot() == before and verdicts(world) == []
        server.path_faults = {}  # the server recovers: the rerun reads first tokens, as it should
        assert gamut(world, "judge", "--config", cfg).returncode == 0
        assert {r["method"] for r in verdicts(world)} == {"first_token"}


def test_the_readout_method_is_in_the_settings_hash_and_the_engine_reads_as_its_hash_says(world):
    from gamut_local.config import load_run_config
    from gamut_local.engines import load_engine, start_up
    from gamut_local.stages.judge import resolved_settings_hash

    with FaultServer(tokenize=True) as server:
        spec = load_run_config(config(world, served(server))).judges[0]
        startup = start_up(spec)
        first_token = resolved_settings_hash(spec, startup)
        assert resolved_settings_hash(spec) == first_token  # a start-up of its own: the same hash
        # The same server restarted without its tokenizer routes: an engine built on the
        # stage's start-up reads as the stage's settings hash says, asking nothing again...
        server.tokenize = False
        hits = dict(server.hits)
        engine = load_engine(spec, startup)
        assert engine.resolved["readout"] == "first_token" and server.hits == hits
        assert engine.label_readout(JUDGE_LABELS).method == "first_token" and server.hits == hits
        engine.close()
        # ...and a stage started now reads the other way under another hash.
        assert resolved_settings_hash(spec) != first_token


@pytest.mark.parametrize("fault", [("status", 503), ("status", 429), ("status", 500), ("close",), ("slow", 5)])
def test_a_verdict_failing_after_retries_is_never_kept_invalid_and_the_rerun_asks_it(world, fault):
    """A request still failing after its retries was stored `invalid`: scored as missing and
    never asked again, so a transient outage lowered a candidate's score for good. Then its
    chunk's other verdicts were dropped and the stage stopped there: each verdict that came
    back is kept, the other chunks are asked, and the rerun asks only the one that failed."""
    with FaultServer(tokenize=True) as server:
        cfg = config(world, served(server, max_concurrency=1))
        # The start-up's probes first; then the 5th verdict request (the middle one of the second
        # chunk: a chunk is one response's 3 checks here) fails on every attempt.
        probes = _hits(world, server, cfg)["chat"]
        server.faults = [("ok",)] * (probes + 4) + [fault] * 3
        res = gamut(world, "judge", "--config", cfg)
        clean_failure(res, "server.base_url", "1 verdict request failed after 3 attempts",
                      "11 verdicts written", "none is kept as invalid", "rerun to ask only those")
        kept = verdicts(world)
        assert len(kept) == N_VERDICTS - 1 and all(r["verdict"] != "invalid" for r in kept)
        asked = len(server.requests)
        res = gamut(world, "judge", "--config", cfg)
        assert res.returncode == 0, res.stdout + res.stderr
        assert "1 verdicts written (0 invalid), 11 already done" in res.stdout
        assert len(server.requests) - asked == probes + 1  # the start-up, then the one verdict
        got = verdicts(world)
        assert len(got) == N_VERDICTS and all(r["verdict"] != "invalid" for r in got)


def _hits(world, server: FaultServer, cfg: Path) -> dict[str, int]:
    """The requests a clean `judge` command sends, per path ("chat": before its first verdict,
    its start-ups' probes), measured on a throwaway copy of the run."""
    import shutil

    scratch = world.root / "scratch"
    scratch.mkdir()
    shutil.copy(world.root / "ref.jsonl", scratch / "ref.jsonl")
    shutil.copy(world.dataset, scratch / world.dataset.name)
    (scratch / "run.yaml").write_text(cfg.read_text())
    before, chats = dict(server.hits), len(server.requests)
    assert subprocess.run([sys.executable, "-m", "gamut_local.cli", "judge", "--config", "run.yaml"],
                          cwd=scratch, capture_output=True, timeout=180).returncode == 0
    shutil.rmtree(scratch)
    hits = {p: n - before.get(p, 0) for p, n in server.hits.items()}
    return {**hits, "chat": len(server.requests) - chats - N_VERDICTS}


# -- secrets ----------------------------------------------------------------------------------

@pytest.mark.parametrize("server_cfg, field, secret", [
    ({"base_url": f"http://user:{URL_SECRET}@127.0.0.1:9/v1"}, "server.base_url", URL_SECRET),
    ({"base_url": f"http://{URL_SECRET}@127.0.0.1:9/v1"}, "server.base_url", URL_SECRET),
    ({"base_url": f"http://127.0.0.1:9/v1?api_key={URL_SECRET}"}, "server.base_url", URL_SECRET),
    ({"base_url": f"http://127.0.0.1:9/v1?x=1&access_token={URL_SECRET}"}, "server.base_url", URL_SECRET),
    ({"base_url": f"http://127.0.0.1:9/v1?sig={URL_SECRET}"}, "server.base_url", URL_SECRET),
    ({"base_url": f"ftp://127.0.0.1:9/v1?token={URL_SECRET}"}, "server.base_url", URL_SECRET),
    ({"base_url": "http://127.0.0.1:9/v1", "api_key_env": KEY}, "server.api_key_env", KEY),
    ({"base_url": "http://127.0.0.1:9/v1", "api_key_env": "a3f9c2b7d1e8f0a3f9c2b7d1e8f0a3f9"},
     "server.api_key_env", "a3f9c2b7d1e8f0a3f9c2b7d1e8f0a3f9"),
])
@pytest.mark.parametrize("command", [["judge", "--config"], ["status", "--config"]])
def test_a_secret_in_the_config_is_refused_without_being_quoted(world, server_cfg, field, secret, command):
    cfg = world.config(judges=[{"name": "served", "path": MODEL, "backend": "openai", "server": server_cfg}])
    before = world.snapshot()
    out = clean_failure(gamut(world, *command, cfg), "run.yaml", field)
    assert secret not in out, out
    assert world.snapshot() == before and not world.run_dir.exists()


FAULTS = {  # every way a served judge's run goes, good and bad
    "ok": {},
    "chat 503 once": {"faults": [("status", 503)]},
    "chat 429 always": {"faults": [("status", 429)] * 200},
    "chat 500 always": {"faults": [("status", 500)] * 200},
    "chat closed always": {"faults": [("close",)] * 200},
    "chat slow always": {"faults": [("slow", 3)] * 200},
    "chat refused (400)": {"faults": [("status", 400)] * 200},
    "server dies": {"die_after": 3},
    "tokenize 503 always": {"path_faults": {"/tokenize": [("status", 503)] * 200}},
    "models 502 always": {"path_faults": {"/v1/models": [("status", 502)] * 200}},
    "models closed always": {"path_faults": {"/v1/models": [("close",)] * 200}},
    "wrong key": {"key": "another-key-entirely"},
    "key unset": {"unset": True},
    "unreachable": {"unreachable": True},
    "credentials in the address": {"userinfo": True},  # sent as Basic auth: the server refuses it
}


@pytest.mark.parametrize("case", list(FAULTS))
def test_no_secret_in_any_output_of_any_path(world, tmp_path, case):
    """The planted key (in the variable `api_key_env` names) and a key in the server address a
    SLURM client job is handed (GAMUT_SERVER_URL: a query parameter, or userinfo) appear in no
    stdout, stderr, or file under the test's folder, whichever way the run goes."""
    how = FAULTS[case]
    with FaultServer(tokenize=True, key=how.get("key", KEY), die_after=how.get("die_after")) as server:
        server.faults = list(how.get("faults", []))
        server.path_faults = dict(how.get("path_faults", {}))
        port = 9 if how.get("unreachable") else server.port
        userinfo = f"user:{URL_SECRET}@" if how.get("userinfo") else ""
        url = f"http://{userinfo}127.0.0.1:{port}/v1?x=1&token={URL_SECRET}"
        judge = served(server, api_key_env="GAMUT_PLANTED_KEY", serve="/models/weights", retries=1,
                       request_timeout=1)
        cfg = config(world, judge)
        env = {"GAMUT_SERVER_URL": url, "GAMUT_PLANTED_KEY": "" if how.get("unset") else KEY}
        outputs = []
        for argv in (["judge", "--config", cfg], ["judge", "--config", cfg], ["status", "--config", cfg],
                     ["score", world.run_dir / "verdicts"]):
            res = gamut(world, *argv, env=env)
            outputs.append(res.stdout + res.stderr)
            assert "Traceback" not in outputs[-1], outputs[-1]
        if case == "ok":
            assert len(verdicts(world)) == N_VERDICTS, outputs
        else:
            assert any(o for o in outputs)
    for secret in (KEY, URL_SECRET):
        for text in outputs:
            assert secret not in text, text
        for p in tmp_path.rglob("*"):
            if p.is_file():
                assert secret.encode() not in p.read_bytes(), p
