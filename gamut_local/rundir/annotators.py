"""A run's team of annotators: who may sign in to `gamut-local view RUN --team`, and with what.

`RUN/team/annotators.json` holds one account per annotator: the name (an annotator name,
`rundir.human.check_annotator`), the sha256 of the sign-in token, and when it was created and
revoked. The token itself is printed once by `annotators add` and stored nowhere. A plain
sha256 is enough here, unlike for a password: the token is 32 random bytes from `secrets`
(256 bits), so there is nothing to guess from a dictionary and no faster attack on its hash
than trying 2**256 tokens; a slow KDF would only slow each sign-in down. The file also holds
`team_id`, random, made with the first account: the identity of this run's team, which a
viewer's sessions are bound to (a cookie of another run's team is worth nothing here).

The file is read and rewritten whole (`store.atomic_file`) under its task lock
(`task_lock.hold`, and a thread lock: a task lock does not order one process's threads),
so two `annotators add` at once never lose an account. `verify` compares
hashes in constant time (`hmac.compare_digest`). A name revoked can be added again: a new
account with a new token; the old token stays refused.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from gamut_local.errors import InputError, Problem
from gamut_local.rundir import task_lock
from gamut_local.rundir.human import check_annotator
from gamut_local.rundir.store import atomic_file, parse_json_text

TOKEN_BYTES = 32


@dataclass(frozen=True)
class Account:
    name: str
    token_sha256: str
    created: str
    revoked: str | None = None

    @property
    def active(self) -> bool:
        return self.revoked is None


@dataclass(frozen=True)
class Team:
    team_id: str | None
    accounts: tuple[Account, ...]

    def active(self) -> dict[str, Account]:
        return {a.name: a for a in self.accounts if a.active}


def team_path(run_dir: Path) -> Path:
    return Path(run_dir) / "team" / "annotators.json"


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _bad(path: Path, field: str, why: str) -> InputError:
    return InputError([Problem(str(path), None, field, why)])


def _account(path: Path, k: int, d) -> Account:
    where = f"annotators[{k}]"
    if not isinstance(d, dict) or set(d) != {"name", "token_sha256", "created", "revoked"}:
        raise _bad(path, where, "expected an object with name, token_sha256, created, revoked")
    check_annotator(d["name"], f"{path}: {where}.name")
    h = d["token_sha256"]
    if not (isinstance(h, str) and len(h) == 64 and all(c in "0123456789abcdef" for c in h)):
        raise _bad(path, f"{where}.token_sha256", "expected 64 lower-case hex digits")
    for key in ("created", "revoked"):
        if not (isinstance(d[key], str) or (key == "revoked" and d[key] is None)):
            raise _bad(path, f"{where}.{key}", "expected a time (ISO 8601)" + (" or null" if key == "revoked" else ""))
    return Account(d["name"], h, d["created"], d["revoked"])


def read_team(run_dir: Path) -> Team:
    """The run's accounts (none without the file); a damaged file is an InputError naming it."""
    path = team_path(run_dir)
    if not path.is_file():
        return Team(None, ())
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise _bad(path, "", f"cannot be read: {e}") from None
    data, problem = parse_json_text(text)
    if problem or not isinstance(data, dict) or set(data) != {"team_id", "annotators"} \
            or not isinstance(data["annotators"], list) or not isinstance(data["team_id"], str):
        raise _bad(path, "", problem or "expected {\"team_id\": ..., \"annotators\": [...]}")
    accounts = tuple(_account(path, k, d) for k, d in enumerate(data["annotators"]))
    names = [a.name for a in accounts if a.active]
    if len(names) != len(set(names)):
        raise _bad(path, "annotators", "a name is active twice")
    return Team(data["team_id"], accounts)


def _write(run_dir: Path, team: Team) -> None:
    body = {"team_id": team.team_id, "annotators": [
        {"name": a.name, "token_sha256": a.token_sha256, "created": a.created, "revoked": a.revoked}
        for a in team.accounts]}
    with atomic_file(team_path(run_dir)) as f:
        f.write((json.dumps(body, indent=1) + "\n").encode())


# A task lock is re-entrant within a process, so it does not order this process's own
# threads: they take turns here first.
_THREADS = threading.Lock()


@contextmanager
def _locked(run_dir: Path):
    path = team_path(run_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _THREADS, task_lock.hold([path], wait=task_lock.WAIT):
        yield


def add(run_dir: Path, name: str) -> str:
    """A new account; returns its token (printed once, never stored). Refuses an active name."""
    check_annotator(name, "NAME")
    with _locked(run_dir):
        team = read_team(run_dir)
        if name in team.active():
            raise InputError([Problem(str(team_path(run_dir)), None, "NAME", f"{name!r} already has an active "
                                      "account: revoke it first (`gamut-local annotators revoke`) for a new token")])
        token = secrets.token_urlsafe(TOKEN_BYTES)
        _write(run_dir, Team(team.team_id or secrets.token_hex(16),
                             team.accounts + (Account(name, token_hash(token), _now()),)))
    return token


def revoke(run_dir: Path, name: str) -> Account:
    """Revoke the active account of `name` (its token and every session made with it)."""
    check_annotator(name, "NAME")
    with _locked(run_dir):
        team = read_team(run_dir)
        if name not in team.active():
            raise InputError([Problem(str(team_path(run_dir)), None, "NAME", f"no active account {name!r} "
                                      f"(active: {', '.join(sorted(team.active())) or 'none'})")])
        now = _now()
        accounts = tuple(Account(a.name, a.token_sha256, a.created, now) if a.active and a.name == name else a
                         for a in team.accounts)
        _write(run_dir, Team(team.team_id, accounts))
    return next(a for a in accounts if a.name == name and a.revoked == now)


def list_accounts(run_dir: Path) -> list[Account]:
    return list(read_team(run_dir).accounts)


def verify_in(team: Team, token: str) -> Account | None:
    """The active account whose token this is; every account is compared, in constant time."""
    if not isinstance(token, str) or not token or len(token) > 256:
        return None
    digest, found = token_hash(token), None
    for a in team.accounts:
        if hmac.compare_digest(digest, a.token_sha256) and a.active:
            found = a
    return found


def verify(run_dir: Path, token: str) -> str | None:
    """The name of the active account this token signs in, or None."""
    found = verify_in(read_team(run_dir), token)
    return None if found is None else found.name
