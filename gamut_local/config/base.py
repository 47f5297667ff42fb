"""What every config model shares: unknown keys refused, and (for one read from a file) the
file and line of each key, so a problem found later still points at where it is written."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from gamut_local.errors import Problem
from gamut_local.strict_yaml import Lines
from gamut_local.vocab import NAME_PATTERN


def name_field(description: str, example: str):
    """A name that becomes part of file names: safe characters only."""
    return Field(min_length=1, pattern=f"^{NAME_PATTERN}$", examples=[example], description=description)


class ConfigModel(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LocatedConfig(ConfigModel):
    """A config read from a YAML file: it remembers the file and the line of each of its keys,
    so a problem found later (a model folder that is not there) still points at the line."""

    _source: str | None = PrivateAttr(default=None)
    _lines: Lines = PrivateAttr(default_factory=dict)
    _prefix: str = PrivateAttr(default="")  # where an inline spec sits in its file: "judges.0"

    @property
    def source(self) -> str:
        """The YAML file this spec came from, for messages that name it."""
        return self._source or "<config>"

    def line_of(self, *key) -> int | None:
        """The line of `key` (a path of keys) in the spec's file; None when not written there."""
        return self._lines.get(tuple(key))

    def problem(self, field: str, message: str) -> Problem:
        """A Problem at `field` (dotted) of this spec, with its file and line."""
        parts = tuple(int(x) if x.isdigit() else x for x in field.split(".")) if field else ()
        shown = ".".join(x for x in (self._prefix, field) if x)
        return Problem(self.source, self.line_of(*parts), shown, message)
