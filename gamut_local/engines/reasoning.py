"""Reasoning models: a candidate's thinking kept apart from the answer that is graded.

A reasoning model writes its thinking first, in a block its chat template opens with `<think>`
(in the prompt, for models that always think, or as its first output token) and closes with
`</think>`; the answer follows. `separate` is the one rule both engines apply to every output:

- With `reasoning_parser` set and the vLLM engine, vLLM's parser for the model splits the text.
- Otherwise the template rule: the text up to the last `</think>` is the reasoning (a leading
  `<think>` dropped), the rest the answer. An output without `</think>` is all reasoning if the
  prompt ended inside a reasoning block (the model never finished thinking: the answer is
  empty), else all answer.

The answer budget (`sampling.max_tokens`) counts answer tokens only: an answer longer than that
is cut to it, `finish_reason` "length", as a model without thinking would be. The thinking
budget (`thinking_budget`) is enforced by vLLM while generating (`thinking_token_budget`: after
that many tokens of thinking it forces the end of the reasoning block), with room for both in
the request's `max_tokens`. Neither ever counts against the other.
"""

from __future__ import annotations

from dataclasses import dataclass

from gamut_local.engines.labels import THINK_CLOSE, THINK_OPEN, in_reasoning


@dataclass(frozen=True)
class Thinking:
    """How one engine's model thinks: decided once at start-up."""

    opened: bool  # the rendered prompt ends inside a reasoning block
    parser: object | None = None  # a vLLM ReasoningParser instance, or None: the template rule
    close_id: int | None = None  # `</think>` as one token id, where the tokenizer has it


def thinking_for(tokenizer, prefix: str, parser=None) -> Thinking | None:
    """None for a model that does not think (its template never mentions `</think>` and no
    parser is set): its outputs are answers as they are."""
    template = getattr(tokenizer, "chat_template", None) or ""
    if parser is None and THINK_CLOSE not in template and not in_reasoning(prefix):
        return None
    close = tokenizer.convert_tokens_to_ids(THINK_CLOSE) if THINK_CLOSE in tokenizer.get_vocab() else None
    return Thinking(in_reasoning(prefix), parser, close)


def split_reasoning(text: str, thinking: Thinking) -> tuple[str | None, str]:
    """(reasoning, answer) of one output, by the rules in the module docstring."""
    parser = thinking.parser
    start = getattr(parser, "start_token", THINK_OPEN) if parser is not None else THINK_OPEN
    if not thinking.opened and start not in text and THINK_CLOSE not in text:
        return None, text  # the model did not think this time
    if parser is not None:
        reasoning, content = parser.extract_reasoning(text, None)
        return reasoning, (content or "").lstrip()
    if THINK_CLOSE not in text:
        return text.split(THINK_OPEN, 1)[-1], ""
    head, _, answer = text.rpartition(THINK_CLOSE)
    return head.split(THINK_OPEN, 1)[-1], answer.lstrip()


def reasoning_token_count(token_ids: list[int], reasoning: str, tokenizer, thinking: Thinking) -> int:
    """Generated tokens up to and including the end of the reasoning block: exact where
    `</think>` is one token, else the reasoning re-tokenised with its markers."""
    if thinking.close_id is not None and thinking.close_id in token_ids:
        return len(token_ids) - token_ids[::-1].index(thinking.close_id)
    if thinking.close_id is not None or THINK_CLOSE not in tokenizer.decode(token_ids):
        return len(token_ids)  # never closed: everything generated was thinking
    return min(len(token_ids), len(tokenizer.encode(reasoning + THINK_CLOSE, add_special_tokens=False)))


def separate(text: str, token_ids: list[int], finish_reason: str | None, tokenizer,
             thinking: Thinking | None, answer_budget: int) -> dict:
    """The answer, its reasoning and their token counts, the answer held to `answer_budget`
    tokens: `Completion` fields."""
    if thinking is None:
        return {"text": text, "finish_reason": finish_reason, "reasoning": None, "reasoning_tokens": None}
    reasoning, answer = split_reasoning(text, thinking)
    if reasoning is None:
        return {"text": answer, "finish_reason": finish_reason, "reasoning": None, "reasoning_tokens": None}
    n = reasoning_token_count(list(token_ids), reasoning, tokenizer, thinking)
    answer_ids = tokenizer.encode(answer, add_special_tokens=False)
    if len(answer_ids) > answer_budget:
        answer, finish_reason = tokenizer.decode(answer_ids[:answer_budget], skip_special_tokens=True), "length"
    return {"text": answer, "finish_reason": finish_reason, "reasoning": reasoning.strip(), "reasoning_tokens": n}
