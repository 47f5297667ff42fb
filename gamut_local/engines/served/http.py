"""A server's address, key and retries: the requests a served engine sends, re-sent after a
timeout, a dropped connection, 408, 429 or 5xx with exponential backoff and full jitter. The
API key comes only from the variable `api_key_env` names; it, a URL's credentials and
key-like query parameters are redacted (`errors.redact`) from every message written here."""

from __future__ import annotations

import logging
import os
import random
import time

from gamut_local.config import ModelSpec, server_host
from gamut_local.errors import InputError, redact, register_secret

# httpx logs every request's full URL at INFO, query string (which may hold a key) included:
# this package's own messages say what a person needs, redacted.
logging.getLogger("httpx").setLevel(logging.WARNING)

BACKOFF_BASE_S = 0.5  # first wait before a re-send; doubles each time, capped, fully jittered
BACKOFF_CAP_S = 30.0


class Failed(Exception):
    """A request that failed after every re-send (a timeout, 408, 429, 5xx, a dropped
    connection: transient, retried on rerun), or a start-up request the server answered with
    another status (e.g. 404: it has no /tokenize); `gone`: the server refused connections."""

    def __init__(self, reason: str, attempts: int, gone: bool):
        super().__init__(reason)
        self.reason, self.attempts, self.gone = reason, attempts, gone


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


def snippet(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "..."


def describe(conversation: list[dict]) -> str:
    """A request, named by the start of its last text part (for an error a person reads)."""
    for m in reversed(conversation):
        c = m.get("content")
        texts = [c] if isinstance(c, str) else [p.get("text", "") for p in c or () if p.get("type") == "text"]
        if any(texts):
            return repr(snippet(" ".join(texts), 80))
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
        endpoint (the run stops; a rerun starts again); another status: Failed, for the
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
                        raise Failed(f"not JSON: {snippet(r.text, 120)}", 1, False) from None
                if r.status_code not in (408, 429) and r.status_code < 500:
                    raise Failed(self.scrub(f"HTTP {r.status_code}: {snippet(r.text)}"), 1, False)
                reason, retry_after = f"HTTP {r.status_code}: {snippet(r.text, 120)}", r.headers.get("retry-after")
            if attempt < self.server.retries:
                time.sleep(backoff_s(attempt, retry_after))
        raise self.problem(f"{url} failed after {self.server.retries + 1} attempts ({reason}); nothing of this "
                           f"run was sent yet: rerun when the server answers")

    def identify(self) -> dict[str, str]:
        """Host, served model name and server version; the model must be one the server serves."""
        try:
            models = self.get_json("GET", self.base + "/models")
        except Failed as err:
            raise self.problem(f"{self.base}/models: {err.reason}") from None
        entries = {m.get("id"): m for m in models.get("data", []) if isinstance(m, dict)}
        if self.model not in entries:
            raise self.problem(f"the server does not serve {self.model!r} (it serves: "
                               f"{', '.join(map(str, entries))})", "path")
        try:
            version = str(self.get_json("GET", self.root + "/version").get("version", "unknown"))
        except Failed:
            version = "unknown"  # not every server reports one
        entry = entries[self.model]
        # A server the run's SLURM job starts lands on any node: its host is no identity
        # (its weights are, in the settings hash), so resubmissions resume.
        host = "served by the run's server job" if self.server.serve else server_host(self.base)
        return {"host": host, "model": self.model, "version": version,
                "owned_by": str(entry.get("owned_by", ""))}

    def close(self) -> None:
        self.client.close()
