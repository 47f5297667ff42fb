"""A run's team of annotators: who may sign in to `gamut-local view RUN --team`, and with what.

`RUN/team/annotators.json` holds one account per annotator: the name (an annotator name,
`rundir.human.check_annotator`), the sha256 of its sign-in link's token while the link is
unused, the sha256 of each session the link (or a later one) began, and when the account was
created and revoked. A link signs in once: `sign_in` turns its token into a session (a new
random id, sent to the browser as a cookie) and forgets the token, so a link forwarded,
logged or left in a browser's history after use signs no one in; `annotators link` gives the
person a new one (another browser, a lost cookie). Sessions are kept here, hashed, not in a
viewer's memory, so restarting the viewer signs no one out; revoking the account ends them all.
Tokens and session ids are never stored. A plain sha256 is enough, unlike for a password:
both are 32 random bytes from `secrets` (256 bits), so there is nothing to guess from a
dictionary and no faster attack on a hash than trying 2**256 values; a slow KDF would only slow
each request down. The file also holds `team_id`, random, made with the first account: the
identity of this run's team (a cookie of another run's team is worth nothing here).

The file is read and rewritten whole (`store.atomic_file`) under its task lock
(`task_lock.hold`, and a thread lock: a task lock does not order one process's threads),
so two writers at once never lose an account or a session. Hashes are compared in constant
time (`hmac.compare_digest`). A name revoked can be added again: a new account with a new
token; the old token and sessions stay refused.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import threading
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

from gamut_local.errors import InputError, Problem
from gamut_local.rundir import task_lock
from gamut_local.rundir.human import check_annotator
from gamut_local.rundir.store import atomic_file, parse_json_text

TOKEN_BYTES = 32
SESSIONS_KEPT = 16  # per account: the oldest session ends when a 17th begins
FIELDS = {"name", "token_sha256", "sessions", "created", "revoked"}


@dataclass(frozen=True)
class Account:
    name: str
    token_sha256: str | None  # None: its last link was used (or the account revoked)
    created: str
    revoked: str | None = None
    sessions: tuple[str, ...] = ()  # sha256 of each session id, oldest first

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


def _is_hash(h) -> bool:
    return isinstance(h, str) and len(h) == 64 and all(c in "0123456789abcdef" for c in h)


def _account(path: Path, k: int, d) -> Account:
    where = f"annotators[{k}]"
    if not isinstance(d, dict) or set(d) != FIELDS:
        raise _bad(path, where, "expected an object with " + ", ".join(sorted(FIELDS)))
    check_annotator(d["name"], f"{path}: {where}.name")
    if not (d["token_sha256"] is None or _is_hash(d["token_sha256"])):
        raise _bad(path, f"{where}.token_sha256", "expected 64 lower-case hex digits or null")
    if not (isinstance(d["sessions"], list) and all(map(_is_hash, d["sessions"]))):
        raise _bad(path, f"{where}.sessions", "expected a list of 64 lower-case hex digits each")
    for key in ("created", "revoked"):
        if not (isinstance(d[key], str) or (key == "revoked" and d[key] is None)):
            raise _bad(path, f"{where}.{key}", "expected a time (ISO 8601)" + (" or null" if key == "revoked" else ""))
    return Account(d["name"], d["token_sha256"], d["created"], d["revoked"], tuple(d["sessions"]))


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
        {"name": a.name, "token_sha256": a.token_sha256, "sessions": list(a.sessions), "created": a.created,
         "revoked": a.revoked} for a in team.accounts]}
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
        team = _with_active(run_dir, name)
        now = _now()
        team = _replace(team, name, token_sha256=None, sessions=(), revoked=now)
        _write(run_dir, team)
    return next(a for a in team.accounts if a.name == name and a.revoked == now)


def link(run_dir: Path, name: str) -> str:
    """A new sign-in link's token for the active account of `name` (another browser, a lost
    cookie); an unused earlier link stops working, the sessions already begun go on."""
    check_annotator(name, "NAME")
    with _locked(run_dir):
        team = _with_active(run_dir, name, ": add it")
        token = secrets.token_urlsafe(TOKEN_BYTES)
        _write(run_dir, _replace(team, name, token_sha256=token_hash(token)))
    return token


def _with_active(run_dir: Path, name: str, hint: str = "") -> Team:
    """The team, read under its lock, which must hold an active account of `name`."""
    team = read_team(run_dir)
    if name not in team.active():
        raise InputError([Problem(str(team_path(run_dir)), None, "NAME", f"no active account {name!r} "
                                  f"(active: {', '.join(sorted(team.active())) or 'none'}){hint}")])
    return team


def _replace(team: Team, name: str, **fields) -> Team:
    """The team with the active account of `name` changed in `fields`."""
    return Team(team.team_id, tuple(replace(a, **fields) if a.active and a.name == name else a
                                    for a in team.accounts))


def sign_in(run_dir: Path, token: str) -> tuple[str, str] | None:
    """(annotator, session id) for an unused link's token, which is used up; else None."""
    if verify_in(read_team(run_dir), token) is None:  # most refusals take no lock
        return None
    with _locked(run_dir):
        team = read_team(run_dir)
        account = verify_in(team, token)
        if account is None:  # used or revoked meanwhile
            return None
        sid = secrets.token_urlsafe(TOKEN_BYTES)
        sessions = (*account.sessions, token_hash(sid))[-SESSIONS_KEPT:]
        _write(run_dir, _replace(team, account.name, token_sha256=None, sessions=sessions))
    return account.name, sid


def session_in(team: Team, sid: str) -> Account | None:
    """The active account this session id belongs to; every session is compared, in constant time."""
    if not isinstance(sid, str) or not sid or len(sid) > 256:
        return None
    digest, found = token_hash(sid), None
    for a in team.accounts:
        for h in a.sessions:
            if hmac.compare_digest(digest, h) and a.active:
                found = a
    return found


def list_accounts(run_dir: Path) -> list[Account]:
    return list(read_team(run_dir).accounts)


def verify_in(team: Team, token: str) -> Account | None:
    """The active account whose token this is; every account is compared, in constant time."""
    if not isinstance(token, str) or not token or len(token) > 256:
        return None
    digest, found = token_hash(token), None
    for a in team.accounts:
        if a.token_sha256 is not None and hmac.compare_digest(digest, a.token_sha256) and a.active:
            found = a
    return found


def verify(run_dir: Path, token: str) -> str | None:
    """The name of the active account whose unused link this token is, or None."""
    found = verify_in(read_team(run_dir), token)
    return None if found is None else found.name
