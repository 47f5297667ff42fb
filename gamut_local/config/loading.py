"""Reading a config file: YAML read strictly, model and judge names resolved to their files,
paths made absolute, everything validated, and every error reported as `FILE:LINE: key:
message` in the file that holds the key (a run file, or the model config it names)."""

from __future__ import annotations

import re
import types
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError

from gamut_local.config.authoring import AuditSpec, DraftSpec
from gamut_local.config.base import LocatedConfig
from gamut_local.config.paths import config_roots, expand_vars, model_path, relative_path
from gamut_local.config.run import RunSpec
from gamut_local.config.slurm import SBATCH_WORD, SLURM_MEM, SLURM_TIME
from gamut_local.errors import InputError, Problem, plain_message, unknown_key_message
from gamut_local.strict_yaml import Lines, load_yaml_lines
from gamut_local.vocab import NAME_PATTERN


def _read_yaml(path: Path) -> tuple[dict, Lines]:
    try:
        if not path.is_file():
            why = "not a file" if path.exists() else "config file not found"
            raise InputError([Problem(str(path), None, "", why)])
        data, lines = load_yaml_lines(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise InputError([Problem(str(path), None, "", f"cannot read: {e.strerror or e}")]) from None
    except RecursionError:
        raise InputError([Problem(str(path), None, "", "not valid YAML: nested too deeply")]) from None
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        line = getattr(getattr(e, "problem_mark", None), "line", None)
        raise InputError([Problem(str(path), None if line is None else line + 1, "",
                                  f"not valid YAML: {e}")]) from None
    if not isinstance(data, dict):
        raise InputError([Problem(str(path), None, "", "expected a YAML mapping at the top level")])
    return data, lines


@dataclass(frozen=True)
class _Written:
    """Where the keys under `prefix` of a config are written: a file and its key lines (a run
    file holds everything but the model and judge configs it names by name)."""

    prefix: tuple
    file: Path
    lines: Lines


def _where(parts: list[_Written], loc: tuple) -> tuple[_Written, tuple, int | None]:
    """The file holding the key at `loc`, the key's path in that file, and its line (or the
    line of the nearest key above it that is written, e.g. for a key that is missing)."""
    part = max((p for p in parts if loc[:len(p.prefix)] == p.prefix), key=lambda p: len(p.prefix))
    rest = loc[len(part.prefix):]
    line = next((part.lines[rest[:n]] for n in range(len(rest), 0, -1) if rest[:n] in part.lines), None)
    return part, rest, line


def _unwrapped(t):
    """A field's type without Annotated and without None in a union."""
    while True:
        if get_origin(t) is Annotated:
            t = get_args(t)[0]
        elif get_origin(t) in (Union, types.UnionType):
            t = next(a for a in get_args(t) if a is not type(None))
        else:
            return t


def _keys_at(cls, loc: tuple) -> list[str]:
    """The keys a config accepts at `loc` (a path of keys and list indexes into `cls`)."""
    t = cls
    for part in loc:
        t = _unwrapped(t)
        if isinstance(t, type) and issubclass(t, BaseModel):
            t = t.model_fields[part].annotation if part in t.model_fields else None
        elif get_origin(t) in (list, dict):
            t = get_args(t)[-1]
        else:
            return []
    t = _unwrapped(t)
    return list(t.model_fields) if isinstance(t, type) and issubclass(t, BaseModel) else []


# The regular expressions the configs check, in the words an error message uses.
VALUE_FORMS = {
    f"^{NAME_PATTERN}$": "a name of letters, digits and _ . + - (starting with a letter or digit)",
    f"^{SLURM_TIME}$": "a SLURM time such as 90 (minutes), 12:00:00 or 1-00:00:00",
    f"^{SLURM_MEM}$": "a memory size such as 64G (a number, then K, M, G or T)",
    SBATCH_WORD: "one word (letters, digits and _ . , : + = % -)",
}


def _config_problem(cls, err: dict, parts: list[_Written]) -> Problem:
    """One validation error of a `cls` config as `FILE:LINE: key: message` in plain words."""
    loc = tuple(p for p in err["loc"] if not str(p).startswith("function-"))
    part, rest, line = _where(parts, loc)
    if err["type"] == "extra_forbidden":
        message = unknown_key_message(loc[-1], _keys_at(cls, loc[:-1]))
    else:
        message = plain_message(err, VALUE_FORMS)
    return Problem(str(part.file), line, ".".join(map(str, rest)), message)


def _place(spec: LocatedConfig, parts: list[_Written], prefix: tuple) -> None:
    """Tell `spec` (the config at `prefix`) which file it came from and its keys' lines."""
    part, rest, _ = _where(parts, prefix)
    spec._source = str(part.file)
    spec._prefix = ".".join(map(str, rest))
    spec._lines = {k[len(rest):]: v for k, v in part.lines.items() if k[:len(rest)] == rest}


def _resolve_ref(ref, kind: str, run: _Written, key: tuple, problems: list[Problem]):
    """A model/judge given by name -> (its YAML as a dict, the file it came from, its lines);
    one written inline -> (the mapping, the run file, None)."""
    field, line = ".".join(map(str, key)), run.lines.get(key)
    if isinstance(ref, dict):
        return ref, run.file, None
    if not isinstance(ref, str):
        problems.append(Problem(str(run.file), line, field, "expected a name or a mapping"))
        return None
    if not re.fullmatch(NAME_PATTERN, ref):
        # A reference is a plain name under configs/<kind>/, never a path (`../../x`).
        problems.append(Problem(str(run.file), line, field, f"{ref!r} is not a config name (letters, digits, "
                                "_ . + -, starting with a letter or digit); write the settings inline instead"))
        return None
    roots = config_roots(run.file)
    for root in roots:
        candidate = root / kind / f"{ref}.yaml"
        if candidate.is_file():
            data, lines = _read_yaml(candidate)
            data.setdefault("name", ref)
            return data, candidate, lines
    where = ", ".join(str(r / kind) for r in roots) or "no configs/ folder found"
    problems.append(Problem(str(run.file), line, field,
                            f"no {kind} config named {ref!r} (looked in {where})"))
    return None


def _model_entry(ref, kind: str, run: _Written, key: tuple, problems: list[Problem],
                 parts: list[_Written]) -> dict | None:
    """One model or judge of a config, by name or inline, its path made absolute. A config
    file it names joins `parts`, so an error inside that file points into it."""
    got = _resolve_ref(ref, kind, run, key, problems)
    if got is None:
        return None
    data, src, lines = got
    if lines is None:  # inline: its keys are the run file's
        field, line = ".".join(map(str, (*key, "path"))), run.lines.get((*key, "path"))
    else:
        parts.append(_Written(key, src, lines))
        field, line = "path", lines.get(("path",))
    if isinstance(data.get("path"), str) and data.get("backend") != "openai":  # openai: a served name
        path = expand_vars(data["path"], src, field, problems, line)
        data = {**data, "path": model_path(path, src.parent)}
    server = data.get("server")
    if data.get("backend") == "openai" and isinstance(server, dict) and isinstance(server.get("serve"), str):
        # The weights a SLURM server job serves: a folder relative to this file, as `path` is.
        serve = expand_vars(server["serve"], src, field.rsplit("path", 1)[0] + "server.serve", problems, line)
        data = {**data, "server": {**server, "serve": model_path(serve, src.parent)}}
    return data


def _validated(cls, data: dict, parts: list[_Written]):
    """`data` as a `cls` config; every error names the file and line its key is written on."""
    try:
        spec = cls.model_validate(data)
    except ValidationError as e:
        found = [_config_problem(cls, err, parts) for err in e.errors()]
        raise InputError(sorted(found, key=lambda p: (p.file, p.line or 0))) from None
    _place(spec, parts, ())
    return spec


def load_run_config(path: str | Path) -> RunSpec:
    """Read a run YAML, resolve model/judge names and relative paths, validate everything."""
    path = Path(path)
    data, lines = _read_yaml(path)
    run = _Written((), path, lines)
    parts, problems = [run], []
    for kind in ("models", "judges"):
        if isinstance(data.get(kind), list):  # absent: the validator says it is missing
            data[kind] = [_model_entry(r, kind, run, (kind, i), problems, parts)
                          for i, r in enumerate(data[kind])]
    for key in ("dataset", "output_dir"):
        if isinstance(data.get(key), str):
            data[key] = relative_path(expand_vars(data[key], path, key, problems, lines.get((key,))), path.parent)
    for key in ("extra_answers", "extra_verdicts"):
        if isinstance(data.get(key), list):
            data[key] = [relative_path(expand_vars(p, path, f"{key}.{i}", problems, lines.get((key, i))),
                                   path.parent) if isinstance(p, str) else p for i, p in enumerate(data[key])]
    if problems:
        raise InputError(problems)
    spec = _validated(RunSpec, data, parts)
    for kind in ("models", "judges"):
        for i, m in enumerate(getattr(spec, kind)):
            _place(m, parts, (kind, i))
        names = [m.name for m in getattr(spec, kind)]
        for n in sorted(n for n, k in Counter(names).items() if k > 1):  # a set, not names.count: linear
            problems.append(spec.problem(kind, f"{n!r} is listed twice (names key the result files)"))
    if problems:
        raise InputError(problems)
    return spec


def load_authoring_config(path: str | Path, kind: type[DraftSpec] | type[AuditSpec]):
    """Read DRAFT.yaml / AUDIT.yaml: `model` by name (configs/models/<name>.yaml) or inline."""
    path = Path(path)
    data, lines = _read_yaml(path)
    run = _Written((), path, lines)
    parts, problems = [run], []
    if "model" in data:
        data = {**data, "model": _model_entry(data["model"], "models", run, ("model",), problems, parts)}
    if problems:
        raise InputError(problems)
    spec = _validated(kind, data, parts)
    _place(spec.model, parts, ("model",))
    return spec
