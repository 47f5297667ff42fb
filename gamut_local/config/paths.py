"""Names and paths in configs: `${VAR}` expansion, paths relative to the file that holds
them, hub ids, and the `configs/` folders a model or judge name is looked up in."""

from __future__ import annotations

import os
import re
from pathlib import Path

from gamut_local.errors import Problem

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")

_HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*")
# The project checkout this package lives in (gamut_local/config/ is two folders below it).
PROJECT_ROOT = Path(__file__).resolve().parent.parent.parent


def config_roots(run_path: Path) -> list[Path]:
    """Candidate `configs/` folders, nearest first, without repeats."""
    roots = []
    for d in (run_path.resolve().parent, *run_path.resolve().parents):
        if d.name == "configs":
            roots.append(d)
        elif (d / "configs").is_dir():
            roots.append(d / "configs")
    roots += [Path.cwd() / "configs", PROJECT_ROOT / "configs"]
    seen, out = set(), []
    for r in roots:
        if r.is_dir() and r.resolve() not in seen:
            seen.add(r.resolve())
            out.append(r)
    return out


def expand_vars(value: str, file: Path, field: str, problems: list[Problem], line: int | None = None) -> str:
    """`${VAR}` / `${VAR:-default}` from the environment; an unset VAR without default is a problem."""

    def sub(m: re.Match) -> str:
        name, default = m.group(1), m.group(2)
        if name in os.environ and os.environ[name] != "":
            return os.environ[name]
        if default is not None:
            return default
        problems.append(Problem(str(file), line, field,
                                f"environment variable {name} is not set (write ${{{name}:-default}} for a fallback)"))
        return m.group(0)

    return _VAR.sub(sub, value)


def server_host(base_url: str) -> str:
    """`host[:port]` of an endpoint URL: its identity in settings hashes (not the path or scheme,
    which a proxy may change; never userinfo, which may hold a secret)."""
    from urllib.parse import urlsplit

    parts = urlsplit(base_url)
    return parts.hostname + (f":{parts.port}" if parts.port else "") if parts.hostname else base_url


def is_hub_id(path: str) -> bool:
    return bool(_HUB_ID.fullmatch(path)) and not path.startswith(".")


def relative_path(p: str, base: Path) -> str:
    """Paths in configs are relative to the config file; hub ids, absolute and pkg: paths stay."""
    p = os.path.expanduser(p)
    if p.startswith(("/", "pkg:")):
        return p
    return str((base / p).resolve())


def model_path(p: str, base: Path) -> str:
    if p.startswith(("/", "~")) or not is_hub_id(p) or (base / p).exists():
        return relative_path(p, base)
    return p  # a hub id like Qwen/Qwen3-VL-8B-Instruct
