"""The one reader of request bodies for the viewer's write routes: as strict as the record
readers (rundir.store.parse_json_text: no repeated key, bounded nesting, no lone surrogate),
bounded in size, and held to an exact set of typed fields. Every refusal is a `BodyError`,
which the app answers with its status and a one-line JSON reason; nothing a client sends can
reach a handler half-read.
"""

from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import Request

from gamut_local.rundir.store import parse_json_text

MAX_BODY = 16 * 1024  # a verdict with a note of 2,000 characters (4 bytes each) fits many times


class BodyError(Exception):
    def __init__(self, status: int, reason: str):
        super().__init__(reason)
        self.status, self.reason = status, reason


@dataclass(frozen=True)
class Field:
    """A body field: a non-empty string (`required`), or a string or null that may be left out."""

    required: bool = True


async def _bytes(request: Request) -> bytes:
    """The body, read no further than MAX_BODY bytes (a client may lie in Content-Length)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY:
        raise BodyError(400, f"the body is larger than {MAX_BODY} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY:
            raise BodyError(400, f"the body is larger than {MAX_BODY} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _typed(body: dict, fields: dict[str, Field]) -> dict:
    unknown = sorted(k for k in body if k not in fields)
    if unknown:
        raise BodyError(400, f"unknown field(s): {', '.join(map(repr, unknown))}; "
                        f"expected {', '.join(fields)}")
    for name, spec in fields.items():
        value = body.get(name)
        if spec.required and (not isinstance(value, str) or not value):
            raise BodyError(400, f"{name}: required, a non-empty string")
        if not spec.required and value is not None and not isinstance(value, str):
            raise BodyError(400, f"{name}: a string or null, got {type(value).__name__}")
    return {name: body.get(name) for name in fields}


async def read_json_body(request: Request, fields: dict[str, Field]) -> dict:
    """The body as a dict with exactly `fields` (optional ones None when left out)."""
    if request.headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
        raise BodyError(415, "send the body as application/json")
    raw = await _bytes(request)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BodyError(400, f"the body is not UTF-8 (byte {e.start})") from None
    body, problem = parse_json_text(text)
    if problem:
        raise BodyError(400, f"the body is not strict JSON: {problem}")
    if not isinstance(body, dict):
        raise BodyError(400, f"expected a JSON object, got {type(body).__name__}")
    return _typed(body, fields)
