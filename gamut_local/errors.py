"""User-facing input errors: one line per problem, `FILE:LINE: field.path: message`.

Everything that reads user input raises `InputError` with every problem it found; the CLI
prints them and exits 1. No traceback ever reaches the user for bad input.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Secrets seen at run time (an API key read from the environment): `redact` hides them in any text.
_SECRETS: set[str] = set()
# A URL's credentials: everything between `scheme://` and `@` (user, password or a bare token).
_USERINFO = re.compile(r"(?<=://)[^/\s@?#]+@")
# Query parameters whose value is a credential by its name (`?key=`, `&api-key=`, `sig=`, ...).
_SECRET_PARAM = re.compile(
    r"(?i)([?&;](?:[\w.-]*[_.-])?(?:key|apikey|token|sig|signature|secret|password|passwd|pwd|auth|"
    r"authorization|credentials?|code)=)[^&#\s'\"]*")
REDACTED = "***"


def register_secret(value: str | None) -> None:
    """Remember a secret (an API key read from the environment) so `redact` hides it everywhere."""
    if value and len(value) >= 4:  # a 1-3 character "key" would blank out ordinary words
        _SECRETS.add(value)


def redact(text: str) -> str:
    """`text` with every secret hidden: keys registered at run time, a URL's `user:password@`
    and the values of query parameters that name a credential. The one place every message,
    manifest and log line that may show a URL or a config value goes through."""
    if not isinstance(text, str):
        return text
    for secret in sorted(_SECRETS, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    text = _USERINFO.sub(REDACTED + "@", text)
    return _SECRET_PARAM.sub(lambda m: m.group(1) + REDACTED, text)


def redact_values(value):
    """A JSON-like value with `redact` applied to every string in it (keys included)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact(k) if isinstance(k, str) else k: redact_values(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_values(v) for v in value]
    return value


@dataclass(frozen=True)
class Problem:
    file: str
    line: int | None  # 1-based line in a JSONL file; None for whole-file problems
    field: str  # dotted path, e.g. "meta_rubric.items.2.min_required"; "" for the record
    message: str

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        return redact(f"{where}: {self.field or '<record>'}: {self.message}")


class InputError(Exception):
    """Bad user input; carries every problem found, not just the first."""

    def __init__(self, problems: list[Problem]):
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))

    def __reduce__(self):  # pickled whole (from a forked worker): its args are the joined message
        return InputError, (self.problems,)


def pydantic_problems(exc, file: str, line: int | None, prefix: str = "") -> list[Problem]:
    """Turn a pydantic ValidationError into Problems with dotted field paths."""
    out = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"] if not str(p).startswith("function-"))
        field = ".".join(x for x in (prefix, loc) if x)
        out.append(Problem(file, line, field, err["msg"]))
    return out


def _shown(value) -> str:
    """A value as an error message quotes it: short, one line."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# What a value must be, per pydantic error type, in the words of the config reference.
_MUST_BE = {
    "int_type": "a whole number", "int_parsing": "a whole number", "int_from_float": "a whole number",
    "float_type": "a number", "float_parsing": "a number",
    "bool_type": "true or false", "bool_parsing": "true or false",
    "string_type": "text", "list_type": "a list", "dict_type": "a mapping (key: value)",
    "model_type": "a mapping (key: value)", "model_attributes_type": "a mapping (key: value)",
}
_BOUNDS = {"greater_than_equal": ("ge", "at least"), "greater_than": ("gt", "more than"),
           "less_than_equal": ("le", "at most"), "less_than": ("lt", "less than")}


def unknown_key_message(key, known: list[str]) -> str:
    """An unknown key, with the known key it is most likely a typo of (or the known keys)."""
    import difflib

    close = difflib.get_close_matches(str(key), known, n=1, cutoff=0.6)
    if close:
        return f"unknown key; did you mean `{close[0]}`?"
    return "unknown key" + (f" (known keys here: {', '.join(known)})" if known else "")


def plain_message(err: dict, forms: dict[str, str] | None = None) -> str:
    """One pydantic error in plain words: what the value must be, and what it was.

    `forms` names the regular expressions a config uses ("a SLURM time such as 12:00:00"),
    so a pattern mismatch says what to write rather than quoting the expression."""
    kind, ctx, got = err["type"], err.get("ctx") or {}, err.get("input")
    if kind == "missing":
        return "this required key is missing"
    if kind in _MUST_BE:
        return f"must be {_MUST_BE[kind]}, got {_shown(got)}"
    if kind in _BOUNDS:
        name, words = _BOUNDS[kind]
        return f"must be {words} {ctx[name]}, got {_shown(got)}"
    if kind == "too_short":
        n = ctx.get("min_length", 1)
        return f"needs at least {n} {'entry' if n == 1 else 'entries'}, got {ctx.get('actual_length', 0)}"
    if kind == "string_too_short":
        return "must not be empty"
    if kind == "literal_error":
        return f"must be {ctx.get('expected')}, got {_shown(got)}"
    if kind == "string_pattern_mismatch":
        form = (forms or {}).get(ctx.get("pattern"), f"text matching {ctx.get('pattern')}")
        return f"must be {form}, got {_shown(got)}"
    if kind == "value_error":
        return err["msg"].removeprefix("Value error, ")
    return err["msg"].replace("Input should be", "must be")
