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


def pydantic_problems(exc, file: str, line: int | None, prefix: str = "") -> list[Problem]:
    """Turn a pydantic ValidationError into Problems with dotted field paths."""
    out = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"] if not str(p).startswith("function-"))
        field = ".".join(x for x in (prefix, loc) if x)
        out.append(Problem(file, line, field, err["msg"]))
    return out
