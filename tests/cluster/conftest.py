"""`real_slurm`: the one-node SLURM of scripts/slurm_local.sh, for the tests marked `slurm`.

Uses the cluster when one is up (`.ci/run` starts it before the suite); otherwise starts it
when this process can (root, and the packages installed or apt-get there), and stops what it
started at the end of the session. Where it cannot, the test is skipped with the reason; on CI
(`CI=true`) a missing cluster fails the test instead, so CI can never pass by skipping them.
"""

from __future__ import annotations

import os

import pytest

from gamut_local.testing.slurm_cluster import ensure_local_slurm, on_ci, stop_local_slurm


@pytest.fixture(scope="session")
def real_slurm():
    started, reason = ensure_local_slurm()
    if reason:
        if on_ci():
            pytest.fail(f"CI needs the local SLURM cluster: {reason}")
        pytest.skip(reason)
    yield
    # Under xdist another worker may still use it: a cluster started there is left running.
    if started and not os.environ.get("PYTEST_XDIST_WORKER"):
        stop_local_slurm()
