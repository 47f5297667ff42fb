"""How a set of labels maps onto a tokenizer, and the small pieces both engines share.

A label distribution can be read off a single decoding step only when every label starts
with a different token *at the position it would take after the chat template's assistant
prefix* (BPE merges depend on what comes before). Tokenizers differ: with SmolLM2's,
`meets` is `me`+`ets` and `contradicts` starts with `cont`; with a leading space some labels
become one token. So the readout is computed per tokenizer, for both spellings, never assumed.
A label's probability sums its lower-case and Capitalised spellings, with and without a
leading space (`meets`, ` meets`, `Meets`, ` Meets`), wherever they start with a token of
their own, so no label loses the mass a model puts on another spelling of it
(scripts/bench_label_spellings.py measures how much). UPPER-case spellings are not counted:
their first tokens are one- to three-letter capitals (`M`, `ME`, `PAR`, `CON` with SmolLM2's
tokenizer) that begin countless other words, so they added mass the model put elsewhere
and moved the top label on over half of SmolLM2's sample judge prompts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from gamut_local.config import ModelSpec
from gamut_local.errors import Problem

# A probe conversation: only the text the template puts after the last user turn matters.
PROBE = [{"role": "user", "content": "Answer with one word."}]


# Where a reasoning model's chat template opens and closes its thinking.
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"


@dataclass(frozen=True)
class LabelReadout:
    labels: tuple[str, ...]
    method: str  # "first_token" or "structured_choice"
    lead: str  # "" or " ": the spelling whose first tokens are distinct
    first_token_ids: tuple[int, ...]  # one per label (first_token only): the `lead` spelling's
    max_tokens: int  # enough decoding steps for the longest label under any tokenisation
    # Per label, every first token its spellings start with (first_token only): `lead`'s
    # first, then the other case and leading-space spellings' where they are tokens of their
    # own (no other label's spelling starts with them). A label's probability is their sum.
    token_ids: tuple[tuple[int, ...], ...] = ()

    def all_token_ids(self) -> list[int]:
        """Every counted first token, each once (the restricted decoding step's allowed set)."""
        return [t for ids in self.token_ids for t in ids]


def spellings(label: str) -> list[str]:
    """The ways a model may start writing `label` (lower case or Capitalised, with or without a
    leading space), the plain one first. Not UPPER case: see the module's docstring."""
    cases = dict.fromkeys((label, label[:1].upper() + label[1:]))
    return [lead + c for lead in ("", " ") for c in cases]


def assistant_prefix(tokenizer, template_kwargs: dict | None = None) -> str:
    """The rendered prompt up to where the assistant's answer starts, by the tokenizer's
    template (an engine that renders with another template passes its own prefix)."""
    return tokenizer.apply_chat_template(PROBE, add_generation_prompt=True, tokenize=False,
                                         **(template_kwargs or {}))


def in_reasoning(prefix: str) -> bool:
    """Whether text read after `prefix` would be inside a reasoning block: `<think>` opened
    and not closed (a thinking model's template with thinking on)."""
    return prefix.rfind(THINK_OPEN) > prefix.rfind(THINK_CLOSE)


def reasoning_prefix_message(name: str) -> str:
    return (f"{name}: its chat template opens a reasoning block ({THINK_OPEN}) where the label "
            f"would be read, so the label would be forced inside the model's thinking; set "
            f"chat_template_kwargs: {{enable_thinking: false}} if its template has that switch, "
            f"or use the model's instruct (non-thinking) version")


def first_token(tokenizer, base: list[int], prefix: str, text: str) -> int | None:
    """The first token id of `text` after `prefix` (tokenised as `base`), or None if
    tokenising prefix + text does not keep the prefix's tokens intact (the text would merge
    into the template's)."""
    full = tokenizer.encode(prefix + text, add_special_tokens=False)
    if full[:len(base)] != base or len(full) <= len(base):
        return None
    return full[len(base)]


def first_tokens(tokenizer, prefix: str, labels: Sequence[str], lead: str) -> list[int] | None:
    """Each label's first token id after `prefix`, or None if one of them does not keep the
    prefix's tokens intact."""
    base = tokenizer.encode(prefix, add_special_tokens=False)
    out = [first_token(tokenizer, base, prefix, lead + label) for label in labels]
    return None if None in out else out  # type: ignore[return-value]


def spelling_tokens(tokenizer, prefix: str, labels: Sequence[str], primary: Sequence[int]) -> tuple[tuple[int, ...], ...]:
    """Per label, its primary first token and those of its other spellings, keeping only
    tokens no other label's spelling starts with (a shared one says nothing about which)."""
    base = tokenizer.encode(prefix, add_special_tokens=False)
    found = [[t for t in (first_token(tokenizer, base, prefix, s) for s in spellings(label)) if t is not None]
             for label in labels]
    owners: dict[int, set[int]] = {}
    for i, ids in enumerate(found):
        for t in ids:
            owners.setdefault(t, set()).add(i)
    return tuple(tuple(dict.fromkeys([p, *(t for t in ids if owners[t] == {i})]))
                 for i, (p, ids) in enumerate(zip(primary, found)))


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
            return LabelReadout(labels, "first_token", lead, tuple(ids), max_tokens,
                                spelling_tokens(tokenizer, prefix, labels, ids))
    return LabelReadout(labels, "structured_choice", "", (), max_tokens)


def label_logprobs(readout: LabelReadout, token_logprobs: dict[int, float]) -> dict[str, float]:
    """Each label's log-probability: the log of the summed probability of its counted first
    tokens; a token missing from `token_logprobs` counts as probability 0."""
    out = {}
    for label, ids in zip(readout.labels, readout.token_ids):
        lps = [token_logprobs[t] for t in ids if t in token_logprobs and token_logprobs[t] > -math.inf]
        top = max(lps, default=-math.inf)
        out[label] = top + math.log(sum(math.exp(lp - top) for lp in lps)) if lps else -math.inf
    return out


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


def format_top(probs: dict[str, float]) -> str:
    """`raw` for a probability read-out: the labels, most probable first. Built from `probs`
    alone, so a label the engine did not report cannot break it."""
    return " ".join(f"{k}={p:.4f}" for k, p in sorted(probs.items(), key=lambda kv: -kv[1]))


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


def reasoning_problem(spec: ModelSpec, prefix: str) -> Problem | None:
    """A Problem when a label read after `prefix` (the rendered assistant prefix) would be
    read inside the model's reasoning block."""
    if not in_reasoning(prefix):
        return None
    return spec.problem("chat_template_kwargs", reasoning_prefix_message(spec.name))
