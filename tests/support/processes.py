"""Child processes in tests: each in a session of its own, its output in a log file, and the
whole session killed on every way out, so nothing a test starts (a `gamut-local` command, the
engines it loads) outlives the test. A wait that runs out says what it waited for and ends
with the last lines of the child's log, not a bare `TimeoutExpired`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

TAIL_LINES = 40


def log_tail(log: Path, lines: int = TAIL_LINES) -> str:
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return f"(no log at {log})"
    return "\n".join(text.splitlines()[-lines:]) or "(log empty)"


def session_members(sid: int) -> list[int]:
    """Pids of the live processes in session `sid` (zombies excluded)."""
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != b"Z" and int(fields[3]) == sid:
            pids.append(int(name))
    return pids


def kill_session(sid: int) -> None:
    """SIGKILL every process of the session, also those that left its process group."""
    for pid in session_members(sid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@contextmanager
def child(cmd: list[str], log: Path, stdout: Path | None = None, **popen) -> Iterator[subprocess.Popen]:
    """`cmd` running in a new session with stdout and stderr in `log` (stdout in its own file
    where `stdout` is given); on leaving, however the test leaves, its whole session is killed
    and reaped."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as err, open(stdout or os.devnull, "ab") as out:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out if stdout else err,
                                stderr=err, start_new_session=True, **popen)
    try:
        yield proc
    finally:
        kill_session(proc.pid)
        proc.wait()


def wait_until(ready: Callable[[], bool], *, timeout: float, waiting_for: str, log: Path,
               proc: subprocess.Popen | None = None, poll: float = 0.2) -> None:
    """Poll `ready()` until true; fail, naming what was awaited with the log's tail, when
    `timeout` passes or `proc` exits first."""
    deadline = time.monotonic() + timeout
    while not ready():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the process exited ({proc.returncode}) while waiting for {waiting_for}; "
                                 f"last lines of {log}:\n{log_tail(log)}")
        if time.monotonic() > deadline:
            raise AssertionError(f"no {waiting_for} within {timeout:.0f} s; last lines of {log}:\n{log_tail(log)}")
        time.sleep(poll)


def run(cmd: list[str], *, timeout: float, waiting_for: str, input: str | None = None,
        **popen) -> subprocess.CompletedProcess:
    """`subprocess.run(cmd, capture_output=True, text=True)` in a session of its own: whatever
    it started is killed with it when it ends, overruns `timeout` (the failure says what it was
    `waiting_for`, with the tail of its output) or the test is interrupted."""
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, **popen)
    try:
        out, err = proc.communicate(input, timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_session(proc.pid)
        out, err = proc.communicate()
        tail = "\n".join((out + err).splitlines()[-TAIL_LINES:]) or "(no output)"
        raise AssertionError(f"no {waiting_for} within {timeout:.0f} s: `{' '.join(map(str, cmd))}`; "
                             f"last lines of its output:\n{tail}") from None
    finally:
        kill_session(proc.pid)  # what it left running in the background, on every way out
        if proc.poll() is None:
            proc.wait()
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def gone_within(sid: int, seconds: float) -> list[int]:
    """Wait up to `seconds` for session `sid` to empty; the pids still in it then."""
    deadline = time.monotonic() + seconds
    while (left := session_members(sid)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left
