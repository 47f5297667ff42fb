"""`slurm` and `plan` on hostile runs: a submission that would only fail in the queue (class 5),
values that would reach the job scripts (class 4), and the scripts' own paths (class 2).
A stand-in `sbatch` on PATH records every call, so "submitted nothing" is checked, not assumed."""

from __future__ import annotations

import io
import os
import sys

import pytest
from PIL import Image


@pytest.fixture
def sbatch(world, monkeypatch):
    """A fake sbatch that logs its calls; returns the log path."""
    bin_dir = world.root.parent / f"{world.root.name}-bin"
    bin_dir.mkdir()
    log = bin_dir / "calls.log"
    exe = bin_dir / "sbatch"
    exe.write_text(f"#!{sys.executable}\nimport sys\nopen({str(log)!r}, 'a').write(' '.join(sys.argv) + '\\n')\n"
                   "print('4242')\n")
    exe.chmod(0o755)
    # A cluster whose controller does not answer: the request check is skipped, as without sinfo.
    (bin_dir / "sinfo").write_text("#!/bin/sh\necho 'slurm_load_partitions: Unable to contact slurm controller' >&2\nexit 1\n")
    (bin_dir / "sinfo").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return log


def test_submit_refuses_a_judge_whose_model_folder_is_missing(world, expect, sbatch):
    cfg = world.config(judges=[{"name": "judge", "path": "nowhere"}])
    expect(1, "slurm", "--config", cfg, "--submit", named=["run.yaml", "path", "model folder not found"])
    assert not sbatch.exists() and not world.run_dir.exists()


def test_submit_refuses_a_broken_image_before_the_queue(world, expect, sbatch):
    buf = io.BytesIO()
    Image.new("RGB", (128, 128)).save(buf, "JPEG")
    (world.root / "cut.jpg").write_bytes(buf.getvalue()[:200])
    world.write_jsonl(world.dataset, [world.question("q1", image="cut.jpg")])
    expect(1, "slurm", "--config", world.config(), "--submit", named=["data.jsonl:1", "image"])
    assert not sbatch.exists()


def test_dry_run_fails_for_a_missing_dataset(world, expect):
    out = expect(1, "slurm", "--config", world.config(dataset="gone.jsonl"), "--dry-run", named=["gone.jsonl", "file not found"])
    assert "#SBATCH" not in out


def test_dry_run_fails_for_extra_answers_to_unknown_questions(world, expect):
    a = world.answers(world.root / "ref.jsonl", qids=("q1", "zz"))
    expect(1, "slurm", "--config", world.config(extra_answers=[str(a)]), "--dry-run", named=["extra_answers", "zz"])


def test_a_good_submission_still_goes_through(world, expect, sbatch):
    expect(0, "slurm", "--config", world.config(), "--submit", named=["Submitted"], inputs_change=True)
    assert sbatch.read_text().count("sbatch") >= 3
    scripts = world.run_dir / "slurm" / "scripts"
    assert all(p.parent == scripts for p in scripts.rglob("*.sbatch"))


@pytest.mark.parametrize("line", ["--time=banana", "--mem=lots", "--constraint=h100\n#SBATCH --x", "rm -rf /"])
def test_extra_sbatch_lines_are_checked(world, expect, line):
    out = expect(1, "slurm", "--config", world.config(slurm={"extra_sbatch": [line]}), "--dry-run",
                 named=["run.yaml", "slurm.extra_sbatch"])
    assert "#!/bin/bash" not in out


def test_partition_with_a_newline_cannot_add_script_lines(world, expect):
    expect(1, "slurm", "--config", world.config(slurm={"partition": "gpu\n#SBATCH --exclusive"}), "--dry-run",
           named=["slurm.partition"])


def test_plan_refuses_a_missing_dataset_and_bad_numbers_together(world, expect):
    cfg = world.config(dataset="gone.jsonl", plan={"chars_per_token": 0, "image_tokens": -1})
    out = expect(1, "plan", "--config", cfg, named=["plan.chars_per_token", "plan.image_tokens"])
    assert "2 problem(s)" in out
