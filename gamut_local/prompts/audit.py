"""The audit prompt: does one cited snippet support one drafted item? (the paper's
self-refinement pass, which re-verifies every item against the evidence it cites).

One request per (item, snippet), graded through `classify` over three labels, so each
comes back with a full label distribution. The snippet comes first: a snippet cited by
several items gives requests that share their head, which the prefix cache reuses.
"""

from __future__ import annotations

from gamut_local.prompts.hashing import template_hash

AUDIT_LABELS = ("supported", "partially_supported", "unsupported")

AUDIT_INSTRUCTIONS = """\
You check a rubric item against one evidence snippet.

Decide whether the snippet supports the claim:
- supported: the snippet states everything the claim says (paraphrase is fine).
- partially_supported: the snippet states part of the claim, or states it less precisely.
- unsupported: the snippet does not state the claim, or contradicts it.

Use only the snippet, not your own knowledge. Answer with exactly one word: supported, \
partially_supported or unsupported."""

AUDIT_SNIPPET = "Snippet: {title}\n<<<\n{text}\n>>>\n\n"
AUDIT_CLAIM = "Claim:\n{claim}\n\nVerdict:"

AUDIT_TEMPLATE_HASH = template_hash(AUDIT_INSTRUCTIONS, AUDIT_SNIPPET, AUDIT_CLAIM, *AUDIT_LABELS)


def audit_conversation(title: str, text: str, claim: str, system_prompt: str | None = None) -> list[dict]:
    system = AUDIT_INSTRUCTIONS if not system_prompt else f"{system_prompt}\n\n{AUDIT_INSTRUCTIONS}"
    user = AUDIT_SNIPPET.format(title=title, text=text) + AUDIT_CLAIM.format(claim=claim)
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]
