"""Faults: a process killed mid-append (sharded and unsharded) then rerun (class 3), Ctrl-C,
a full disk, a read-only folder, a failed whole-file write, an internal error (class 6), and
what the messages say was written (class 7). A killed process is real (SIGKILL, SIGINT to
fake_cli.py); a kill landing mid-`write` is reproduced by appending half a record, since
one chunk's write is too short to interrupt reliably."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gamut_local.rundir import verdict_store
from gamut_local.rundir.layout import verdict_files
from tests.support import processes

FAKE_CLI = Path(__file__).with_name("fake_cli.py")
REPO = Path(__file__).resolve().parents[2]  # the tree under test, whatever is installed
TORN = b'{"question_id": "q1", "model": "cand", "variant": "text_o'


_STARTED: list[subprocess.Popen] = []


@pytest.fixture(autouse=True)
def _kill_what_was_started():
    """Every process `_start` made is killed with its whole session when the test ends, however
    it ends (an assertion between start and kill included)."""
    yield
    while _STARTED:
        proc = _STARTED.pop()
        processes.kill_session(proc.pid)
        proc.wait()


def _start(world, *argv, delay: float = 1.0) -> subprocess.Popen:
    # 1 s per engine call: a signal sent after the first chunk lands mid-run, with time to
    # spare on a loaded machine.
    # The tree under test first: the cwd is the test's world, so PYTHONPATH=cwd imported
    # whatever gamut_local was installed (another checkout's, with other settings hashes).
    env = {**os.environ, "FAKE_DELAY": str(delay), "PYTHONPATH": os.pathsep.join(
        [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])}
    # A shell's background job (`cmd &`, as CI may run) ignores SIGINT and its children inherit
    # that; give the child the default handler so Ctrl-C reaches it as it would in a terminal.
    # Its own session, so `_kill_what_was_started` can end everything it started.
    proc = subprocess.Popen([sys.executable, str(FAKE_CLI), *map(str, argv)], cwd=world.root, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    _STARTED.append(proc)
    return proc


def _wait_for_lines(path: Path, n: int, proc: subprocess.Popen, timeout: float = 60) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if path.exists() and path.read_bytes().count(b"\n") >= n:
            return
        if proc.poll() is not None:
            raise AssertionError(f"process ended first:\n{proc.stdout.read().decode()}")
        time.sleep(0.02)
    raise AssertionError(f"{path} never reached {n} lines")


def _keys(files) -> list[tuple]:
    """The verdict (or answer) keys in JSONL files and verdict store units."""
    out = []
    for f in files:
        if verdict_store.is_store(f):
            out += [(r["question_id"], r["model"], r["variant"], r["judge"], r["check_id"])
                    for _, r in verdict_store.records(f)]
            continue
        for line in f.read_text().splitlines():
            if line.strip() and not f.read_text().endswith(line):  # a torn last line is not a record
                r = json.loads(line)
                out.append((r["question_id"], r["model"], r["variant"], r.get("judge"), r.get("check_id")))
    return out


def _wait_for_parts(unit: Path, n: int, proc: subprocess.Popen, timeout: float = 60) -> None:
    """Until the judge task has written `n` parts (chunks) of the unit."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if len(list(verdict_store.parts_dir(unit).glob("part-*.parquet"))) >= n:
            return
        if proc.poll() is not None:
            raise AssertionError(f"process ended first:\n{proc.stdout.read().decode()}")
        time.sleep(0.02)
    raise AssertionError(f"{unit} never reached {n} parts")


IN_FLIGHT = ".part-000099.parquet.killed.tmp"  # a chunk whose writer was killed before the rename


def _chunk_in_flight(unit: Path) -> Path:
    tmp = verdict_store.parts_dir(unit) / IN_FLIGHT
    tmp.parent.mkdir(parents=True, exist_ok=True)
    tmp.write_bytes(b"PAR1 half a chunk")
    return tmp


def _complete(world) -> None:
    """The run finished: one answer per question, one verdict per answer and check, scores."""
    answers = _keys((world.run_dir / "answers").glob("*.jsonl"))
    verdicts = _keys(verdict_files(world.run_dir))
    assert sorted(answers) == sorted(set(answers)) and len(answers) == 4
    assert sorted(verdicts) == sorted(set(verdicts)) and len(verdicts) == 4 * 3
    assert json.loads((world.run_dir / "scores" / "scores.json").read_text())["models"]


def test_a_shards_chunk_in_flight_is_ignored_by_every_reader_and_left_alone(world, expect):
    cfg = world.config(chunk_size=3)
    expect(0, "generate", "--config", cfg, inputs_change=True)
    expect(0, "judge", "--config", cfg, "--shard", "0/2", inputs_change=True)
    shard = world.run_dir / "verdicts" / "judge" / "cand.text_only.shard-0-of-2.parquet"
    tmp = _chunk_in_flight(shard)  # as a kill mid-write leaves it: never renamed, never read
    for _ in range(2):  # ignored by every reader, every time, never removed by another task
        out = expect(0, "run", "--config", cfg, inputs_change=True)
        assert "Parquet" not in out and "PAR1" not in out
        _complete(world)
    assert tmp.read_bytes() == b"PAR1 half a chunk"


def test_sigkill_mid_judge_shard_then_unsharded_run_completes(world, expect):
    cfg = world.config(chunk_size=3)
    expect(0, "generate", "--config", cfg, inputs_change=True)
    shard = world.run_dir / "verdicts" / "judge" / "cand.text_only.shard-0-of-2.parquet"
    proc = _start(world, "judge", "--config", cfg, "--shard", "0/2")
    _wait_for_parts(shard, 1, proc)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(30) == -signal.SIGKILL
    _chunk_in_flight(shard)
    expect(0, "run", "--config", cfg, inputs_change=True)
    _complete(world)


def test_sigkill_mid_sharded_judge_then_the_same_shard_resumes_and_compacts(world, expect):
    cfg = world.config(chunk_size=3)
    expect(0, "generate", "--config", cfg, inputs_change=True)
    shard = world.run_dir / "verdicts" / "judge" / "cand.text_only.shard-1-of-2.parquet"
    proc = _start(world, "judge", "--config", cfg, "--shard", "1/2")
    _wait_for_parts(shard, 1, proc)
    proc.kill()
    proc.wait(30)
    _chunk_in_flight(shard)
    done = len(_keys([shard]))
    out = expect(0, "judge", "--config", cfg, "--shard", "1/2", inputs_change=True)
    assert f"{done} already done" in " ".join(out.split())
    assert shard.is_file() and not verdict_store.parts_dir(shard).exists()  # its owner compacted its parts
    expect(0, "judge", "--config", cfg, "--shard", "0/2", inputs_change=True)
    expect(0, "score-run", "--config", cfg, inputs_change=True)
    assert len(set(_keys(verdict_files(world.run_dir)))) == 12


def test_sigkill_mid_unsharded_generate_then_rerun_completes(world, expect):
    cfg = world.config(chunk_size=1)
    answers = world.run_dir / "answers" / "cand.text_only.jsonl"
    proc = _start(world, "generate", "--config", cfg)
    _wait_for_lines(answers, 1, proc)
    proc.kill()
    proc.wait(30)
    with open(answers, "ab") as f:
        f.write(TORN)
    expect(1, "judge", "--config", cfg, named=["answers missing", "run generate first", "torn last line"],
           inputs_change=True)
    expect(0, "run", "--config", cfg, inputs_change=True)
    _complete(world)


def test_sigkill_mid_draft_then_the_rerun_drafts_only_what_is_missing(world, expect):
    """`draft` killed part-way (SIGKILL, as a scheduler kills): the rerun drafts the questions
    left and none twice. That no engine process outlives a killed stage is the real engine's
    test (tests/e2e/test_killed.py): every stage opens its engine the same way."""
    from gamut_local.stages.draft import drafts_log_path
    from gamut_local.demo.authoring import write_authoring_inputs
    from tests.support.authoring import write_draft_config

    questions, evidence = write_authoring_inputs(world.root / "authoring", 3)
    cfg = write_draft_config(world.root / "authoring", str(world.root / "models" / "cand"), 96, max_retries=0)
    out = world.root / "drafted.jsonl"
    log = drafts_log_path(out)
    argv = ["draft", questions, "--evidence", evidence, "--config", cfg, "--out", out, "--chunk-size", "1"]
    proc = _start(world, *argv)
    _wait_for_lines(log, 1, proc)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(30) == -signal.SIGKILL
    partial = [json.loads(line)["question_id"] for line in log.read_text().splitlines()]
    assert 1 <= len(partial) < 3, "the kill did not land part-way"
    said = " ".join(expect(0, *argv, inputs_change=True).split())
    assert f"({3 - len(partial)} drafted now, {len(partial)} already done)" in said, said
    final = [json.loads(line)["question_id"] for line in log.read_text().splitlines()]
    assert sorted(final) == sorted(set(final)) and len(final) == 3


def test_shards_write_their_own_files_whose_union_is_the_unsharded_run(world, expect):
    """Three judging tasks over one run's answers: disjoint files, and together the unsharded
    run's verdicts and scores. (That a real engine gives the same labels whatever the shard's
    batches is tests/e2e/test_slurm_run.py's, through a real SLURM array.)"""
    cfg = world.config(chunk_size=3)
    for stage in ("generate", "judge", "score-run"):
        expect(0, stage, "--config", cfg, inputs_change=True)
    sharded = world.config("sharded.yaml", output_dir="sharded", chunk_size=2)
    out = world.root / "sharded"
    (out / "answers").mkdir(parents=True)
    for p in (world.run_dir / "answers").iterdir():
        (out / "answers" / p.name).write_bytes(p.read_bytes())
    for i in range(3):
        expect(0, "judge", "--config", sharded, "--shard", f"{i}/3", inputs_change=True)
    assert sorted(p.name for p in verdict_files(out)) == [f"cand.text_only.shard-{i}-of-3.parquet" for i in range(3)]
    per_shard = [_keys([p]) for p in verdict_files(out)]
    assert all(per_shard) and sum(map(len, per_shard)) == len(set().union(*map(set, per_shard)))  # disjoint

    def by_key(run):
        return {tuple(r[k] for k in ("question_id", "model", "variant", "judge", "check_id")): (r["verdict"], r["probs"])
                for p in verdict_files(run) for _, r in verdict_store.records(p)}

    assert by_key(out) == by_key(world.run_dir) and len(by_key(out)) == 12
    expect(0, "score-run", "--config", sharded, inputs_change=True)
    scores = [json.loads((run / "scores" / "scores.json").read_text())["models"] for run in (out, world.run_dir)]
    assert scores[0] == scores[1]


def _says_what_is_there(out: str, answers: Path) -> None:
    """The message and the file agree: a chunk the signal caught mid-append was cut back
    (and is not reported); every whole chunk on disk is."""
    data = answers.read_bytes() if answers.exists() else b""
    assert data == b"" or data.endswith(b"\n")
    n = data.count(b"\n")
    assert (f"cand.text_only.jsonl (+{n} lines)" in out) == (n > 0), out
    assert "nothing else was changed" in out


def test_sigint_stops_with_a_message_and_the_rerun_resumes(world, expect):
    cfg = world.config(chunk_size=1)
    answers = world.run_dir / "answers" / "cand.text_only.jsonl"
    proc = _start(world, "generate", "--config", cfg)
    _wait_for_lines(answers, 1, proc)
    proc.send_signal(signal.SIGINT)
    out = proc.communicate(timeout=30)[0].decode()
    assert proc.returncode == 130, out
    assert "Traceback" not in out and "interrupted; rerun the same command to resume" in out
    _says_what_is_there(out, answers)
    expect(0, "run", "--config", cfg, inputs_change=True)
    _complete(world)


def test_ctrl_c_in_process_says_what_was_written(world, expect, monkeypatch):
    from tests.support import fake_engine

    calls = {"n": 0}

    def chat(self, convs, sampling):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return type(self).chat.__wrapped__(self, convs, sampling)

    chat.__wrapped__ = fake_engine.FakeEngine.chat
    monkeypatch.setattr(fake_engine.FakeEngine, "chat", chat)
    out = expect(130, "generate", "--config", world.config(chunk_size=2), named=["interrupted"], inputs_change=True)
    assert "cand.text_only.jsonl (+2 lines)" in out and "manifest.json" in out


def test_disk_full_mid_append_leaves_whole_lines_and_a_message(world, expect, monkeypatch):
    from gamut_local.rundir import store

    real, calls = os.write, {"n": 0}

    def write(fd, data):
        calls["n"] += b'"response"' in bytes(data)
        if calls["n"] == 2 and b'"response"' in bytes(data):  # the second chunk: half of it lands, then the disk is full
            real(fd, bytes(data)[: len(data) // 2])
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd, data)

    monkeypatch.setattr(store.os, "write", write)
    cfg = world.config(chunk_size=2)
    out = expect(1, "generate", "--config", cfg, named=["No space left on device", "(+2 lines)"], inputs_change=True)
    assert "cand.text_only.jsonl" in out
    answers = world.run_dir / "answers" / "cand.text_only.jsonl"
    assert answers.read_bytes().endswith(b"\n") and answers.read_bytes().count(b"\n") == 2
    monkeypatch.setattr(store.os, "write", real)
    expect(0, "run", "--config", cfg, inputs_change=True)
    _complete(world)


def _mount(path: Path, options: str) -> bool:
    path.mkdir(parents=True, exist_ok=True)
    try:
        res = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True,
                             check=False)
    except OSError:
        return False
    return res.returncode == 0


@pytest.fixture
def tiny_tmpfs(tmp_path):
    """A 64 KiB tmpfs (root only; skipped elsewhere, where the injected ENOSPC case covers it)."""
    mnt = tmp_path / "full"
    if not _mount(mnt, "size=64k"):
        pytest.skip("cannot mount a tmpfs here (not root)")
    yield mnt
    subprocess.run(["umount", str(mnt)], check=False)


def test_a_really_full_disk_is_a_message_and_no_temp_file(world, expect, tiny_tmpfs):
    (tiny_tmpfs / "filler").write_bytes(b"x" * (60 * 1024))
    big = [world.question(f"q{i}", question="x" * 2000) for i in range(40)]
    world.write_jsonl(world.dataset, big)
    out = tiny_tmpfs / "rubric.jsonl"
    expect(1, "compile", world.dataset, "--out", out, named=["No space left on device"])
    assert sorted(p.name for p in tiny_tmpfs.iterdir()) == ["filler"]


def test_read_only_output_folder_is_a_message(world, expect, tmp_path):
    mnt = tmp_path / "ro"
    if not _mount(mnt, "ro,size=64k"):
        pytest.skip("cannot mount a tmpfs here (not root)")
    try:
        expect(1, "compile", world.dataset, "--out", mnt / "r.jsonl", named=["Read-only file system"])
        cfg = world.config(output_dir=str(mnt / "run"))
        expect(1, "generate", "--config", cfg, named=["Read-only file system"])
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


def test_permission_denied_is_a_message(world, expect, monkeypatch):
    import tempfile

    def denied(*a, **k):
        raise PermissionError(errno.EACCES, "Permission denied", str(world.root / "locked"))

    monkeypatch.setattr(tempfile, "mkstemp", denied)
    expect(1, "compile", world.dataset, "--out", world.root / "locked" / "r.jsonl", named=["Permission denied", "locked"])


def _renames_fail(monkeypatch) -> None:
    """Every atomic write's final rename fails with EIO (a dying disk)."""
    from gamut_local.rundir import store

    def replace(src, dst):
        raise OSError(errno.EIO, "Input/output error", str(dst))

    monkeypatch.setattr(store.os, "replace", replace)


def _old_output(world, name: str, text: str) -> Path:
    out = world.root / "out" / name
    out.parent.mkdir()
    out.write_text(text)
    return out


def test_failed_rename_keeps_the_old_file_and_leaves_no_temp(world, expect, monkeypatch):
    a = world.verdicts(world.root / "a.jsonl", judge="ja")
    b = world.verdicts(world.root / "b.jsonl", judge="jb")
    out = _old_output(world, "agreement.json", "old agreement\n")
    _renames_fail(monkeypatch)
    expect(1, "agree", a, b, "--out", out, named=["Input/output error", "agreement.json"], inputs_change=True)
    assert out.read_text() == "old agreement\n"
    assert sorted(p.name for p in out.parent.iterdir()) == ["agreement.json"]


def test_internal_error_is_one_line_exit_2_and_debug_prints_the_traceback(world, expect, monkeypatch):
    from typer.testing import CliRunner

    from gamut_local.cli.main import app
    from gamut_local.stages import compile as compile_stage

    def boom(*a, **k):
        raise ValueError("an invariant broke")

    monkeypatch.setattr(compile_stage, "compile_dataset", boom)
    out = expect(2, "compile", world.dataset, "--out", world.root / "r.jsonl",
                 named=["internal error: ValueError: an invariant broke", "--debug", "nothing was written"])
    assert out.count("\n") <= 3
    res = CliRunner().invoke(app, ["--debug", "compile", str(world.dataset), "--out", str(world.root / "r.jsonl")])
    assert res.exit_code == 2 and "Traceback" in res.output and "an invariant broke" in res.output


def test_early_failure_says_nothing_was_written(world, expect):
    expect(1, "judge", "--config", world.config(), named=["run generate first", "nothing was written"])
    assert not world.run_dir.exists()


def test_torn_last_line_of_an_extra_verdicts_file_is_skipped_with_a_note(world, expect):
    v = world.verdicts(world.root / "gold.jsonl")
    with open(v, "ab") as f:
        f.write(b'{"question_id": "q1", "mod')
    out = expect(0, "score", v, "--out", world.root / "s.json", named=["note:", "gold.jsonl:13", "torn last line"],
                 inputs_change=True)
    assert "GAMUT" in out


def test_a_sibling_shards_parts_not_yet_compacted_count_once(world, expect):
    """A shard task killed before compacting: its parts are verdicts to resume and to score
    alike, read once, and not another task's to compact."""
    cfg = world.config(chunk_size=3)
    expect(0, "generate", "--config", cfg, inputs_change=True)
    shard = world.run_dir / "verdicts" / "judge" / "cand.text_only.shard-0-of-2.parquet"
    proc = _start(world, "judge", "--config", cfg, "--shard", "0/2")
    _wait_for_parts(shard, 1, proc)
    proc.kill()
    proc.wait(30)
    parts = sorted(p.name for p in verdict_store.parts_dir(shard).iterdir())
    expect(0, "run", "--config", cfg, inputs_change=True)
    keys = _keys(verdict_files(world.run_dir))
    assert len(keys) == len(set(keys)) == 12
    assert sorted(p.name for p in verdict_store.parts_dir(shard).iterdir()) == parts


def test_sigterm_cleans_up_says_what_was_written_and_the_rerun_resumes(world, expect):
    cfg = world.config(chunk_size=1)
    answers = world.run_dir / "answers" / "cand.text_only.jsonl"
    proc = _start(world, "generate", "--config", cfg)
    _wait_for_lines(answers, 1, proc)
    proc.terminate()
    out = proc.communicate(timeout=30)[0].decode()
    assert proc.returncode == 143, out
    assert "Traceback" not in out and "terminated (SIGTERM)" in out
    _says_what_is_there(out, answers)
    assert not [p for p in world.run_dir.rglob("*.tmp")]
    expect(0, "run", "--config", cfg, inputs_change=True)
    _complete(world)


def test_failed_scores_write_keeps_the_old_files_and_leaves_no_temp(world, expect, monkeypatch):
    v = world.verdicts(world.root / "v.jsonl")
    out = _old_output(world, "s.json", "old scores\n")
    _renames_fail(monkeypatch)
    expect(1, "score", v, "--out", out, named=["Input/output error"], inputs_change=True)
    assert out.read_text() == "old scores\n" and sorted(p.name for p in out.parent.iterdir()) == ["s.json"]
