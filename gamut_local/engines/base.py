"""What every back end shares: the `Engine` protocol and what it returns.

Engines take OpenAI-style conversations: a list of messages `{"role": ..., "content": str |
[parts]}` where a part is `{"type": "text", "text": ...}` or `{"type": "image_pil",
"image_pil": <PIL.Image>}`. Outputs come back in input order. Engines pass conversations
through unchanged: a model's `system_prompt` is the caller's to add.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

from gamut_local.config import Sampling

FIRST_TOKEN = "first_token"  # label distribution read off one restricted decoding step
STRUCTURED_CHOICE = "structured_choice"  # output constrained to one label; probs one-hot
LABEL_SEQUENCE = "label_sequence"  # transformers only: each label's full-sequence likelihood


@dataclass
class Completion:
    text: str  # the final answer: a reasoning model's thinking is split off (engines/reasoning.py)
    finish_reason: str | None  # "stop" (end of turn) or "length" (hit max_tokens)
    prompt_tokens: int
    completion_tokens: int  # every generated token, reasoning included
    num_cached_tokens: int | None  # prompt tokens served from the prefix cache; None: no cache
    reasoning: str | None = None  # the thinking before the answer; None: the model did not think
    reasoning_tokens: int | None = None
    # A served request that failed for a transient reason after its re-sends: no answer at all
    # (an empty one would be graded as the model's); the stage keeps the others, and a rerun
    # asks this one again.
    failure: RequestFailure | None = None


@dataclass
class Classification:
    probs: dict[str, float]  # over the given labels, sums to 1; empty if unreadable
    label: str | None  # the arg-max label; None if the output could not be read
    raw: str  # what the model produced, or its top label tokens with probabilities
    method: str  # FIRST_TOKEN, STRUCTURED_CHOICE or LABEL_SEQUENCE: the one that gave `label`
    prompt_tokens: int
    num_cached_tokens: int | None
    attempts: int = 1  # 2: the first readout was unreadable and the fallback method re-asked
    # A served request that failed for a transient reason after its re-sends: no verdict at
    # all (never `invalid`, which scores as missing and is never asked again); the stage keeps
    # the others, and a rerun asks this one again.
    failure: RequestFailure | None = None


@dataclass(frozen=True)
class RequestFailure:
    reason: str  # what the last attempt met ("HTTP 503: ...", "no reply within 2 s"), redacted
    attempts: int
    gone: bool  # the server refused connections: the stage stops after keeping what came back


def failed_requests(failed: list[RequestFailure], kind: str, stopped: bool) -> tuple[str, str]:
    """How a stage says that `failed` requests of `kind` ("answer", "verdict") got nothing
    back after their re-sends, and what a rerun does about it: (what failed, the rerun)."""
    n = len(failed)
    what = (f"{'1' if n == 1 else n} {kind} request{'' if n == 1 else 's'} failed after {failed[0].attempts} "
            f"attempts (the first, {failed[0].reason})")
    rerun = ("the server stopped accepting connections, so the chunks after them were not asked: rerun to resume"
             if stopped else "rerun to ask only those")
    return what, rerun


class Engine(Protocol):
    name: str
    backend: str

    def chat(self, conversations: list[list[dict]], sampling: Sampling) -> list[Completion]: ...

    def classify(self, conversations: list[list[dict]], labels: Sequence[str]) -> list[Classification]: ...

    def close(self) -> None: ...
