"""The `openai` back end against a local server that misbehaves on purpose (429, 5xx, slow
replies, closed connections, a server that dies, a key it refuses). No model loads; nothing
leaves 127.0.0.1. The real-server tests are in test_openai_vllm.py."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from PIL import Image

from gamut_local.config import JudgeSpec, ModelSpec, Sampling, load_run_config
from gamut_local.engines import FIRST_TOKEN, STRUCTURED_CHOICE, load_engine
from gamut_local.engines.labels import LabelReadout
from gamut_local.engines.served import engine as served_engine, http, readout as served_readout
from gamut_local.errors import InputError
from gamut_local.prompts.audit import AUDIT_LABELS
from gamut_local.rundir import verdict_store
from gamut_local.stages.judge import judge
from tests.support.openai_fault_server import MODEL, FaultServer
from gamut_local.vocab import JUDGE_LABELS

SECRET = "sk-test-7c1e55a0-do-not-print"


@pytest.fixture(autouse=True)
def quick_backoff(monkeypatch):
    # The waits' schedule is what is tested in test_backoff_grows_with_jitter; here it only slows.
    monkeypatch.setattr(http, "BACKOFF_BASE_S", 0.01)


def spec_for(server: FaultServer, cls=JudgeSpec, **server_args) -> ModelSpec:
    """A judge (its engine reads labels) unless `cls` is ModelSpec (a candidate's only chats)."""
    return cls(name="served", path=MODEL, backend="openai", vision=True,
               server={"base_url": server.base_url, **server_args})


def conv(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


def test_backoff_grows_with_jitter():
    http.BACKOFF_BASE_S = 0.5  # the default (the fixture's patch is undone after the test)
    waits = [[http.backoff_s(a, None) for _ in range(200)] for a in range(4)]
    for a, w in enumerate(waits):
        assert 0 <= min(w) and max(w) <= 0.5 * 2 ** a
        assert len(set(w)) > 150  # jittered, not a fixed schedule
    assert sum(waits[3]) > 3 * sum(waits[0])
    assert http.backoff_s(0, "2") == 2.0  # the server's Retry-After wins
    assert http.backoff_s(0, "9999") == http.BACKOFF_CAP_S


def test_retries_429_500_closed_and_slow_then_succeeds():
    with FaultServer() as server:
        engine = load_engine(spec_for(server, request_timeout=0.5, retries=4))
        before = len(server.requests)
        server.faults = [("status", 429, "0"), ("status", 500), ("close",), ("slow", 2.0)]
        out = engine.classify([conv("Check: it is red.")], JUDGE_LABELS)[0]
        assert out.label == "meets" and out.method == STRUCTURED_CHOICE
        assert out.probs == {lab: float(lab == "meets") for lab in JUDGE_LABELS}
        assert len(server.requests) - before == 5  # four faults, then the answer
        engine.close()


def test_persistent_5xx_is_a_failed_request_never_an_invalid_verdict():
    # A transient outage is no verdict: an `invalid` one would score as missing and never be
    # asked again. The request comes back marked failed, beside the verdicts that came back.
    with FaultServer() as server:
        engine = load_engine(spec_for(server, retries=2, max_concurrency=1))
        server.faults = [("ok",)] + [("status", 503)] * 3 + [("status", 502)] * 6
        ok, failed = engine.classify([conv("Check: it is red."), conv("Check: it is blue.")], JUDGE_LABELS)
        assert ok.label == "meets" and ok.failure is None
        assert failed.label is None and failed.probs == {} and failed.failure.attempts == 3
        assert "HTTP 503" in failed.failure.reason and "'Check: it is blue.'" in failed.failure.reason
        assert not failed.failure.gone
        engine.close()


def test_a_request_the_server_refuses_is_an_error_naming_it():
    with FaultServer() as server:
        engine = load_engine(spec_for(server, max_concurrency=1))  # faults meet requests in order
        server.faults = [("ok",), ("status", 400)]
        with pytest.raises(InputError) as err:
            engine.classify([conv("Check: fine."), conv("Check: the second request, too long.")], JUDGE_LABELS)
        msg = str(err.value)
        assert "request 2 of this batch" in msg and "the second request" in msg and "HTTP 400" in msg
        engine.close()


def test_an_answer_failing_after_retries_comes_back_marked_beside_the_others():
    # A transient outage is no answer: an empty one would be graded as the model's. The
    # request comes back marked failed, beside the answers that came back.
    with FaultServer() as server:
        engine = load_engine(spec_for(server, ModelSpec, retries=1, max_concurrency=1))
        server.faults = [("ok",), ("status", 500), ("status", 500)]
        ok, failed = engine.chat([conv("Tell me about tapas."), conv("Tell me about paella.")], Sampling(max_tokens=8))
        assert ok.failure is None and ok.text and ok.finish_reason == "stop"
        assert failed.failure.attempts == 2 and not failed.failure.gone
        assert "HTTP 500" in failed.failure.reason and "'Tell me about paella.'" in failed.failure.reason
        engine.close()


def test_concurrency_is_bounded_and_requests_go_out_in_order():
    with FaultServer() as server:
        engine = load_engine(spec_for(server, max_concurrency=3))
        # Each reply takes long enough that a request never overtakes one sent before it, even on
        # busy shared cores.
        server.faults = [("slow", 0.5)] * 12
        n0 = len(server.requests)
        server.max_in_flight = 0
        checks = [f"Check number {i}." for i in range(12)]
        out = engine.classify([conv(c) for c in checks], JUDGE_LABELS)
        assert [o.label for o in out] == ["meets"] * 12
        assert server.max_in_flight == 3
        sent = [r["messages"][0]["content"] for r in server.requests[n0:]]
        # Three go out at once (their arrival among themselves is racy), each next one as a slot frees.
        assert [set(sent[i:i + 3]) for i in range(0, 12, 3)] == [set(checks[i:i + 3]) for i in range(0, 12, 3)]
        engine.close()


def test_images_go_as_data_urls():
    with FaultServer() as server:
        engine = load_engine(spec_for(server))
        image = Image.new("RGB", (8, 8), (200, 30, 30))
        c = [{"role": "user", "content": [{"type": "image_pil", "image_pil": image},
                                          {"type": "text", "text": "Check: it is red."}]}]
        engine.classify([c], JUDGE_LABELS)
        parts = server.requests[-1]["messages"][0]["content"]
        assert parts[0]["type"] == "image_url" and parts[0]["image_url"]["url"].startswith("data:image/png;base64,")
        assert parts[1] == {"type": "text", "text": "Check: it is red."}
        engine.close()


def test_a_server_with_neither_logprobs_nor_choice_is_refused_at_start_up_as_a_judge_only():
    with FaultServer(choice_support=False) as server:
        with pytest.raises(InputError, match="neither label log-probabilities.*nor constrained choice.*"
                                             "it cannot judge"):
            load_engine(spec_for(server))
        # Nothing but the start-up probes was sent.
        assert server.requests and all("Say hello" in r["messages"][0]["content"] for r in server.requests)
        # A candidate only chats: its start-up probes nothing, and it answers.
        probes = len(server.requests)
        engine = load_engine(spec_for(server, ModelSpec))
        try:
            assert len(server.requests) == probes and engine.startup.resolved == {}
            assert engine.chat([conv("Hello")], Sampling(max_tokens=8))[0].text
            # Asked for labels all the same (the audit stage's model is a plain ModelSpec): the
            # readout is resolved then, and this server refused then, with the judge's message.
            with pytest.raises(InputError, match="nor constrained choice"):
                engine.classify([conv("Check: x.")], AUDIT_LABELS)
        finally:
            engine.close()


def test_a_model_that_is_no_judge_resolves_its_readout_when_first_asked_for_labels():
    with FaultServer(tokenize=True) as server:
        engine = load_engine(spec_for(server, ModelSpec))
        try:
            assert server.requests == [] and server.hits["/tokenize"] == 1  # the chat template's alone
            first = engine.classify([conv("Is it grounded?")], AUDIT_LABELS)[0]
            probes = len(server.requests) - 1
            assert probes == 1 and first.method == FIRST_TOKEN and first.label in AUDIT_LABELS
            engine.classify([conv("Is it grounded?")], AUDIT_LABELS)
            assert len(server.requests) == probes + 2  # resolved once
        finally:
            engine.close()


def test_the_model_must_be_served_and_the_server_reachable():
    with FaultServer() as server:
        wrong = ModelSpec(name="s", path="other-model", backend="openai", server={"base_url": server.base_url})
        with pytest.raises(InputError, match="does not serve 'other-model'.*fault-model"):
            load_engine(wrong)
        url = server.base_url
    with pytest.raises(InputError, match="cannot reach"):
        load_engine(ModelSpec(name="s", path=MODEL, backend="openai", server={"base_url": url}))


def test_server_identity_names_host_model_and_version():
    with FaultServer() as server:
        spec = spec_for(server)
        ident = served_engine.start_up(spec).settings_identity()
        # No /tokenize here: no label token is read (structured choice), and only the OpenAI
        # API's sampling fields are pinned (test_openai_sampling.py).
        assert ident == {"host": f"127.0.0.1:{server.port}", "model": MODEL, "version": "fault-0.1",
                         "owned_by": "tests", "readout": STRUCTURED_CHOICE, "label_tokens": json.dumps({lab: [] for lab in JUDGE_LABELS}),
                         "sampling": json.dumps(served_readout.sampling_fields(0.0, vllm_fields=False), sort_keys=True)}
        # A candidate's start-up: who the server is, no readout.
        assert served_engine.start_up(spec_for(server, ModelSpec)).settings_identity() == {
            k: ident[k] for k in ("host", "model", "version", "owned_by")}
        # The config-side settings hash holds the endpoint's host and model, so a server at
        # another address never shares verdicts with this one.
        other = spec.model_copy(update={"server": spec.server.model_copy(update={"base_url": "http://10.0.0.1:9/v1"})})
        assert spec.settings_hash() != other.settings_hash()


def test_more_counted_spellings_than_the_api_returns_are_cut_to_the_likeliest_20():
    # Six counted first tokens for each of four labels (24; the verdict labels have at most 16,
    # a custom label set may have more); the API returns 20.
    ids = tuple(tuple(range(10 * i, 10 * i + 6)) for i in range(4))
    readout = LabelReadout(JUDGE_LABELS, FIRST_TOKEN, "", tuple(t[0] for t in ids), 20, ids)
    read = served_readout.read_spellings(readout)
    assert len(read.all_token_ids()) == served_readout.TOP_LOGPROBS
    # Rank by rank: every label keeps its first five spellings, only the sixth goes.
    assert read.token_ids == tuple(t[:5] for t in ids)
    # What fits is kept whole; the identity names the tokens read.
    assert served_readout.read_spellings(readout, 24) == readout
    assert json.loads(served_readout.label_tokens(readout)) == {lab: list(t[:5]) for lab, t in zip(JUDGE_LABELS, ids)}
    # The restricted step asks for exactly the tokens it reads, and the labels' probabilities
    # come from those alone: a reply with the left-out tokens does not count them.
    engine = object.__new__(served_engine.OpenAIEngine)
    engine.model, engine.processed, engine.structured, engine.vllm_fields = MODEL, True, None, False
    payload = engine._first_token_payload(conv("x"), readout, 20)
    assert payload["allowed_token_ids"] == read.all_token_ids() and payload["top_logprobs"] == 20
    reply = {"choices": [{"logprobs": {"content": [{"top_logprobs": [
        {"token": f"token_id:{t}", "logprob": -1.0} for t in read.all_token_ids() + [5, 15]]}]}}]}
    probs = engine._read(reply, readout).probs
    assert all(abs(p - 0.25) < 1e-9 for p in probs.values())  # 5 of 5 each, the 6th ignored


def test_the_api_key_comes_from_the_environment_and_is_never_shown(monkeypatch, caplog, tmp_path):
    caplog.set_level(logging.DEBUG)
    with FaultServer(key=SECRET) as server:
        spec = spec_for(server, api_key_env="GAMUT_TEST_KEY")
        monkeypatch.delenv("GAMUT_TEST_KEY", raising=False)
        with pytest.raises(InputError, match="environment variable GAMUT_TEST_KEY is not set"):
            load_engine(spec)
        monkeypatch.setenv("GAMUT_TEST_KEY", SECRET)
        engine = load_engine(spec)
        assert engine.classify([conv("Check: x.")], JUDGE_LABELS)[0].label == "meets"
        assert server.auth[-1] == f"Bearer {SECRET}"
        engine.close()
        # A wrong key: the server echoes it back; our message names the variable, not the key.
        monkeypatch.setenv("GAMUT_TEST_KEY", SECRET + "-wrong")
        with pytest.raises(InputError) as err:
            load_engine(spec)
        assert "GAMUT_TEST_KEY" in str(err.value) or "api_key_env" in str(err.value)
        assert SECRET not in str(err.value)
        # Nor in what the run writes: the config echo and the manifest hold the variable's name.
        monkeypatch.setenv("GAMUT_TEST_KEY", SECRET)
        cfg = tmp_path / "run.yaml"
        cfg.write_text(textwrap.dedent(f"""\
            name: t
            dataset: {Path(__file__).parents[2] / 'gamut_local/data/sample/questions.jsonl'}
            output_dir: {tmp_path / 'run'}
            judges:
              - name: served
                path: {MODEL}
                backend: openai
                server: {{base_url: "{server.base_url}", api_key_env: GAMUT_TEST_KEY}}
            """))
        from gamut_local.rundir.manifest import build_manifest

        run = load_run_config(cfg)
        assert run.judges[0].path == MODEL  # a served name, not made a path
        echoed = run.model_dump_json() + str(build_manifest(run, cfg))
        assert "GAMUT_TEST_KEY" in echoed and SECRET not in echoed
    assert SECRET not in caplog.text


def test_a_server_that_dies_mid_run_loses_at_most_the_chunk_in_flight(tmp_path):
    from tests.support.small_run import write_config

    def run_config(server):
        judge_cfg = {"name": "served", "path": MODEL, "backend": "openai", "vision": False,
                     "server": {"base_url": server.base_url, "retries": 1, "max_concurrency": 4}}
        return load_run_config(write_config(tmp_path, models=[], judges=[judge_cfg], chunk_size=16,
                                            extra_verdicts=[]))

    first = FaultServer(die_after=40)
    with pytest.raises(InputError, match="stopped accepting connections.*rerun to resume"):
        judge(run_config(first))
    out = Path(run_config(first).output_dir) / "verdicts" / "served"
    lines = [r for unit in verdict_store.units_in(out) for _, r in verdict_store.records(unit)]
    # 39 verdict requests were answered (the first request was the start-up's probe): every one
    # is on disk, in the chunks before the server died and in the chunk in flight, and nothing
    # is `invalid`.
    assert len(lines) == 39 and all(r["verdict"] != "invalid" for r in lines)
    # The same server back on the same address: the rerun judges only what is left.
    with FaultServer(port=first.port) as again:
        summary = judge(run_config(again))[0]
        assert summary.already_done == len(lines) and summary.written > 0 and summary.invalid == 0
        # the stage's one start-up probe, then each pending check once
        assert len(again.requests) == 1 + summary.written


def test_run_reuses_an_engine_only_for_the_same_server():
    from gamut_local.stages.pipeline import EngineKeeper

    with FaultServer() as one, FaultServer() as two:
        keeper = EngineKeeper()
        with keeper(spec_for(one)) as a:
            pass
        with keeper(spec_for(one)) as b:
            assert b is a
        with keeper(spec_for(two)) as c:  # the same model name on another server: its own engine
            assert c is not a and c.endpoint.base == two.base_url
        # A served judge handed its start-up never takes a candidate's engine, which reads no labels.
        with keeper(spec_for(one, ModelSpec)) as cand:
            pass
        with keeper(spec_for(one), startup=served_engine.start_up(spec_for(one))) as judging:
            assert judging is not cand and judging.classify([conv("Check: x.")], JUDGE_LABELS)[0].label
        keeper.close()


CTRL_C_SCRIPT = """
import sys
from gamut_local.config import JudgeSpec
from gamut_local.engines import load_engine
spec = JudgeSpec(name="s", path="fault-model", backend="openai", server={"base_url": sys.argv[1]})
engine = load_engine(spec)
print("ready", flush=True)
engine.classify([[{"role": "user", "content": f"Check {i}"}] for i in range(8)], ["meets", "missing"])
"""


def test_ctrl_c_stops_requests_in_flight_promptly():
    with FaultServer() as server:
        server.faults = [("ok",)] + [("hang",)] * 8  # the start-up probe, then the batch
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
        proc = subprocess.Popen([sys.executable, "-c", CTRL_C_SCRIPT, server.base_url], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert proc.stdout.readline().strip() == "ready"
            deadline = time.monotonic() + 120  # generous: CI's cores may be shared
            while server.in_flight < 8 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert server.in_flight == 8  # all hanging on the server
            t0 = time.monotonic()
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=30)
            # Far below the requests' own limits (a 60 s hang, a 300 s timeout): they were cancelled.
            assert time.monotonic() - t0 < 15
            assert proc.returncode != 0 and "KeyboardInterrupt" in proc.stderr.read()
        finally:
            if proc.poll() is None:
                proc.kill()
