"""User-facing input errors: one line per problem, `FILE:LINE: field.path: message`.

Everything that reads user input raises `InputError` with every problem it found; the CLI
prints them and exits 1. No traceback ever reaches the user for bad input.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    file: str
    line: int | None  # 1-based line in a JSONL file; None for whole-file problems
    field: str  # dotted path, e.g. "meta_rubric.items.2.min_required"; "" for the record
    message: str

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        return f"{where}: {self.field or '<record>'}: {self.message}"


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
