"""One writer per task: a lock file beside what it guards, naming the process that holds it.

A task's output (a verdict store unit, a person's verdicts file) has one writer at a time.
Two `judge` processes of one task (a double submit; a requeued SLURM task beside its
predecessor) would each judge what is pending and write it: every key twice. So the writer
takes the task's lock first and holds it until it is done; a second writer is refused (or,
for a short write, waits its turn), with a message naming the holder.

The lock is the file `.<name>.lock` beside the path it guards, holding the holder's host,
pid, process start time, since when and its command line, as JSON. It is made whole before
it appears (written to a temporary file, then hard-linked to its name: `link` fails if the
name exists, atomically, on local and network file systems alike), and removed when the
holder is done, however it ends short of a kill.

A lock left by a kill is stale, and recognised where that can be known: its host is this one
and its pid no longer runs (or runs another process: the start time differs). It is removed,
with a note, and taken. A whole task's hold (the judge stage's: `heartbeat`) touches its lock
every HEARTBEAT seconds while it lives, so its lock on another host is stale once untouched for
STALE_AFTER: a SLURM task requeued onto another node after its node failed takes over without
a hand. Another host's lock without a heartbeat (a short write) is never presumed dead (its
node may be running it now): the message says how to remove it by hand once that job is gone.

Holding is per process and re-entrant: the judge stage holds its units for the whole task, and
the store's writers it calls (`verdict_store.write_part`, `compact`) find them held.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import sys
import tempfile
import threading
import time
from contextlib import ExitStack, contextmanager
from datetime import datetime, timezone
from pathlib import Path

from gamut_local.errors import InputError, Problem
from gamut_local.rundir.store import JOURNAL

WAIT = 30.0  # seconds a short writer (one part, one compaction) waits for another one's turn
HEARTBEAT = 60.0  # seconds between touches of a whole task's lock while its holder lives
STALE_AFTER = 10 * HEARTBEAT  # another host's beating lock untouched this long: its holder is gone
_POLL = 0.02
_HELD: dict[str, int] = {}  # lock file -> how many holds of this process are open
_BEATING: set[str] = set()  # held lock files whose holds asked for a heartbeat
_MUTEX = threading.Lock()
_BEAT: threading.Thread | None = None


class Held(InputError):
    """A refusal because another live process holds a task (not a damaged lock file): the
    caller may try again later."""

    def __reduce__(self):
        return Held, (self.problems,)


def _beat() -> None:
    """Touch every beating lock of this process, every HEARTBEAT seconds, for good (looking each
    second, so a changed HEARTBEAT takes effect within one)."""
    last = time.monotonic()
    while True:
        time.sleep(min(HEARTBEAT, 1.0))
        if time.monotonic() - last < HEARTBEAT:
            continue
        last = time.monotonic()
        with _MUTEX:
            locks = list(_BEATING)
        for lock in locks:
            try:
                os.utime(lock)
            except OSError:  # removed by hand meanwhile: its holder learns at release
                pass


def _start_heartbeat() -> None:
    global _BEAT
    with _MUTEX:
        if _BEAT is None or not _BEAT.is_alive():  # none yet, or a forked child's copy of none
            _BEAT = threading.Thread(target=_beat, name="gamut-local task lock heartbeat", daemon=True)
            _BEAT.start()


def lock_path(path: str | Path) -> Path:
    """The lock file of a task's output `path`: hidden, beside it; no reader lists it."""
    path = Path(path)
    return path.with_name(f".{path.name}.lock")


def _real(path: str | Path) -> Path:
    """One spelling per path (its folder's links followed), so a hold of this process is
    found however a caller spelled the path, and not refused as another holder's."""
    path = Path(path)
    return Path(os.path.realpath(path.parent)) / path.name


def _start_time(pid: int) -> int | None:
    """The process's start time (clock ticks since boot), which a reused pid does not share;
    None where /proc does not say."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def me(heartbeat: bool = False) -> dict:
    """What this process writes into a lock it takes (`heartbeat`: it touches the lock while it
    holds it)."""
    return {"host": socket.gethostname(), "pid": os.getpid(), "started": _start_time(os.getpid()),
            "since": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "command": " ".join(["gamut-local", *sys.argv[1:]])[:300], "heartbeat": heartbeat}


def describe(holder: dict) -> str:
    return (f"pid {holder['pid']} on host {holder['host']} since {holder.get('since') or '?'}"
            f" ({holder.get('command') or 'command unknown'})")


def read_holder(lock: Path) -> dict | None:
    """The lock's holder (None: no lock); an InputError naming the file for one this tool
    did not write (a lock is made whole before it appears, so no holder leaves half of one)."""
    try:
        text = lock.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as e:
        raise InputError([_damaged(lock, f"cannot be read ({e})")]) from None
    try:
        holder = json.loads(text)
    except ValueError:
        holder = None
    if isinstance(holder, dict) and isinstance(holder.get("host"), str) and _whole(holder.get("pid")):
        return holder
    raise InputError([_damaged(lock, "is not a lock this tool wrote (a JSON object with host and pid)")])


def _whole(pid) -> bool:
    return isinstance(pid, int) and not isinstance(pid, bool) and pid > 0


def _damaged(lock: Path, why: str) -> Problem:
    return Problem(str(lock), None, "lock", f"{why}; if no gamut-local process is writing this run, delete it "
                   "and run the command again")


def is_stale(holder: dict, lock: Path) -> bool:
    """Whether a lock's holder is known to be gone: on this host, its pid no longer runs, or
    runs a process started at another time (the pid was reused); on another, its heartbeat
    stopped STALE_AFTER seconds ago."""
    if holder["host"] != socket.gethostname():
        if not holder.get("heartbeat"):
            return False  # its node may be running it now
        try:
            return time.time() - lock.stat().st_mtime > STALE_AFTER
        except OSError:  # removed meanwhile: not ours to judge
            return False
    pid = holder["pid"]
    if pid == os.getpid() and holder.get("started") in (None, _start_time(pid)):
        return False  # this process: a hold of ours (`hold` counts those before looking)
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # OverflowError: no pid is that large
        return True
    except PermissionError:  # it runs, as another user
        return False
    started = holder.get("started")
    return isinstance(started, int) and started != _start_time(pid)


def held_by_other(lock: Path) -> dict | None:
    """The live holder of a lock other than this process (None: free, stale, or ours)."""
    lock = _real(lock)
    with _MUTEX:
        if _HELD.get(str(lock)):
            return None
    holder = read_holder(lock)
    return None if holder is None or is_stale(holder, lock) else holder


@contextmanager
def _guard(folder: Path):
    """Takers of locks in one folder on this host take turns while they look at a lock and
    remove a stale one (else two could both remove it, one of them the other's new lock).
    A `flock` on the folder; where the file system has none, they go on unguarded."""
    import fcntl

    fd = os.open(folder, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:
            pass
        yield
    finally:
        os.close(fd)


def _create(lock: Path, heartbeat: bool) -> bool:
    """Make the lock, whole, if there is none; whether this process made it."""
    fd, tmp = tempfile.mkstemp(dir=lock.parent, prefix=f"{lock.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(me(heartbeat), f)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, lock)
        except FileExistsError:
            return False
        except OSError as e:  # a file system without hard links: exclusive create, then the holder
            if e.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK):
                raise
            try:
                out = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                return False
            with os.fdopen(out, "w", encoding="utf-8") as f:
                f.write(Path(tmp).read_text(encoding="utf-8"))
        return True
    finally:
        Path(tmp).unlink(missing_ok=True)


def _try_take(lock: Path, heartbeat: bool) -> dict | None:
    """Take the lock now if it is free or stale; else its live holder."""
    with _guard(lock.parent):
        while not _create(lock, heartbeat):
            holder = read_holder(lock)
            if holder is None:  # released between the two looks: try again
                continue
            if not is_stale(holder, lock):
                return holder
            lock.unlink(missing_ok=True)
            gone = ("that process no longer runs on this host" if holder["host"] == socket.gethostname()
                    else f"its heartbeat stopped over {STALE_AFTER:.0f} s ago")
            JOURNAL.notices.append(f"{lock}: removed a stale lock of {describe(holder)}: {gone}")
        return None


def refusal(path: Path, lock: Path, holder: dict) -> Problem:
    """The message for a task another process holds: who, and what to do."""
    here = holder["host"] == socket.gethostname()
    gone = ("it runs on this host: wait for it to finish" if here else
            f"it is taken over once its heartbeat has stopped for {STALE_AFTER:.0f} s" if holder.get("heartbeat") else
            f"if that process is gone (its job cancelled, its node down), delete {lock} and run again")
    return Problem(str(path), None, "lock", f"another process is writing this task: {lock.name} is held "
                   f"by {describe(holder)}; {gone}. Two writers of one task would write its verdicts twice")


@contextmanager
def _one(path: Path, wait: float, heartbeat: bool):
    lock = lock_path(path)
    key = str(lock)
    with _MUTEX:
        mine = _HELD.get(key, 0)
        if mine:
            _HELD[key] = mine + 1
    if not mine:
        lock.parent.mkdir(parents=True, exist_ok=True)
        end = time.monotonic() + wait
        while (holder := _try_take(lock, heartbeat)) is not None:
            if time.monotonic() >= end:
                raise Held([refusal(path, lock, holder)])
            time.sleep(_POLL)
        with _MUTEX:
            _HELD[key] = 1
            if heartbeat:
                _BEATING.add(key)
        if heartbeat:
            _start_heartbeat()
    try:
        yield
    finally:
        with _MUTEX:
            _HELD[key] -= 1
            last = not _HELD[key]
            if last:
                del _HELD[key]
                _BEATING.discard(key)
        if last:
            _release(lock)


def _release(lock: Path) -> None:
    """Remove the lock if it is still this process's (not a lock someone removed by hand and
    another writer then took; not the parent's, in a forked child that ends here)."""
    try:
        holder = read_holder(lock)
    except InputError:
        return
    if holder is not None and holder["pid"] == os.getpid() and holder["host"] == socket.gethostname():
        lock.unlink(missing_ok=True)


@contextmanager
def hold(paths, *, wait: float = 0.0, beside=lambda path: (), heartbeat: bool = False):
    """Hold the locks of `paths` (sorted: two takers never wait on each other in a circle)
    for the block; refused with an InputError naming a holder after `wait` seconds. `beside(path)`
    gives other tasks' outputs that must not be written meanwhile (another shard layout of the
    same verdicts): a live lock of one refuses this hold too. Looked at after taking ours, so of
    two such takers at once at least one sees the other. `heartbeat`: a whole task's hold, its
    locks touched every HEARTBEAT seconds while held (another host takes over a lock left
    untouched for STALE_AFTER)."""
    with ExitStack() as stack:
        for path in sorted({_real(p) for p in paths}):
            stack.enter_context(_one(path, wait, heartbeat))
        mine = {_real(p) for p in paths}
        problems = [refusal(other, lock_path(other), holder)
                    for path in sorted(mine) for other in beside(path) if _real(other) not in mine
                    if (holder := held_by_other(lock_path(other))) is not None]
        if problems:
            raise Held(list(dict.fromkeys(problems)))
        yield
