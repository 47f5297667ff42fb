"""How a set of labels maps onto a tokenizer, and the small pieces both engines share.

A label distribution can be read off a single decoding step only when every label starts
with a different token *at the position it would take after the chat template's assistant
prefix* (BPE merges depend on what comes before). Tokenizers differ: with SmolLM2's,
`meets` is `me`+`ets` and `contradicts` starts with `cont`; with a leading space some labels
become one token. So the readout is computed per tokenizer, for both spellings, never assumed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

# A probe conversation: only the text the template puts after the last user turn matters.
PROBE = [{"role": "user", "content": "Answer with one word."}]


@dataclass(frozen=True)
class LabelReadout:
    labels: tuple[str, ...]
    method: str  # "first_token" or "structured_choice"
    lead: str  # "" or " ": the spelling whose first tokens are distinct
    first_token_ids: tuple[int, ...]  # one per label (first_token only)
    max_tokens: int  # enough decoding steps for the longest label under any tokenisation


def assistant_prefix(tokenizer) -> str:
    """The rendered prompt up to where the assistant's answer starts, by the tokenizer's
    template (an engine that renders with another template passes its own prefix)."""
    return tokenizer.apply_chat_template(PROBE, add_generation_prompt=True, tokenize=False)


def first_tokens(tokenizer, prefix: str, labels: Sequence[str], lead: str) -> list[int] | None:
    """Each label's first token id after `prefix`, or None if tokenising prefix + label does
    not keep the prefix's tokens intact (the label would merge into the template's text)."""
    base = tokenizer.encode(prefix, add_special_tokens=False)
    out = []
    for label in labels:
        full = tokenizer.encode(prefix + lead + label, add_special_tokens=False)
        if full[:len(base)] != base or len(full) <= len(base):
            return None
        out.append(full[len(base)])
    return out


def cached_readout(cache: dict, tokenizer, labels: Sequence[str], prefix: str | None = None) -> LabelReadout:
    """`label_readout_for`, computed once per label set for an engine's tokenizer."""
    key = tuple(labels)
    if key not in cache:
        cache[key] = label_readout_for(tokenizer, key, prefix)
    return cache[key]


def label_readout_for(tokenizer, labels: Sequence[str], prefix: str | None = None) -> LabelReadout:
    """How to read `labels` off this tokenizer after `prefix` (default: the tokenizer's own
    rendering of the assistant turn's start)."""
    labels = tuple(labels)
    if not labels or len(set(labels)) != len(labels):
        raise ValueError(f"labels must be distinct and non-empty, got {labels!r}")
    prefix = assistant_prefix(tokenizer) if prefix is None else prefix
    # A label may take one token per character at worst (byte fallback), plus end of turn.
    max_tokens = max(len(label.encode("utf-8")) for label in labels) + 1
    for lead in ("", " "):  # the spelling the template's assistant turn invites comes first
        ids = first_tokens(tokenizer, prefix, labels, lead)
        if ids is not None and len(set(ids)) == len(ids):
            return LabelReadout(labels, "first_token", lead, tuple(ids), max_tokens)
    return LabelReadout(labels, "structured_choice", "", (), max_tokens)


def normalise(logprobs: dict[str, float]) -> dict[str, float]:
    """log-probabilities over labels -> probabilities that sum to 1 (stable softmax)."""
    if not logprobs:
        return {}
    top = max(logprobs.values())
    if top == -math.inf:
        return {}
    w = {k: math.exp(v - top) for k, v in logprobs.items()}
    z = sum(w.values())
    return {k: v / z for k, v in w.items()}


def argmax(probs: dict[str, float], labels: Sequence[str]) -> str | None:
    """The most probable label; ties go to the earlier label, so the result is deterministic."""
    if not probs:
        return None
    return max(labels, key=lambda lab: (probs.get(lab, -1.0), -labels.index(lab)))


def match_label(text: str, labels: Sequence[str]) -> str | None:
    """A constrained output back to its label (exact after trimming whitespace)."""
    t = text.strip()
    return t if t in labels else None


def format_top(probs: dict[str, float], names: dict[str, str]) -> str:
    """`raw` for a first-token read-out: the label tokens as decoded, most probable first."""
    return " ".join(f"{names[k]!r}={p:.4f}" for k, p in sorted(probs.items(), key=lambda kv: -kv[1]))


def has_image(conversation: list[dict]) -> bool:
    return any(isinstance(m.get("content"), list)
               and any(p.get("type") in ("image_pil", "image", "image_url") for p in m["content"])
               for m in conversation)


def text_only(conversation: list[dict]) -> list[dict]:
    """Part lists flattened to strings (text parts joined by newlines, as vLLM does for
    templates that expect string content)."""
    out = []
    for m in conversation:
        c = m.get("content")
        if isinstance(c, list):
            if any(p.get("type") != "text" for p in c):
                raise ValueError("this model takes text only, but a message has an image part")
            c = "\n".join(p["text"] for p in c)
        out.append({**m, "content": c})
    return out
