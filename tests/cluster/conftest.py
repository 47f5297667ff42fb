"""The clusters the cluster tests run against.

`real_slurm`: the one-node SLURM of scripts/slurm_local.sh, for the tests marked `slurm`. Uses the cluster when one is up (`.ci/run` starts it before the suite); otherwise starts it
when this process can (root, and the packages installed or apt-get there), and stops what it
started at the end of the session. Where it cannot, the test is skipped with the reason; on CI
(`CI=true`) a missing cluster fails the test instead, so CI can never pass by skipping them.

`fake_site`: stand-ins for a login node's `sbatch` and `sinfo` and for the launcher the job
scripts run, for the tests of the job graph itself (test_slurm.py, test_slurm_served.py).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from tests.support.slurm_cluster import ensure_local_slurm, skip_or_fail, stop_local_slurm


@pytest.fixture(scope="session")
def real_slurm():
    started, reason = ensure_local_slurm()
    if reason:
        skip_or_fail("the local SLURM cluster", reason)
    yield
    # Under xdist another worker may still use it: a cluster started there is left running.
    if started and not os.environ.get("PYTEST_XDIST_WORKER"):
        stop_local_slurm()


# `python` in the server job: `-m vllm.entrypoints.cli.main serve ... --port N` becomes a
# server answering /health on that port (after a moment, as a loading model would); anything
# else is the real Python.
VLLM_SERVE_STAND_IN = f"""#!{sys.executable}
import os, sys
args = sys.argv[1:]
if args[:3] != ["-m", "vllm.entrypoints.cli.main", "serve"]:
    os.execv({sys.executable!r}, [{sys.executable!r}, *args])
with open(os.environ["FAKE_SERVE_LOG"], "w") as f:
    f.write(" ".join(args))
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
time.sleep(1)
class H(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()
    def log_message(self, *a):
        pass
HTTPServer(("127.0.0.1", int(args[args.index("--port") + 1])), H).serve_forever()
"""



@pytest.fixture
def vllm_serve_stand_in() -> str:
    """The text of a `python` that stands in for `vllm serve` (put it first on a job's PATH)."""
    return VLLM_SERVE_STAND_IN

# -- stand-ins for a SLURM login node's commands (the graph's tests; real SLURM is above) -------

FAKE_SBATCH = f"""#!{sys.executable}
import json, os, sys
log = os.environ["FAKE_SBATCH_LOG"]
calls = open(log).read().splitlines() if os.path.exists(log) else []
if os.environ.get("FAKE_SBATCH_FAIL_AT") == str(len(calls)):
    sys.stderr.write("sbatch: error: Batch job submission failed: Invalid account\\n")
    sys.exit(1)
script = sys.argv[-1]
with open(log, "a") as f:
    f.write(json.dumps({{"argv": sys.argv[1:], "script": open(script).read()}}) + "\\n")
print(f"{{5000 + len(calls)}};cluster-a")
"""

# `gamut-local` in the job scripts: records its arguments, folder, the environment the script
# gave it and where vLLM's modelinfos folder leads; exits with FAKE_LAUNCHER_RC.
FAKE_LAUNCHER = f"""#!{sys.executable}
import json, os, sys
with open(os.environ["FAKE_LAUNCHER_LOG"], "a") as f:
    f.write(json.dumps({{"argv": sys.argv[1:], "cwd": os.getcwd(), "env": {{k: os.environ.get(k) for k in (
        "HF_HUB_OFFLINE", "VLLM_WORKER_MULTIPROC_METHOD", "TMPDIR", "VLLM_CACHE_ROOT",
        "GAMUT_TEST_SETUP", "CUDA_VISIBLE_DEVICES", "GAMUT_SERVER_URL")}},
        "modelinfos": os.path.realpath(os.path.join(os.environ.get("VLLM_CACHE_ROOT") or ".", "modelinfos"))}}) + "\\n")
sys.exit(int(os.environ.get("FAKE_LAUNCHER_RC", "0")))
"""

ONE_QUESTION = {"question_id": "q1", "domain": "d", "question": "What is this?",
                "checks": [{"check_id": "c1", "text": "The response says it is a cat.", "tier": "answer_critical"}]}


class FakeSite:
    """In `root/bin`, first on PATH: `sbatch`, which records each call (arguments and script)
    in `root/sbatch.log` and prints ids as `sbatch --parsable` does (5000, 5001, ...), and
    `fake-gamut` (`launcher`), which records each call in `root/launcher.log`; `root/data.jsonl`
    holds one question. `partitions` adds `sinfo`; `add` any other stand-in."""

    def __init__(self, root: Path, monkeypatch):
        self.root, self.bin = root, root / "bin"
        self.bin.mkdir()
        self.add("sbatch", FAKE_SBATCH)
        self.launcher = self.add("fake-gamut", FAKE_LAUNCHER)
        monkeypatch.setenv("PATH", f"{self.bin}{os.pathsep}{os.environ['PATH']}")
        monkeypatch.setenv("FAKE_SBATCH_LOG", str(root / "sbatch.log"))
        monkeypatch.setenv("FAKE_LAUNCHER_LOG", str(root / "launcher.log"))
        (root / "data.jsonl").write_text(json.dumps(ONE_QUESTION) + "\n")

    def add(self, name: str, text: str) -> Path:
        path = self.bin / name
        path.write_text(text)
        path.chmod(0o755)
        return path

    def partitions(self, *nodes: str) -> None:
        """The site's nodes as `sinfo -h -N -o '%N|%P|%c|%m|%G|%l'` prints them (the request
        check), e.g. 'gpu-01|gpu*|64|512000|gpu:h100:4(S:0-1)|2-00:00:00'."""
        self.add("sinfo", "#!/bin/sh\ncat <<'EOF'\n" + "".join(f"{n}\n" for n in nodes) + "EOF\n")

    def launches(self) -> list[dict]:
        log = self.root / "launcher.log"
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


@pytest.fixture
def fake_site(tmp_path, monkeypatch) -> FakeSite:
    return FakeSite(tmp_path, monkeypatch)
