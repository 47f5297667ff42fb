"""The `openai` back end: candidates and judges behind an OpenAI-compatible chat endpoint
(`vllm serve`, SGLang, a provider), instead of weights loaded into this process.

Start-up asks the server what it is (`/models`, `/version`) and how labels can be read from it:
- **first_token**, where the server tokenises for us (vLLM's `/tokenize`, `/detokenize`): the
  labels' first tokens are found by the same rules as the offline engines
  (`labels.label_readout_for`, on the server's tokenizer and chat template), and each verdict
  is one decoding step restricted to them (`allowed_token_ids`) whose `top_logprobs` are
  renormalised over the labels. Exact when the server runs with `--logprobs-mode
  processed_logprobs` (the top log-probabilities are then the restricted ones, as offline);
  with raw log-probabilities the labels are read from the top 20 and a warning says so.
  The API returns at most 20 log-probabilities: where labels have more counted spellings
  (the verdict labels have at most 16), the step is restricted to 20 of them, the least likely spellings left out
  (`read_spellings`), with a warning, and the tokens read are in the judge's identity.
- **structured_choice** otherwise: the output is constrained to one label (vLLM's
  `structured_outputs: {choice}`, else a `response_format` JSON schema with an enum) and the
  distribution is one-hot.
- A server offering neither is refused before any request of the run is sent.

Every request pins the sampling fields the readout depends on (`sampling_fields`): `vllm serve`
fills each field a request leaves unset from the model's `generation_config.json` (a repetition
penalty reaches prompt tokens, and every label word is in the judge's instructions), so a
verdict is read with the offline engine's neutral values whoever started the server, and a
candidate samples with its config's `sampling`, neutral otherwise, as offline.

Requests go out in the order given (the judge stage's prefix-sharing order), at most
`max_concurrency` in flight (asyncio + a semaphore, so Ctrl-C cancels every request in flight
at once). Every request, start-up ones included, is re-sent after a timeout, a dropped
connection, 408, 429 or 5xx with exponential backoff and full jitter, `retries` times; one
still failing is no answer and no verdict: an answer stops the stage (the rerun resumes); a
verdict comes back marked failed (`Classification.failure`, never an `invalid` verdict, which
would score as missing and never be asked again), the judge stage keeps the others and says
how many failed, and the rerun asks only those. A server that stops accepting connections
stops the stage after what came back is kept. Any other 4xx is the request's fault and stops
the stage naming it. The start-up runs once per process and server (`_STARTUPS`): the readout
it resolved is in the judge's settings identity (`server_identity`) and is the one the engine
uses.
The API key comes only from the variable `api_key_env` names; it, a URL's credentials and
key-like query parameters are redacted (`errors.redact`) from every message this module writes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import random
import time
from typing import Sequence

from gamut_local.config import ModelSpec, Sampling, server_host
from gamut_local.engines import FIRST_TOKEN, STRUCTURED_CHOICE, Classification, Completion, RequestFailure
from gamut_local.engines.labels import (
    PROBE,
    LabelReadout,
    argmax,
    cached_readout,
    format_top,
    label_logprobs,
    label_readout_for,
    match_label,
    normalise,
)
from gamut_local.engines.vllm_engine import image_parts_as_urls
from gamut_local.errors import InputError, redact, register_secret
from gamut_local.vocab import JUDGE_LABELS

log = logging.getLogger(__name__)
# httpx logs every request's full URL at INFO, query string (which may hold a key) included:
# this module's own messages say what a person needs, redacted.
logging.getLogger("httpx").setLevel(logging.WARNING)

TOP_LOGPROBS = 20  # the most OpenAI's API (and vLLM's default max_logprobs) returns
BACKOFF_BASE_S = 0.5  # first wait before a re-send; doubles each time, capped, fully jittered
BACKOFF_CAP_S = 30.0
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


class _Failed(Exception):
    """A request that failed after every re-send (a timeout, 408, 429, 5xx, a dropped
    connection: transient, retried on rerun), or a start-up request the server answered with
    another status (e.g. 404: it has no /tokenize); `gone`: the server refused connections."""

    def __init__(self, reason: str, attempts: int, gone: bool):
        super().__init__(reason)
        self.reason, self.attempts, self.gone = reason, attempts, gone


class _NoTokenizer:
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
    except (_Failed, KeyError, TypeError):
        return _NoTokenizer(), ""
    return ServerTokenizer(endpoint), prefix


def read_spellings(readout: LabelReadout, limit: int = TOP_LOGPROBS) -> LabelReadout:
    """The first tokens one restricted step reads: every counted spelling (`_spelled`) where
    they fit in the `limit` log-probabilities the API returns, else the first `limit` taken
    rank by rank (every label's lead spelling, then every label's second, ...), so the least
    likely spellings (e.g. ` MEETS`) are the ones left out. The step is restricted to exactly
    these tokens, so the distribution read is complete over them, never silently short."""
    spelled = _spelled(readout)
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


def api_key(spec: ModelSpec) -> str | None:
    """The key from the variable the config names; a named variable that is unset is an error."""
    var = spec.server.api_key_env
    if var is None:
        return None
    key = os.environ.get(var, "")
    register_secret(key)  # hidden from every message, manifest and log from here on
    if not key:
        raise InputError([spec.problem("server.api_key_env", f"environment variable {var} is not set "
                                                             "(it should hold the API key)")])
    return key


SERVER_URL_ENV = "GAMUT_SERVER_URL"  # set by a SLURM client job: its judge's server job's address


def served_url(spec: ModelSpec) -> str:
    """Where requests go: for a judge whose server the run's SLURM graph starts (`server.serve`),
    the address its job handed the client job (in GAMUT_SERVER_URL); else `base_url`."""
    if spec.server.serve and os.environ.get(SERVER_URL_ENV):
        return os.environ[SERVER_URL_ENV]
    return spec.server.base_url


def server_root(base_url: str) -> str:
    """The server's root (where vLLM serves /version and /tokenize): `base_url` without `/v1`."""
    url = base_url.rstrip("/")
    return url[:-3] if url.endswith("/v1") else url


def backoff_s(attempt: int, retry_after: str | None) -> float:
    """Seconds before re-send number `attempt + 1`: the server's Retry-After where it gives
    one (capped), else full jitter over an exponentially growing window."""
    try:
        if retry_after is not None:
            return min(float(retry_after), BACKOFF_CAP_S)
    except ValueError:
        pass
    return random.uniform(0, min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2 ** attempt))


def _snippet(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "..."


def _describe(conversation: list[dict]) -> str:
    """A request, named by the start of its last text part (for an error a person reads)."""
    for m in reversed(conversation):
        c = m.get("content")
        texts = [c] if isinstance(c, str) else [p.get("text", "") for p in c or () if p.get("type") == "text"]
        if any(texts):
            return repr(_snippet(" ".join(texts), 80))
    return "(no text)"


class Endpoint:
    """A server's address, key and a client for the few start-up requests; every message it
    writes names the config field at fault and never holds the key."""

    def __init__(self, spec: ModelSpec):
        import httpx

        from urllib.parse import parse_qsl, urlsplit, urlunsplit

        self.spec, self.model, self.server = spec, spec.path, spec.server
        # An address's query string (a provider's `?api-version=`, a proxy's token) goes with
        # every request as parameters, so paths join onto the path, not onto the query.
        url = urlsplit(served_url(spec))
        self.params = parse_qsl(url.query, keep_blank_values=True)
        self.base = urlunsplit(url._replace(query="", fragment="")).rstrip("/")
        self.root = server_root(self.base)
        self._key = api_key(spec)
        self.headers = {"Authorization": f"Bearer {self._key}"} if self._key else {}
        self.timeout = httpx.Timeout(self.server.request_timeout, connect=min(10.0, self.server.request_timeout))
        self.client = httpx.Client(headers=self.headers, timeout=self.timeout, params=self.params)

    @staticmethod
    def scrub(text: str) -> str:
        return redact(text)

    def problem(self, message: str, field: str = "server.base_url") -> InputError:
        return InputError([self.spec.problem(field, self.scrub(message))])

    def get_json(self, method: str, url: str, payload: dict | None = None) -> dict:
        """One start-up request, re-sent as every request is (a timeout, a dropped connection,
        408, 429, 5xx: `retries` times, backing off), so one hiccup never changes how the run
        reads labels. Still failing, unreachable or a refused key: an error naming the
        endpoint (the run stops; a rerun starts again); another status: _Failed, for the
        caller to decide (404: the server has no such route)."""
        import httpx

        for attempt in range(self.server.retries + 1):
            retry_after = None
            try:
                r = self.client.request(method, url, json=payload)
            except httpx.HTTPError as err:
                reason = f"cannot reach it: {type(err).__name__}: {err}"
            else:
                if r.status_code in (401, 403):
                    raise self.problem(f"{url} refused the API key (HTTP {r.status_code})", "server.api_key_env")
                if r.status_code == 200:
                    try:
                        return r.json()
                    except ValueError:
                        raise _Failed(f"not JSON: {_snippet(r.text, 120)}", 1, False) from None
                if r.status_code not in (408, 429) and r.status_code < 500:
                    raise _Failed(self.scrub(f"HTTP {r.status_code}: {_snippet(r.text)}"), 1, False)
                reason, retry_after = f"HTTP {r.status_code}: {_snippet(r.text, 120)}", r.headers.get("retry-after")
            if attempt < self.server.retries:
                time.sleep(backoff_s(attempt, retry_after))
        raise self.problem(f"{url} failed after {self.server.retries + 1} attempts ({reason}); nothing of this "
                           f"run was sent yet: rerun when the server answers")

    def identify(self) -> dict[str, str]:
        """Host, served model name and server version; the model must be one the server serves."""
        try:
            models = self.get_json("GET", self.base + "/models")
        except _Failed as err:
            raise self.problem(f"{self.base}/models: {err.reason}") from None
        entries = {m.get("id"): m for m in models.get("data", []) if isinstance(m, dict)}
        if self.model not in entries:
            raise self.problem(f"the server does not serve {self.model!r} (it serves: "
                               f"{', '.join(map(str, entries))})", "path")
        try:
            version = str(self.get_json("GET", self.root + "/version").get("version", "unknown"))
        except _Failed:
            version = "unknown"  # not every server reports one
        entry = entries[self.model]
        # A server the run's SLURM job starts lands on any node: its host is no identity
        # (its weights are, in the settings hash), so resubmissions resume.
        host = "served by the run's server job" if self.server.serve else server_host(self.base)
        return {"host": host, "model": self.model, "version": version,
                "owned_by": str(entry.get("owned_by", ""))}

    def close(self) -> None:
        self.client.close()


# What each server said at start-up, once per process, by (address, model config, key): the
# manifest's settings hash, the stage's and the engine's all read it, so the hash always
# describes the readout the engine uses, and the server is asked once per process.
_STARTUPS: dict[tuple[str, str, str], dict] = {}
# The start-up's results an engine keeps (its tokenizer is rebuilt on the engine's own client).
_STARTUP_FIELDS = ("identity", "chat_prefix", "vllm_fields", "label_names", "processed", "top_logprobs",
                   "structured", "resolved", "_readouts")


def server_identity(spec: ModelSpec) -> dict[str, str]:
    """What the endpoint says it is (host, served model name, server version), for the judge's
    settings identity, with the readout the engine resolves on it (the same start-up, probes
    included) and the label tokens it counts: verdicts from another server or version, read
    another way or off other tokens, never mix with these."""
    engine = OpenAIEngine(spec)
    engine.close()
    return {**engine.identity, **engine.resolved}


class OpenAIEngine:
    backend = "openai"
    vllm_fields = False  # whether requests carry vLLM's own sampling fields: found at start-up

    def __init__(self, spec: ModelSpec):
        self.name, self.spec, self.model, self.server = spec.name, spec, spec.path, spec.server
        self.endpoint = Endpoint(spec)
        self.base, self.root = self.endpoint.base, self.endpoint.root
        self.problem = self.endpoint.problem
        self.get_json = self.endpoint.get_json
        self._readouts: dict[tuple[str, ...], LabelReadout] = {}
        self.label_names: dict[int, str] = {}
        self.top_logprobs = TOP_LOGPROBS  # asked per verdict step (the verdict labels')
        self.processed = False  # whether the server reports the restricted step's log-probabilities
        self.structured = None  # how this server constrains a choice, found when first needed
        # The key in force is part of it (in memory only): a refused key is refused at start-up.
        key = (served_url(spec), spec.model_dump_json(), self.endpoint.headers.get("Authorization", ""))
        if key in _STARTUPS:
            self._adopt(_STARTUPS[key])
            return
        try:
            self.identity = self.endpoint.identify()
            self.tokenizer, self.chat_prefix = server_tokenizer(self.endpoint)
            # A server that tokenises for us is vLLM's: it takes vLLM's own sampling fields.
            self.vllm_fields = not isinstance(self.tokenizer, _NoTokenizer)
            self._check_readout()
            self.resolved = self._resolved()
        except BaseException:
            self.close()
            raise
        _STARTUPS[key] = {**{f: _copied(getattr(self, f)) for f in _STARTUP_FIELDS},
                          "tokenizes": isinstance(self.tokenizer, ServerTokenizer)}

    def _adopt(self, startup: dict) -> None:
        """Take this process's earlier start-up on the same server and config as this one's."""
        for field in _STARTUP_FIELDS:
            setattr(self, field, _copied(startup[field]))
        self.tokenizer = ServerTokenizer(self.endpoint) if startup["tokenizes"] else _NoTokenizer()

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
            except _Failed:  # the server refused allowed_token_ids or logprobs
                top = {}
            if top and set(top) <= set(_spelled(readout).all_token_ids()):
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
            self.tokenizer, self.label_names = _NoTokenizer(), {}  # every label set: structured choice
            self._readouts.clear()
            readout = self.label_readout(JUDGE_LABELS)
        self.structured = self._structured_kind(readout)

    def _warn_left_out(self, readout: LabelReadout) -> None:
        """Say which counted spellings the API's cap of 20 log-probabilities leaves out."""
        kept = set(read_spellings(readout).all_token_ids())
        left = [t for t in _spelled(readout).all_token_ids() if t not in kept]
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
            except _Failed:
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
        text = _content(body)
        if kind == STRUCTURED_SCHEMA:
            try:
                text = str(json.loads(text).get("verdict", ""))
            except (ValueError, AttributeError):
                return None
        return match_label(text, readout.labels)

    # -- sending ---------------------------------------------------------------------------

    def _send_all(self, payloads: list[dict], conversations: list[list[dict]]) -> list[dict | _Failed]:
        """Every payload, in order, at most `max_concurrency` in flight; a reply or a _Failed."""
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

    def _stop_if_gone(self, replies: list) -> None:
        gone = next((r for r in replies if isinstance(r, _Failed) and r.gone), None)
        if gone is not None:
            raise self.problem(f"the server stopped accepting connections ({gone.reason}, {gone.attempts} "
                               f"attempts); what was written before this chunk is kept: rerun to resume")

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
                        reason = f"a reply that is not JSON: {_snippet(r.text, 120)}"
                elif r.status_code in (408, 429) or r.status_code >= 500:
                    reason, retry_after = f"HTTP {r.status_code}: {_snippet(r.text, 120)}", r.headers.get("retry-after")
                else:
                    field = "server.api_key_env" if r.status_code in (401, 403) else "server.base_url"
                    raise self.problem(f"the server refused request {index + 1} of this batch "
                                       f"({_describe(conversation)}): HTTP {r.status_code}: {_snippet(r.text)}", field)
            if attempt < self.server.retries:
                await asyncio.sleep(backoff_s(attempt, retry_after))
        return _Failed(self.endpoint.scrub(reason), self.server.retries + 1, gone)

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
        self._stop_if_gone(replies)
        out = []
        for i, body in enumerate(replies):
            if isinstance(body, _Failed):  # an answer has no `invalid`: stop, the rerun resumes
                raise self.problem(f"request {i + 1} of this batch ({_describe(conversations[i])}) failed after "
                                   f"{body.attempts} attempts: {body.reason}; rerun to resume")
            usage = body.get("usage") or {}
            out.append(Completion(text=_content(body), finish_reason=body["choices"][0].get("finish_reason"),
                                  prompt_tokens=int(usage.get("prompt_tokens") or 0),
                                  completion_tokens=int(usage.get("completion_tokens") or 0),
                                  num_cached_tokens=_cached(usage)))
        return out

    def classify(self, conversations: list[list[dict]], labels: Sequence[str]) -> list[Classification]:
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
        return [self._failed(r, readout, c) if isinstance(r, _Failed) else self._read(r, readout)
                for r, c in zip(replies, conversations)]

    @staticmethod
    def _failed(failed: _Failed, readout: LabelReadout, conversation: list[dict]) -> Classification:
        return Classification(probs={}, label=None, raw="", method=readout.method, prompt_tokens=0,
                              num_cached_tokens=None, failure=RequestFailure(
                                  f"{_describe(conversation)}: {failed.reason}", failed.attempts, failed.gone))

    def _read(self, body, readout: LabelReadout) -> Classification:
        usage = body.get("usage") or {}
        common = dict(prompt_tokens=int(usage.get("prompt_tokens") or 0), num_cached_tokens=_cached(usage))
        if readout.method == FIRST_TOKEN:
            # Each label's counted spellings summed, as the offline engines read them; a token
            # the step did not report had no probability left after the restriction.
            probs = normalise(label_logprobs(read_spellings(readout), self._top(body)))
            raw = format_top(probs) if probs else _content(body)
            return Classification(probs=probs, label=argmax(probs, readout.labels), raw=raw,
                                  method=FIRST_TOKEN, **common)
        label = self._choice(body, readout, self.structured)
        probs = {lab: float(lab == label) for lab in readout.labels} if label else {}
        return Classification(probs=probs, label=label, raw=_content(body), method=STRUCTURED_CHOICE, **common)

    def close(self) -> None:
        self.endpoint.close()


def _copied(value):
    """A start-up result as one engine may change it (its caches), apart from every other's."""
    return dict(value) if isinstance(value, dict) else value


def _spelled(readout: LabelReadout) -> LabelReadout:
    """The readout with every counted first token per label (its lead spelling's alone where
    the readout lists no others)."""
    if readout.token_ids:
        return readout
    return dataclasses.replace(readout, token_ids=tuple((t,) for t in readout.first_token_ids))


def _content(body: dict) -> str:
    try:
        return body["choices"][0]["message"].get("content") or ""
    except (KeyError, IndexError, TypeError, AttributeError):
        return ""


def _cached(usage: dict) -> int | None:
    """Prompt tokens the server's prefix cache served, where it reports them (vLLM: with
    `--enable-prompt-tokens-details`)."""
    details = usage.get("prompt_tokens_details") or {}
    value = details.get("cached_tokens") if isinstance(details, dict) else None
    return int(value) if value is not None else None


