"""How a served judge reads labels: the server's tokenizer (vLLM's `/tokenize`), the label
spellings one restricted step can report, the sampling fields every request pins, and the
parts of a reply a verdict or an answer is read from."""

from __future__ import annotations

import dataclasses
import json

from gamut_local.engines.base import FIRST_TOKEN
from gamut_local.engines.labels import PROBE, LabelReadout
from gamut_local.engines.served.http import Endpoint, Failed

TOP_LOGPROBS = 20  # the most OpenAI's API (and vLLM's default max_logprobs) returns
STRUCTURED_VLLM = "structured_outputs"  # vLLM >= 0.12: {"structured_outputs": {"choice": [...]}}
STRUCTURED_SCHEMA = "response_format"  # the OpenAI API: a JSON schema with an enum

# Sampling fields `vllm serve` fills from the model's generation_config.json where a request
# leaves them unset (vllm/config/model.py:1847-1902, `get_diff_sampling_param`, the fields at
# 1869-1878; none with `--generation-config vllm`, 1864). The server keeps them as
# `default_sampling_params` (vllm/entrypoints/openai/chat_completion/serving.py:175) and takes,
# per field, the request's value, else that default, else vLLM's neutral one (protocol.py in the
# same folder, 678-686 and 715-728, called at serving.py:359-363). The offline engine's
# SamplingParams leave them at these neutral values (vllm/sampling_params.py:293-318).
OPENAI_NEUTRAL = {"presence_penalty": 0.0, "frequency_penalty": 0.0, "top_p": 1.0}
# vLLM's own fields, beyond the OpenAI API (whose servers refuse fields they do not know): sent
# to a server that tokenises for us (vLLM's /tokenize). top_k 0 is "off" (-1 is accepted too,
# 0 preferred: vllm/sampling_params.py:315-317 and 677-681; the server's own default,
# protocol.py:684).
VLLM_NEUTRAL = {"repetition_penalty": 1.0, "top_k": 0, "min_p": 0.0}


def sampling_fields(temperature: float, top_p: float = 1.0, vllm_fields: bool = True) -> dict:
    """The sampling fields of a request: `temperature` and `top_p` as given (a candidate's
    config; a verdict's 0 and 1), every other field the server could fill from the model's
    generation_config.json pinned to the offline engine's neutral value."""
    return {"temperature": temperature, **OPENAI_NEUTRAL, "top_p": top_p, **(VLLM_NEUTRAL if vllm_fields else {})}


class NoTokenizer:
    """For a server that does not tokenise for us: no label has a readable first token, so
    `label_readout_for` picks structured choice (and sizes its token budget as offline)."""

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return []


class ServerTokenizer:
    """The served model's tokenizer through vLLM's `/tokenize`, enough for `labels.first_tokens`."""

    def __init__(self, endpoint: "Endpoint"):
        self.endpoint = endpoint

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        body = self.endpoint.get_json("POST", self.endpoint.root + "/tokenize", {
            "model": self.endpoint.model, "prompt": text, "add_special_tokens": add_special_tokens})
        return list(body["tokens"])


def server_tokenizer(endpoint: "Endpoint"):
    """The server's tokenizer and its assistant prefix (the text after the chat template's
    last user turn, as the chat endpoint renders it), or (no tokenizer, "")."""
    try:
        sent = endpoint.get_json("POST", endpoint.root + "/tokenize", {
            "model": endpoint.model, "messages": PROBE, "add_generation_prompt": True})["tokens"]
        prefix = endpoint.get_json("POST", endpoint.root + "/detokenize", {"model": endpoint.model, "tokens": sent})["prompt"]
    except (Failed, KeyError, TypeError):
        return NoTokenizer(), ""
    return ServerTokenizer(endpoint), prefix


def read_spellings(readout: LabelReadout, limit: int = TOP_LOGPROBS) -> LabelReadout:
    """The first tokens one restricted step reads: every counted spelling (`every_spelling`) where
    they fit in the `limit` log-probabilities the API returns, else the first `limit` taken
    rank by rank (every label's lead spelling, then every label's second, ...), so the least
    likely spellings (e.g. ` MEETS`) are the ones left out. The step is restricted to exactly
    these tokens, so the distribution read is complete over them, never silently short."""
    spelled = every_spelling(readout)
    if len(spelled.all_token_ids()) <= limit:
        return spelled
    kept: list[list[int]] = [[] for _ in spelled.token_ids]
    n = 0
    for rank in range(max(map(len, spelled.token_ids))):
        for i, ids in enumerate(spelled.token_ids):
            if rank < len(ids) and n < limit:
                kept[i].append(ids[rank])
                n += 1
    return dataclasses.replace(spelled, token_ids=tuple(map(tuple, kept)))


def label_tokens(readout: LabelReadout) -> str:
    """The first tokens counted per label, by id (the server's tokenizer), for the identity."""
    if readout.method != FIRST_TOKEN:
        return json.dumps({lab: [] for lab in readout.labels})
    return json.dumps(dict(zip(readout.labels, map(list, read_spellings(readout).token_ids))))


def every_spelling(readout: LabelReadout) -> LabelReadout:
    """The readout with every counted first token per label (its lead spelling's alone where
    the readout lists no others)."""
    if readout.token_ids:
        return readout
    return dataclasses.replace(readout, token_ids=tuple((t,) for t in readout.first_token_ids))


def content_of(body: dict) -> str:
    try:
        return body["choices"][0]["message"].get("content") or ""
    except (KeyError, IndexError, TypeError, AttributeError):
        return ""


def cached_tokens(usage: dict) -> int | None:
    """Prompt tokens the server's prefix cache served, where it reports them (vLLM: with
    `--enable-prompt-tokens-details`)."""
    details = usage.get("prompt_tokens_details") or {}
    value = details.get("cached_tokens") if isinstance(details, dict) else None
    return int(value) if value is not None else None
