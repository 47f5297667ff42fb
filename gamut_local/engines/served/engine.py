"""The `openai` back end's engine: a start-up that asks the server what it is (`Startup`),
then verdicts and answers sent concurrently, in order (see the package's docstring)."""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from typing import Sequence

from gamut_local.config import JudgeSpec, ModelSpec, Sampling
from gamut_local.engines.base import FIRST_TOKEN, STRUCTURED_CHOICE, Classification, Completion, RequestFailure
from gamut_local.engines.images import image_parts_as_urls
from gamut_local.engines.labels import (
    PROBE,
    LabelReadout,
    argmax,
    cached_readout,
    format_top,
    label_logprobs,
    match_label,
    normalise,
)
from gamut_local.engines.served.http import Endpoint, Failed, backoff_s, describe, snippet
from gamut_local.engines.served.readout import (
    STRUCTURED_SCHEMA,
    STRUCTURED_VLLM,
    TOP_LOGPROBS,
    NoTokenizer,
    ServerTokenizer,
    cached_tokens,
    content_of,
    label_tokens,
    read_spellings,
    sampling_fields,
    server_tokenizer,
    every_spelling,
)
from gamut_local.vocab import JUDGE_LABELS

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Startup:
    """What a server said at start-up, for one model config: asked once where a stage builds
    its engine and handed to what needs it, the judge's settings identity (`identity` and the
    readout it `resolved`) and the engine, which then reads labels as that identity says. A
    candidate's (`reads_labels` False) resolved no readout: its engine chats, and resolves one
    only if asked to classify (an audit model's)."""

    identity: dict[str, str]  # host, served model name, server version
    resolved: dict[str, str]  # how verdicts are read (`OpenAIEngine._resolved`); {} for a candidate
    reads_labels: bool
    chat_prefix: str
    tokenizes: bool  # labels are read on the server's tokenizer (its /tokenize)
    vllm_fields: bool  # requests carry vLLM's own sampling fields
    readouts: dict[tuple[str, ...], LabelReadout]  # per label set, as resolved on that tokenizer
    label_names: dict[int, str]
    processed: bool
    top_logprobs: int
    structured: str | None

    def settings_identity(self) -> dict[str, str]:
        """For the judge's settings hash: verdicts from another server or version, read another
        way or off other tokens, never mix with these."""
        return {**self.identity, **self.resolved}


def reads_labels(spec: ModelSpec) -> bool:
    """The one rule for what start-up a model's role needs. A judge's resolves how labels are
    read, probes included (its verdicts' settings hash names that readout, and a server that
    can read none is refused before the run sends anything). A candidate only chats: its
    start-up asks who the server is and which sampling fields it takes, nothing of labels, so
    a chat API that cannot judge still answers. (A plain ModelSpec that does classify, the
    audit stage's model, resolves the readout at its first `classify`.)"""
    return isinstance(spec, JudgeSpec)


def start_up(spec: ModelSpec) -> Startup:
    """Ask the server what it is and, for a judge, how it reads labels (`reads_labels`);
    nothing else is sent."""
    engine = OpenAIEngine(spec)
    engine.close()
    return engine.startup


class OpenAIEngine:
    backend = "openai"

    def __init__(self, spec: ModelSpec, startup: Startup | None = None):
        """`startup`: what this model's server said at the stage's start-up (asked here if None)."""
        self.name, self.spec, self.model, self.server = spec.name, spec, spec.path, spec.server
        self.endpoint = Endpoint(spec)
        self.base, self.root = self.endpoint.base, self.endpoint.root
        self.problem = self.endpoint.problem
        self.get_json = self.endpoint.get_json
        if startup is None:
            try:
                startup = self._start_up()
            except BaseException:
                self.close()
                raise
        self.startup = startup
        self.identity, self.resolved = startup.identity, startup.resolved
        self.chat_prefix, self.vllm_fields = startup.chat_prefix, startup.vllm_fields
        self.processed, self.top_logprobs = startup.processed, startup.top_logprobs
        self.structured = startup.structured  # how the server constrains a choice (None: found when needed)
        # The engine's own copies: its caches grow, the start-up it was handed stays as it was.
        self._readouts, self.label_names = dict(startup.readouts), dict(startup.label_names)
        self.tokenizer = ServerTokenizer(self.endpoint) if startup.tokenizes else NoTokenizer()
        self._labels_checked = startup.reads_labels

    def _start_up(self) -> Startup:
        """Ask the server what it is and, for a judge, how labels are read from it (see the
        package's docstring and `reads_labels`)."""
        self._readouts: dict[tuple[str, ...], LabelReadout] = {}
        self.label_names: dict[int, str] = {}
        self.top_logprobs = TOP_LOGPROBS  # asked per verdict step (the verdict labels')
        self.processed = False  # whether the server reports the restricted step's log-probabilities
        self.structured = None
        identity = self.endpoint.identify()
        self.tokenizer, chat_prefix = server_tokenizer(self.endpoint)
        self.chat_prefix = chat_prefix
        # A server that tokenises for us is vLLM's: it takes vLLM's own sampling fields.
        self.vllm_fields = not isinstance(self.tokenizer, NoTokenizer)
        judge = reads_labels(self.spec)
        if judge:
            self._check_readout()
        return Startup(identity=identity, resolved=self._resolved() if judge else {}, reads_labels=judge,
                       chat_prefix=chat_prefix,
                       tokenizes=isinstance(self.tokenizer, ServerTokenizer), vllm_fields=self.vllm_fields,
                       readouts=dict(self._readouts), label_names=dict(self.label_names), processed=self.processed,
                       top_logprobs=self.top_logprobs, structured=self.structured)

    def _resolved(self) -> dict[str, str]:
        """How verdicts are read, for the settings identity: the method (first-token
        probabilities or one-hot structured choice), as the offline engines' identity; which
        tokens a label's probability sums (at most the API's 20 in all, `read_spellings`);
        and the sampling fields each verdict request pins (verdicts read with a server's
        generation_config.json defaults, before they were pinned, never pool with these)."""
        readout = self.label_readout(JUDGE_LABELS)
        pinned = sampling_fields(0.0, vllm_fields=self.vllm_fields)
        return {"readout": readout.method, "label_tokens": label_tokens(readout),
                "sampling": json.dumps(pinned, sort_keys=True)}

    # -- start-up --------------------------------------------------------------------------

    def label_readout(self, labels: Sequence[str]) -> LabelReadout:
        return cached_readout(self._readouts, self.tokenizer, labels, self.chat_prefix)

    def _check_readout(self) -> None:
        """Probe the verdict labels' readout once; a server that gives neither log-probabilities
        nor constrained choice is refused here, before the run sends anything."""
        readout = self.label_readout(JUDGE_LABELS)
        if readout.method == FIRST_TOKEN:
            for tid in readout.first_token_ids:
                self.label_names[tid] = self.get_json("POST", self.root + "/detokenize",
                                                      {"model": self.model, "tokens": [tid]})["prompt"]
            try:
                top = self._top(self._probe(self._first_token_payload(PROBE, readout, len(readout.labels))))
            except Failed:  # the server refused allowed_token_ids or logprobs
                top = {}
            if top and set(top) <= set(every_spelling(readout).all_token_ids()):
                # processed log-probabilities: exact, every spelling read reported
                self.processed, self.top_logprobs = True, len(read_spellings(readout).all_token_ids())
                self._warn_left_out(readout)
                return
            if top and set(top) & set(readout.first_token_ids):
                log.warning("%s: the server reports raw log-probabilities; labels are read from the top %d "
                            "(start it with --logprobs-mode processed_logprobs for the exact restricted "
                            "distribution)", self.name, TOP_LOGPROBS)
                return
            log.warning("%s: the server returned no label log-probabilities; verdicts use structured choice",
                        self.name)
            self.tokenizer, self.label_names = NoTokenizer(), {}  # every label set: structured choice
            self._readouts.clear()
            readout = self.label_readout(JUDGE_LABELS)
        self.structured = self._structured_kind(readout)

    def _warn_left_out(self, readout: LabelReadout) -> None:
        """Say which counted spellings the API's cap of 20 log-probabilities leaves out."""
        kept = set(read_spellings(readout).all_token_ids())
        left = [t for t in every_spelling(readout).all_token_ids() if t not in kept]
        if left:
            names = [self.get_json("POST", self.root + "/detokenize", {"model": self.model, "tokens": [t]})["prompt"]
                     for t in left]
            log.warning("%s: the API returns at most %d log-probabilities, so %d of the labels' %d counted "
                        "first tokens are left out (%s) and each verdict is read over the other %d (the "
                        "offline engines count all; the label tokens read are part of the judge's identity)",
                        self.name, TOP_LOGPROBS, len(left), len(kept) + len(left),
                        ", ".join(map(repr, names)), len(kept))

    def _structured_kind(self, readout: LabelReadout) -> str:
        hello = [{"role": "user", "content": "Say hello to me in a friendly sentence."}]
        for kind in (STRUCTURED_VLLM, STRUCTURED_SCHEMA):
            try:
                body = self._probe(self._choice_payload(hello, readout, kind))
            except Failed:
                continue  # the server refused the field (HTTP 400): try the next way
            if self._choice(body, readout, kind) is not None:
                return kind
        raise self.problem(f"{self.base} gives neither label log-probabilities (logprobs with "
                           f"allowed_token_ids and /tokenize, as vLLM serves) nor constrained choice "
                           f"(structured_outputs or a response_format JSON schema); it cannot judge")

    def _probe(self, payload: dict) -> dict:
        return self.get_json("POST", self.base + "/chat/completions", payload)

    # -- request bodies and replies ---------------------------------------------------------

    def _sampling(self, temperature: float = 0.0, top_p: float = 1.0) -> dict:
        """Every request's sampling fields (a verdict's: greedy, everything else neutral)."""
        return sampling_fields(temperature, top_p, self.vllm_fields)

    def _first_token_payload(self, conversation: list[dict], readout: LabelReadout, top: int) -> dict:
        return {"model": self.model, "messages": conversation, "max_tokens": 1, **self._sampling(),
                "logprobs": True, "top_logprobs": top, "allowed_token_ids": read_spellings(readout).all_token_ids(),
                "return_tokens_as_token_ids": True}

    def _choice_payload(self, conversation: list[dict], readout: LabelReadout, kind: str) -> dict:
        payload = {"model": self.model, "messages": conversation, **self._sampling()}
        if kind == STRUCTURED_VLLM:
            return {**payload, "max_tokens": readout.max_tokens, "structured_outputs": {"choice": list(readout.labels)}}
        schema = {"type": "object", "properties": {"verdict": {"type": "string", "enum": list(readout.labels)}},
                  "required": ["verdict"], "additionalProperties": False}
        return {**payload, "max_tokens": readout.max_tokens + 32,
                "response_format": {"type": "json_schema", "json_schema": {"name": "verdict", "strict": True,
                                                                          "schema": schema}}}

    @staticmethod
    def _top(body: dict) -> dict[int, float]:
        """The first step's top log-probabilities by token id (`token_id:N`, as asked)."""
        try:
            step = body["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
        except (KeyError, IndexError, TypeError):
            return {}
        out = {}
        for t in step:
            token = str(t.get("token", ""))
            if token.startswith("token_id:") and token[9:].lstrip("-").isdigit():
                out[int(token[9:])] = float(t["logprob"])
        return out

    @staticmethod
    def _choice(body: dict, readout: LabelReadout, kind: str) -> str | None:
        text = content_of(body)
        if kind == STRUCTURED_SCHEMA:
            try:
                text = str(json.loads(text).get("verdict", ""))
            except (ValueError, AttributeError):
                return None
        return match_label(text, readout.labels)

    # -- sending ---------------------------------------------------------------------------

    def _send_all(self, payloads: list[dict], conversations: list[list[dict]]) -> list[dict | Failed]:
        """Every payload, in order, at most `max_concurrency` in flight; a reply or a Failed."""
        if not payloads:
            return []
        return asyncio.run(self._send_async(payloads, conversations))

    async def _send_async(self, payloads, conversations):
        import httpx

        limit = asyncio.Semaphore(self.server.max_concurrency)
        pool = httpx.Limits(max_connections=self.server.max_concurrency,
                            max_keepalive_connections=self.server.max_concurrency)
        async with httpx.AsyncClient(headers=self.endpoint.headers, timeout=self.endpoint.timeout, limits=pool,
                                     params=self.endpoint.params) as client:

            async def one(i: int):
                async with limit:
                    return await self._send_one(client, payloads[i], i, conversations[i])

            # Tasks start in input order and the semaphore wakes waiters first come, first
            # served, so requests reach the server in the judge stage's prefix-sharing order.
            tasks = [asyncio.ensure_future(one(i)) for i in range(len(payloads))]
            try:
                results = await asyncio.gather(*tasks)
            except BaseException:
                for t in tasks:
                    t.cancel()
                raise
        return results

    async def _send_one(self, client, payload: dict, index: int, conversation: list[dict]):
        import httpx

        url = self.base + "/chat/completions"
        for attempt in range(self.server.retries + 1):
            retry_after, gone = None, False
            try:
                r = await client.post(url, json=payload)
            except httpx.TimeoutException:
                reason = f"no reply within {self.server.request_timeout:g} s"
            except httpx.ConnectError as err:
                reason, gone = f"connection refused ({err})", True
            except httpx.TransportError as err:  # the connection closed mid-reply, and the like
                reason = f"{type(err).__name__}: {err}"
            else:
                if r.status_code == 200:
                    try:
                        return r.json()
                    except ValueError:
                        reason = f"a reply that is not JSON: {snippet(r.text, 120)}"
                elif r.status_code in (408, 429) or r.status_code >= 500:
                    reason, retry_after = f"HTTP {r.status_code}: {snippet(r.text, 120)}", r.headers.get("retry-after")
                else:
                    field = "server.api_key_env" if r.status_code in (401, 403) else "server.base_url"
                    raise self.problem(f"the server refused request {index + 1} of this batch "
                                       f"({describe(conversation)}): HTTP {r.status_code}: {snippet(r.text)}", field)
            if attempt < self.server.retries:
                await asyncio.sleep(backoff_s(attempt, retry_after))
        return Failed(self.endpoint.scrub(reason), self.server.retries + 1, gone)

    # -- the Engine interface --------------------------------------------------------------

    def chat(self, conversations: list[list[dict]], sampling: Sampling) -> list[Completion]:
        conversations = image_parts_as_urls(conversations)
        # The config's temperature and top_p, every other field neutral: as the offline
        # engine's SamplingParams (vllm_engine.VllmEngine.chat), not the model's defaults.
        base = {"model": self.model, "max_tokens": sampling.max_tokens,
                **self._sampling(sampling.temperature, sampling.top_p), "seed": sampling.seed}
        if sampling.json_schema is not None:
            base["response_format"] = {"type": "json_schema",
                                       "json_schema": {"name": "output", "schema": sampling.json_schema}}
        replies = self._send_all([{**base, "messages": c} for c in conversations], conversations)
        # A transient failure is no answer: it comes back marked, the stage keeps the others.
        return [self._failed_answer(r, c) if isinstance(r, Failed) else self._completion(r)
                for r, c in zip(replies, conversations)]

    @staticmethod
    def _failed_answer(failed: Failed, conversation: list[dict]) -> Completion:
        return Completion(text="", finish_reason=None, prompt_tokens=0, completion_tokens=0, num_cached_tokens=None,
                          failure=_failure(failed, conversation))

    @staticmethod
    def _completion(body: dict) -> Completion:
        usage = body.get("usage") or {}
        return Completion(text=content_of(body), finish_reason=body["choices"][0].get("finish_reason"),
                          prompt_tokens=int(usage.get("prompt_tokens") or 0),
                          completion_tokens=int(usage.get("completion_tokens") or 0),
                          num_cached_tokens=cached_tokens(usage))

    def classify(self, conversations: list[list[dict]], labels: Sequence[str]) -> list[Classification]:
        if not self._labels_checked:
            # Started without the readout (not a judge's: `reads_labels`), yet asked for labels:
            # an audit model's. Resolved now, as a judge's start-up does; no judge's hash holds it.
            self._check_readout()
            self._labels_checked = True
        conversations = image_parts_as_urls(conversations)
        readout = self.label_readout(labels)
        if readout.method == FIRST_TOKEN:
            # Processed log-probabilities: as many as the step may return (every token read);
            # raw ones: the API's most, the labels among them.
            top = len(read_spellings(readout).all_token_ids()) if self.processed else TOP_LOGPROBS
            payloads = [self._first_token_payload(c, readout, top) for c in conversations]
        else:
            if self.structured is None:
                self.structured = self._structured_kind(readout)
            payloads = [self._choice_payload(c, readout, self.structured) for c in conversations]
        replies = self._send_all(payloads, conversations)
        # A transient failure is no verdict: kept as `invalid` it would score as missing and
        # never be asked again. It comes back marked; the stage keeps the others.
        return [self._failed(r, readout, c) if isinstance(r, Failed) else self._read(r, readout)
                for r, c in zip(replies, conversations)]

    @staticmethod
    def _failed(failed: Failed, readout: LabelReadout, conversation: list[dict]) -> Classification:
        return Classification(probs={}, label=None, raw="", method=readout.method, prompt_tokens=0,
                              num_cached_tokens=None, failure=_failure(failed, conversation))

    def _read(self, body, readout: LabelReadout) -> Classification:
        usage = body.get("usage") or {}
        common = dict(prompt_tokens=int(usage.get("prompt_tokens") or 0), num_cached_tokens=cached_tokens(usage))
        if readout.method == FIRST_TOKEN:
            # Each label's counted spellings summed, as the offline engines read them; a token
            # the step did not report had no probability left after the restriction.
            probs = normalise(label_logprobs(read_spellings(readout), self._top(body)))
            raw = format_top(probs) if probs else content_of(body)
            return Classification(probs=probs, label=argmax(probs, readout.labels), raw=raw,
                                  method=FIRST_TOKEN, **common)
        label = self._choice(body, readout, self.structured)
        probs = {lab: float(lab == label) for lab in readout.labels} if label else {}
        return Classification(probs=probs, label=label, raw=content_of(body), method=STRUCTURED_CHOICE, **common)

    def close(self) -> None:
        self.endpoint.close()


def _failure(failed: Failed, conversation: list[dict]) -> RequestFailure:
    """A request still failing after its re-sends, named by the start of its text."""
    return RequestFailure(f"{describe(conversation)}: {failed.reason}", failed.attempts, failed.gone)

