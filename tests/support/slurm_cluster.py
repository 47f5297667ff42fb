"""The local one-node SLURM (scripts/slurm_local.sh) for the tests marked `slurm`: use the one
that is up, else start it where this process can (root, and the packages or apt-get there)."""

from __future__ import annotations

import fcntl
import os
import shutil
import string
import subprocess

from gamut_local.config import PROJECT_ROOT

SCRIPT = PROJECT_ROOT / "scripts" / "slurm_local.sh"
CONF_TEMPLATE = PROJECT_ROOT / "scripts" / "slurm.conf.template"  # the script renders it too


def render_slurm_conf(**params: str | int) -> str:
    """slurm.conf from the local cluster's template; a parameter left out is a KeyError."""
    return string.Template(CONF_TEMPLATE.read_text()).substitute({k: str(v) for k, v in params.items()})


def node_idle() -> bool:
    if shutil.which("sinfo") is None:
        return False
    res = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, timeout=30)
    return res.returncode == 0 and any(s in res.stdout for s in ("idle", "mix", "alloc"))


def _why_not_startable() -> str | None:
    if os.geteuid() != 0:
        return "no local SLURM running and not root, so none can be started (sudo bash scripts/slurm_local.sh start)"
    if not os.path.exists("/usr/sbin/slurmctld") and not shutil.which("apt-get"):
        return "no local SLURM running, its packages are not installed and there is no apt-get to install them"
    return None


def ensure_local_slurm() -> tuple[bool, str | None]:
    """(started here, why there is no cluster): (False, None) when one was up already."""
    if node_idle():
        return False, None
    reason = _why_not_startable()
    if reason:
        return False, reason
    with open("/tmp/gamut-slurm-local.lock", "w") as lock:  # two xdist workers: one starts it
        fcntl.flock(lock, fcntl.LOCK_EX)
        if node_idle():
            return False, None
        # 300 s: the first start installs four Debian packages (~30 s) before ~2 s of start.
        res = subprocess.run(["bash", str(SCRIPT), "start"], capture_output=True, text=True, timeout=300)
    if res.returncode != 0:
        return False, f"scripts/slurm_local.sh start failed: {(res.stderr or res.stdout).strip()[-800:]}"
    return True, None


def stop_local_slurm() -> None:
    subprocess.run(["bash", str(SCRIPT), "stop"], capture_output=True, text=True, timeout=120)


def on_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def skip_or_fail(what: str, reason: str) -> None:
    """Skip a test that needs `what` where it cannot be had; on CI fail it instead, so CI can
    never pass by skipping."""
    import pytest

    if on_ci():
        pytest.fail(f"CI needs {what}: {reason}")
    pytest.skip(reason)
