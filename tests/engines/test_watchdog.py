"""engines/watchdog.py with real processes and no model: a parent that starts a tree of
children (one ignores SIGTERM, one has a child of its own, as vLLM's EngineCore has its Worker)
is SIGKILLed alone; every process it started is gone within seconds, none before."""

from __future__ import annotations

import signal
import sys
import time

from gamut_local.engines import watchdog
from tests.support import processes

# A stand-in for a process that loads an engine: guard first, then start the engine's processes
# (a SIGTERM-ignoring child, a child with a grandchild), print their pids, and wait.
PARENT = """
import subprocess, sys, time
from gamut_local.engines.watchdog import guard_descendants
guard_descendants()
stubborn = subprocess.Popen([sys.executable, "-c",
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"])
core = subprocess.Popen([sys.executable, "-c",
    "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); time.sleep(600)"])
print(stubborn.pid, core.pid, flush=True)
time.sleep(600)
"""

GONE_S = 2 * (watchdog.TICK + watchdog.GRACE) + 5  # two ticks and the grace, room for a busy machine


def _tree(pid: int) -> dict[int, int]:
    """pid -> start time of every process below `pid`."""
    return watchdog.descendants({pid}, watchdog._all_processes())


def test_a_killed_process_takes_every_process_it_started_with_it(tmp_path):
    log, out = tmp_path / "parent.log", tmp_path / "parent.out"
    with processes.child([sys.executable, "-c", PARENT], log, stdout=out) as parent:
        # 60 s: four Python start-ups on a busy 2-core machine.
        processes.wait_until(lambda: out.exists() and out.read_text().strip() != "", timeout=60,
                             waiting_for="the parent to start its children", log=log, proc=parent)
        processes.wait_until(lambda: len(_tree(parent.pid)) >= 4, timeout=60,
                             waiting_for="watchdog, two children and a grandchild", log=log, proc=parent)
        time.sleep(2 * watchdog.TICK)  # the watchdog has noted the whole tree
        tree = _tree(parent.pid)
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        left = processes.gone_within(parent.pid, GONE_S)
        assert left == [], f"still running {GONE_S:.0f} s after the parent was killed: {left}"
        alive = [p for p, start in tree.items() if (st := watchdog._stat(p)) is not None and st[1] == start]
        assert alive == [], alive  # also any that had left the session


def test_the_watchdog_leaves_a_living_parent_alone(tmp_path):
    log, out = tmp_path / "parent.log", tmp_path / "parent.out"
    with processes.child([sys.executable, "-c", PARENT], log, stdout=out) as parent:
        processes.wait_until(lambda: len(_tree(parent.pid)) >= 4, timeout=60,
                             waiting_for="watchdog, two children and a grandchild", log=log, proc=parent)
        before = _tree(parent.pid)
        time.sleep(4 * watchdog.TICK)
        assert _tree(parent.pid) == before and parent.poll() is None


def test_descendants_follow_the_tree_and_nothing_else():
    table = {10: (1, 100), 11: (10, 110), 12: (11, 120), 13: (1, 130), 14: (13, 140)}
    assert watchdog.descendants({10}, table) == {11: 110, 12: 120}
    assert watchdog.descendants({12}, table) == {}
