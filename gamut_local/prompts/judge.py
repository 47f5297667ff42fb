"""The judge prompt: one request per (response, check), and the template's hash.

The judge prompt is laid out for the prefix cache: static instructions and the four verdict
definitions (system message), then the question (and image), then the response, then the one
check last. Everything before the check is byte-identical across a response's checks, so an
engine with prefix caching computes the long part (~instructions + answer) once per response.
"""

from __future__ import annotations

from gamut_local.prompts.hashing import template_hash
from gamut_local.vocab import JUDGE_LABELS

JUDGE_INSTRUCTIONS = """\
You grade one response to a question against one rubric check.

Read the question and the response, then decide how the response handles the single check \
given at the end. Judge only that check: ignore everything else the response says, good or \
bad. Do not fill gaps in the response with your own knowledge; judge what it actually says.

Verdicts:
- meets: the response clearly states what the check asks for (paraphrase is fine).
- partially_meets: the response covers part of it, or states it vaguely or incompletely.
- missing: the response does not address what the check asks for.
- contradicts: the response states something that conflicts with the check.

Answer with exactly one word: meets, partially_meets, missing or contradicts."""

# The user turn. {question} and {response} form the shared prefix; {check} comes last.
JUDGE_QUESTION = "Question:\n{question}\n\n"
JUDGE_RESPONSE = "Response:\n<<<\n{response}\n>>>\n\n"
JUDGE_CHECK = "Check:\n{check}\n\nVerdict:"

JUDGE_TEMPLATE_HASH = template_hash(JUDGE_INSTRUCTIONS, JUDGE_QUESTION, JUDGE_RESPONSE, JUDGE_CHECK,
                           *JUDGE_LABELS)


def judge_conversations(question: str, response: str, checks: list[str], image=None,
                        system_prompt: str | None = None) -> list[list[dict]]:
    """One judge request per check, all sharing every byte before the check text.

    Without an image the user turn is one string (text-only chat templates render it as is);
    with one, it is [question text, image, response + check text].
    """
    system = JUDGE_INSTRUCTIONS if not system_prompt else f"{system_prompt}\n\n{JUDGE_INSTRUCTIONS}"
    head = JUDGE_QUESTION.format(question=question)
    body = JUDGE_RESPONSE.format(response=response)
    convs = []
    for check in checks:
        tail = body + JUDGE_CHECK.format(check=check)
        if image is None:
            content = head + tail
        else:
            content = [{"type": "text", "text": head},
                       {"type": "image_pil", "image_pil": image},
                       {"type": "text", "text": tail}]
        convs.append([{"role": "system", "content": system}, {"role": "user", "content": content}])
    return convs
