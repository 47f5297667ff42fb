"""Write docs/config.md, the reference of every config key, from the config models themselves.

    .venv/bin/python scripts/config_reference.py           # rewrite docs/config.md
    .venv/bin/python scripts/config_reference.py --check   # exit 1 if docs/config.md is stale

Types, defaults, bounds, descriptions and examples all come from gamut_local/config/ (each
field's `Field(description=..., examples=...)`), so the page cannot drift from what the loader
accepts; tests/test_config.py fails when the committed page differs from what this writes.
"""

from __future__ import annotations

import argparse
import json
import sys
import types
from pathlib import Path
from typing import Annotated, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from gamut_local import config as c

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "config.md"
EXAMPLE = ROOT / "configs" / "models" / "EXAMPLE.yaml"

# (heading, the model, where it is written, what it is), in the page's order.
SECTIONS = [
    ("Run", c.RunSpec, "`configs/runs/*.yaml`",
     "What `run`, `generate`, `judge`, `plan` and `slurm` read: the questions, the candidates, "
     "the judges and where results go."),
    ("Model", c.ModelSpec, "`configs/models/*.yaml`, or inline in `models:`",
     "One candidate model. A run names it by file name (`models: [qwen3-vl-8b]`)."),
    ("Judge", c.JudgeSpec, "`configs/judges/*.yaml`, or inline in `judges:`",
     "One judge: every key of a [model](#model), and these (`sampling` has its own default)."),
    ("engine", c.EngineArgs, "`engine:` of a model or judge",
     "Passed to the engine (vLLM or transformers); unset means the engine's default."),
    ("sampling", c.Sampling, "`sampling:` of a model or judge", "How outputs are sampled."),
    ("compile", c.CompileSpec, "`compile:` of a run",
     "How meta-rubrics become checks; the judge, `score-run`, `report`, the viewer and the plan all compile "
     "with these settings, and `manifest.json` records them."),
    ("server", c.ServerArgs, "`server:` of a model or judge with `backend: openai`",
     "An OpenAI-compatible endpoint serving the model (docs/engines.md)."),
    ("slurm", c.SlurmSpec, "`slurm:` of a run", "The SLURM jobs `gamut-local slurm` writes."),
    ("plan", c.PlanSpec, "`plan:` of a run",
     "The assumptions of `gamut-local plan`'s estimate; the plan prints them."),
    ("calibration", c.CalibrationSpec, "`calibration:` of a run",
     "Corrected scores in `gamut-local run` (docs/correction.md): after judging, the run draws this "
     "calibration sample and corrects every model judge's scores by the gold judges' verdicts on it."),
    ("Draft", c.DraftSpec, "`configs/authoring/draft-*.yaml` (`gamut-local draft --config`)",
     "Which model drafts meta-rubrics, and the bounds its output is held to."),
    ("Audit", c.AuditSpec, "`configs/authoring/audit-*.yaml` (`gamut-local audit --config`)",
     "Which model re-reads each cited snippet, and what happens to ungrounded items."),
]
_ANCHORS = {cls: heading.lower() for heading, cls, _, _ in SECTIONS}
_WORDS = {int: "integer", float: "number", str: "text", bool: "true/false", dict: "mapping"}
_BOUND_SIGNS = {"ge": "≥", "gt": ">", "le": "≤", "lt": "<"}


def _bounds(metadata) -> list[str]:
    """A field's constraints in words: `≥ 1`, `not empty`, or the form a pattern stands for."""
    out = []
    for m in metadata:
        for attr, sign in _BOUND_SIGNS.items():
            if getattr(m, attr, None) is not None:
                out.append(f"{sign} {getattr(m, attr)}")
        if getattr(m, "min_length", None):
            out.append("not empty" if m.min_length == 1 else f"at least {m.min_length} entries")
        if getattr(m, "pattern", None):
            out.append(c.VALUE_FORMS.get(m.pattern, f"matches `{m.pattern}`"))
    return out


def _type(t) -> str:
    """A field's type in the page's words; a nested config links to its section."""
    origin, args = get_origin(t), get_args(t)
    if origin is Annotated:
        inner = args[0]
        return " ".join([_type(inner), *_bounds(getattr(args[1], "metadata", []))])
    if origin in (Union, types.UnionType):
        return " or ".join(_type(a) for a in args if a is not type(None)) + " or unset"
    if origin is Literal:
        return " \\| ".join(f"`{a}`" for a in args)
    if origin is list:
        return f"list of {_type(args[0])}"
    if origin is dict:
        return f"mapping of {_type(args[0])} to {_type(args[1])}"
    if isinstance(t, type) and issubclass(t, BaseModel):
        return f"[{_ANCHORS[t]}](#{_ANCHORS[t]})"
    return _WORDS.get(t, getattr(t, "__name__", str(t)))


def _value(v) -> str:
    """A value as it is written in YAML, on one line."""
    if isinstance(v, BaseModel):  # a nested config: what differs from its own defaults
        changed = v.model_dump(exclude_defaults=True)
        return "see its section" if not changed else f"`{json.dumps(changed)}`, else see its section"
    return "`" + json.dumps(v, ensure_ascii=False) + "`"


def _row(name: str, field) -> str:
    default = "required" if field.default is PydanticUndefined else _value(field.default)
    if field.default is None:
        default = "unset"
    if field.examples:
        example = field.examples[0]
    elif field.default is PydanticUndefined or field.default is None:
        raise SystemExit(f"{name}: give it examples=[...] in gamut_local/config/ (no default to show)")
    else:
        example = field.default
    shown = "see its section" if isinstance(example, BaseModel) else f"`{name}: {json.dumps(example)}`"
    cells = [f"`{name}`", _type(field.annotation), default, ", ".join(_bounds(field.metadata)) or "",
             field.description, shown]
    if not field.description:
        raise SystemExit(f"{name}: give it a description in gamut_local/config/")
    return "| " + " | ".join(x.replace("\n", " ") for x in cells) + " |"


def _section(heading: str, cls, where: str, what: str) -> list[str]:
    lines = [f"## {heading}", "", f"Written in {where}. {what}", "",
             "| key | type | default | allowed | what it does | example |",
             "|---|---|---|---|---|---|"]
    return lines + [_row(n, f) for n, f in _own_fields(cls).items()] + [""]


def _own_fields(cls) -> dict:
    """The fields a config adds to, or changes the default or meaning (description) of, the
    config it extends (a judge's over a model's); all of them for one that extends none."""
    base = next((b for b in cls.__mro__[1:] if b in _ANCHORS), None)
    if base is None:
        return dict(cls.model_fields)
    return {n: f for n, f in cls.model_fields.items()
            if n not in base.model_fields or f.default != base.model_fields[n].default
            or f.description != base.model_fields[n].description}


def render() -> str:
    """The whole page."""
    head = [
        "# Config reference",
        "",
        "<!-- Written by scripts/config_reference.py from gamut_local/config/; do not edit. -->",
        "",
        "Every key of every config `gamut-local` reads. A run YAML names its models and judges",
        "by file name (`configs/models/<name>.yaml`, `configs/judges/<name>.yaml`, found in the",
        "`configs/` folder above the run file, then the current directory's, then this project's)",
        "or writes them inline. Paths are relative to the file that holds them, and `${VAR}` /",
        "`${VAR:-default}` are taken from the environment. A mistake is reported as",
        "`FILE:LINE: key: message`, in the file that holds the key, with the key it was likely",
        "meant to be (``did you mean `variants`?``).",
        "",
        "Numbers in *allowed* are inclusive where written ≥ / ≤. *Unset* means the key is left out",
        "(or `null`).",
        "",
    ]
    body = [line for section in SECTIONS for line in _section(*section)]
    example = ["## An example model config", "",
               "`configs/models/EXAMPLE.yaml`, to copy for your own model:", "", "```yaml",
               EXAMPLE.read_text(encoding="utf-8").rstrip("\n"), "```", ""]
    return "\n".join(head + body + example)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if docs/config.md is not up to date")
    args = ap.parse_args()
    text = render()
    if args.check:
        if not PAGE.is_file() or PAGE.read_text(encoding="utf-8") != text:
            sys.exit(f"{PAGE} is stale: run python scripts/config_reference.py")
        return
    PAGE.write_text(text, encoding="utf-8")
    print(PAGE)


if __name__ == "__main__":
    main()
