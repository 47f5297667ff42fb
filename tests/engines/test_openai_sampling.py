"""Every request of the `openai` back end pins the sampling fields a server could otherwise fill
from the model's generation_config.json (`served.readout.sampling_fields`). Here against a local
OpenAI-style server without vLLM's /tokenize (no model loads): only the OpenAI API's own
fields go, as a provider would refuse vLLM's. Against a real `vllm serve` whose model folder
sets a repetition penalty, vLLM's fields too, and the probabilities then equal the offline
engine's: tests/engines/test_openai_vllm.py."""

from __future__ import annotations

from gamut_local.config import JudgeSpec, Sampling
from gamut_local.engines import load_engine
from gamut_local.engines.served.readout import OPENAI_NEUTRAL, VLLM_NEUTRAL, sampling_fields
from tests.support.openai_fault_server import MODEL, FaultServer
from gamut_local.vocab import JUDGE_LABELS

SPEC = dict(name="served", path=MODEL, backend="openai", vision=False)


def test_sampling_fields_pin_everything_but_the_configs_temperature_and_top_p():
    assert sampling_fields(0.0) == {"temperature": 0.0, "presence_penalty": 0.0, "frequency_penalty": 0.0,
                                    "top_p": 1.0, "repetition_penalty": 1.0, "top_k": 0, "min_p": 0.0}
    candidate = sampling_fields(0.7, 0.9, vllm_fields=False)
    assert candidate == {"temperature": 0.7, "presence_penalty": 0.0, "frequency_penalty": 0.0, "top_p": 0.9}


def test_every_request_pins_the_openai_fields_and_sends_no_vllm_field_without_tokenize():
    with FaultServer() as server:
        engine = load_engine(JudgeSpec(**SPEC, server={"base_url": server.base_url}))
        try:
            assert not engine.vllm_fields  # no /tokenize: not vLLM's server
            engine.classify([[{"role": "user", "content": "Check: it is red."}]], JUDGE_LABELS)
            verdicts = len(server.requests)  # start-up probes and the verdict: structured choice
            engine.chat([[{"role": "user", "content": "Hello"}]], Sampling(max_tokens=8, temperature=0.7, top_p=0.9))
        finally:
            engine.close()
    for body in server.requests[:verdicts]:
        assert {k: body[k] for k in OPENAI_NEUTRAL} == OPENAI_NEUTRAL and body["temperature"] == 0.0, body
    candidate = server.requests[verdicts]
    assert (candidate["temperature"], candidate["top_p"], candidate["max_tokens"]) == (0.7, 0.9, 8)
    assert candidate["presence_penalty"] == candidate["frequency_penalty"] == 0.0
    assert not any(k in body for body in server.requests for k in VLLM_NEUTRAL)
