"""`real_slurm`: the one-node SLURM of scripts/slurm_local.sh, for the tests marked `slurm`.

Uses the cluster when one is up (`.ci/run` starts it before the suite); otherwise starts it
when this process can (root, and the packages installed or apt-get there), and stops what it
started at the end of the session. Where it cannot, the test is skipped with the reason; on CI
(`CI=true`) a missing cluster fails the test instead, so CI can never pass by skipping them.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess

import pytest

from gamut_local.config import PROJECT_ROOT

SCRIPT = PROJECT_ROOT / "scripts" / "slurm_local.sh"


def node_idle() -> bool:
    if shutil.which("sinfo") is None:
        return False
    res = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, timeout=30)
    return res.returncode == 0 and any(s in res.stdout for s in ("idle", "mix", "alloc"))


def _why_not_startable() -> str | None:
    if os.geteuid() != 0:
        return "no local SLURM running and not root, so none can be started (sudo bash scripts/slurm_local.sh start)"
    if not shutil.which("slurmctld") and not os.path.exists("/usr/sbin/slurmctld") and not shutil.which("apt-get"):
        return "no local SLURM running, its packages are not installed and there is no apt-get to install them"
    return None


@pytest.fixture(scope="session")
def real_slurm():
    started = False
    if not node_idle():
        reason = _why_not_startable()
        if reason is None:
            with open("/tmp/gamut-slurm-local.lock", "w") as lock:  # two xdist workers: one starts it
                fcntl.flock(lock, fcntl.LOCK_EX)
                if not node_idle():
                    # 300 s: the first start installs four Debian packages (~30 s) before ~2 s of start.
                    res = subprocess.run(["bash", str(SCRIPT), "start"], capture_output=True, text=True, timeout=300)
                    started = res.returncode == 0
                    if not started:
                        reason = f"scripts/slurm_local.sh start failed: {(res.stderr or res.stdout).strip()[-800:]}"
        if reason:
            if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
                pytest.fail(f"CI needs the local SLURM cluster: {reason}")
            pytest.skip(reason)
    yield
    # Under xdist another worker may still use it: a cluster started there is left running.
    if started and not os.environ.get("PYTEST_XDIST_WORKER"):
        subprocess.run(["bash", str(SCRIPT), "stop"], capture_output=True, text=True, timeout=120)
