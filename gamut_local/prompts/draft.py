"""The drafting prompt: a model writes one meta-rubric for a question from its evidence.

The instructions restate the paper's recipe (five item types, three tiers, meta-insights,
flexible lists with a baseline threshold, processes with required and optional steps,
`subject` phrases that make every compiled check self-contained, every item citing the
snippets it rests on). Snippets are shown as [S1], [S2], ... so citations are short and the
output's JSON schema can list the ids a question may cite; the caller maps them back.
"""

from __future__ import annotations

from gamut_local.prompts.hashing import template_hash

DRAFT_INSTRUCTIONS = """\
You write the grading rubric for one question of a factual-completeness benchmark. The \
question asks about a generic reference ("this dish", "this building"): the answer names \
the entity and gives the facts a complete answer contains. Use only the evidence snippets \
given; every item cites the snippet ids it rests on.

Write a JSON object {"items": [...]}. Each item has an "id" (short, lowercase, unique), a \
"type", a "tier", a "subject" and "evidence" (snippet ids). Types:
- simple: one atomic "fact" (one fact, not several joined by "and").
- strict_list: "elements" that must all be mentioned.
- flexible_list: "options" of which at least "min_required" suffice (a baseline threshold; \
more options earn more credit).
- process: ordered "steps", each {"text", "required"}; optional steps are required: false.
- relationship: "entities" (two or more) and the "aspects" of how they relate.
Lists and processes may carry a "meta_insight": the one-sentence point the list makes.

Tiers: answer_critical (an answer without it fails the question, e.g. what the entity is), \
valuable (a good answer has it), context (background that rounds an answer off).
The "subject" is a noun phrase with its article ("the espresso", "how an espresso is made"): \
checks are read on their own, so it must name what the item is about.

Aim for about 5 to 8 items covering all three tiers."""

DRAFT_QUESTION = "Question:\n{question}\n\n"
# The drafter sees no image: for an image question it is told what the image shows, through
# the question's text-only wording (which names the entity).
DRAFT_NAMED = "The same question without the image, naming what it shows:\n{question_text_only}\n\n"
DRAFT_SNIPPET = "[{ref}] {title}\n{text}\n\n"
DRAFT_TAIL = "Evidence snippets above. Write the rubric as JSON."
RETRY_MESSAGE = ("That output does not validate:\n{errors}\n\n"
                 "Write the whole rubric again as JSON, fixing these problems.")

DRAFT_TEMPLATE_HASH = template_hash(DRAFT_INSTRUCTIONS, DRAFT_QUESTION, DRAFT_NAMED, DRAFT_SNIPPET,
                                    DRAFT_TAIL, RETRY_MESSAGE)


def snippet_ref(i: int) -> str:
    """The short id the prompt shows for the i-th snippet (0-based)."""
    return f"S{i + 1}"


def draft_conversation(question: str, snippets: list[tuple[str, str]], max_snippet_chars: int,
                       system_prompt: str | None = None, question_text_only: str | None = None) -> list[dict]:
    """One drafting request. `snippets` are (title, text) in citation order."""
    body = DRAFT_QUESTION.format(question=question)
    if question_text_only and question_text_only != question:
        body += DRAFT_NAMED.format(question_text_only=question_text_only)
    for i, (title, text) in enumerate(snippets):
        body += DRAFT_SNIPPET.format(ref=snippet_ref(i), title=title, text=text[:max_snippet_chars])
    system = DRAFT_INSTRUCTIONS if not system_prompt else f"{system_prompt}\n\n{DRAFT_INSTRUCTIONS}"
    return [{"role": "system", "content": system}, {"role": "user", "content": body + DRAFT_TAIL}]


def retry_conversation(conversation: list[dict], output: str, errors: list[str]) -> list[dict]:
    """The same request with the rejected output and what was wrong with it."""
    listing = "\n".join(f"- {e}" for e in errors)
    return conversation + [{"role": "assistant", "content": output},
                           {"role": "user", "content": RETRY_MESSAGE.format(errors=listing)}]
