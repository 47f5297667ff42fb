"""The dataset and the answers read beside the verdicts (`data.reading.read_verdicts_and_dataset`):
in forked processes of their own (`rubric.workers.beside`) where the process runs no other
thread, in threads otherwise. Either way the same table, the same problems, the same stale
verdicts, and the dataset's warnings for the command's collector (`--strict` included).

The fork is checked in processes of their own: a test worker (pytest-xdist) runs threads,
so in it `beside` takes a thread."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gamut_local.data.dataset import collecting_warnings, load_questions
from gamut_local.data.reading import read_verdicts_and_dataset
from gamut_local.errors import InputError, Problem
from gamut_local.rubric import workers
from tests.support.sample_run import SAMPLE

GOLD = SAMPLE / "verdicts" / "gold.jsonl"
QUESTIONS = SAMPLE / "questions.jsonl"
ANSWERS = SAMPLE / "answers" / "reference.jsonl"


def _python(script: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)


def test_beside_forks_where_no_other_thread_runs_and_takes_threads_where_one_does_or_it_cannot():
    proc = _python("""
import os, threading
from gamut_local.rubric import workers
workers.cores = lambda: 2  # the fork's rule, whatever this machine has
with workers.beside((os.getpid,), (os.getpid,)) as jobs:
    alone = [job.result() for job in jobs]
stop = threading.Event()
waiting = threading.Thread(target=stop.wait)
waiting.start()
with workers.beside((os.getpid,)) as (job,):
    beside_a_thread = job.result()
stop.set()
waiting.join()
def no_semaphores(*args, **kwargs):  # as multiprocessing fails in a container without /dev/shm
    raise OSError(38, "Function not implemented")
workers.ProcessPoolExecutor = no_semaphores
with workers.beside((os.getpid,)) as (job,):
    unforkable = job.result()
print(os.getpid() not in alone, beside_a_thread == os.getpid(), unforkable == os.getpid())
""")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["True", "True", "True"]


def test_an_input_error_crosses_from_the_forked_process_problem_by_problem():
    proc = _python("""
import pickle
from gamut_local.errors import InputError, Problem
from gamut_local.rubric import workers
workers.cores = lambda: 2
def fail():
    raise InputError([Problem("d.jsonl", 2, "domain", "bad"), Problem("d.jsonl", None, "", "worse")])
workers.fail = fail  # a module-level function: the fork pickles it by name
try:
    with workers.beside((workers.fail,)) as (job,):
        job.result()
except InputError as e:
    print([str(p) for p in e.problems])
""")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "['d.jsonl:2: domain: bad', 'd.jsonl: <record>: worse']"


def _bad_dataset(tmp_path: Path) -> Path:
    rows = [json.loads(line) for line in QUESTIONS.read_text().splitlines() if line.strip()]
    rows[1]["question_id"] = 5
    path = tmp_path / "questions.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _refused_then_scored(tmp_path: Path, command: list[str], bad: list[str], where: str, good: list[str]) -> dict:
    """`score` run as its own process (where it forks): given `bad`, refused with `where`
    (FILE:LINE: field) and nothing written; given `good`, the scores.json it writes."""
    proc = subprocess.run([*command, str(tmp_path / "bad.json"), *bad], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert where in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "bad.json").exists()
    proc = subprocess.run([*command, str(tmp_path / "forked.json"), *good], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads((tmp_path / "forked.json").read_text())


def test_score_as_its_own_process_reports_a_bad_dataset_by_line_and_scores_a_good_one_as_in_a_thread(
        tmp_path, monkeypatch):
    from gamut_local.stages.score import write_scores

    bad = _bad_dataset(tmp_path)
    command = [sys.executable, "-m", "gamut_local.cli", "score", str(GOLD), "--out"]
    forked = _refused_then_scored(tmp_path, command, ["--dataset", str(bad)], f"{bad}:2: question_id: ",
                                  ["--dataset", str(QUESTIONS)])
    monkeypatch.setattr(workers, "cores", lambda: 1)  # here: a thread
    here = write_scores(tmp_path / "thread.json", [GOLD], QUESTIONS).model_dump(mode="json")
    assert forked["models"] == here["models"] and forked["domains"] == here["domains"]
    assert forked["dataset"] == here["dataset"]


def test_score_as_its_own_process_reads_the_answers_beside_reports_a_bad_one_by_line_and_counts_edits_stale(
        tmp_path, monkeypatch):
    from gamut_local.stages.score import write_scores

    rows = [json.loads(line) for line in ANSWERS.read_text().splitlines() if line.strip()]
    rows[0]["response"] += " One more sentence."  # its verdicts graded another text: stale
    edited = tmp_path / "edited.jsonl"
    edited.write_text("".join(json.dumps(r) + "\n" for r in rows))
    bad = tmp_path / "bad.jsonl"
    bad.write_text(edited.read_text().replace('"response": ', '"response": 7, "x": ', 1))
    command = [sys.executable, "-m", "gamut_local.cli", "score", str(GOLD), "--dataset", str(QUESTIONS),
               "--allow-incomplete", "--out"]
    forked = _refused_then_scored(tmp_path, command, ["--answers", str(bad)], f"{bad}:1: response: ",
                                  ["--answers", str(edited)])
    monkeypatch.setattr(workers, "cores", lambda: 1)  # here: a thread
    here = write_scores(tmp_path / "thread.json", [GOLD], QUESTIONS, answers=[edited],
                        allow_incomplete=True).model_dump(mode="json")
    assert forked["stale_verdicts"] == here["stale_verdicts"] and here["stale_verdicts"]["gold"]["answer_hash"] > 0
    assert forked["models"] == here["models"] and forked["answers"] == here["answers"]


def test_the_answers_are_read_in_two_runs_of_about_equal_size(tmp_path):
    from gamut_local.data.reading import _halves

    files = []
    for name, size in (("a", 300), ("b", 100), ("c", 100), ("d", 100)):
        files.append(tmp_path / f"{name}.jsonl")
        files[-1].write_bytes(b"x" * size)
    assert _halves(files) == [files[:1], files[1:]]
    assert _halves(files[1:]) == [files[1:3], files[3:]]
    assert _halves(files[:1]) == [files[:1]] and _halves([]) == [[]]
    unreadable = [tmp_path / "gone.jsonl", tmp_path / ("x" * 300 + ".jsonl")]  # stat: ENOENT, ENAMETOOLONG
    assert _halves([*unreadable, *files[1:2]]) == [unreadable, files[1:2]]


def test_answers_read_in_two_processes_are_refused_as_one_read_refuses_them(tmp_path):
    """A key in both runs is a duplicate named with where it was first; problems in both runs are
    named together, as the one answers reader names them."""
    rows = [json.loads(line) for line in ANSWERS.read_text().splitlines() if line.strip()]
    first, second, bad, worse = (tmp_path / f"{n}.jsonl" for n in ("first", "second", "bad", "worse"))
    first.write_text("".join(json.dumps(r) + "\n" for r in rows[:2]))
    second.write_text("".join(json.dumps(r) + "\n" for r in rows[1:]))  # rows[1] again
    bad.write_text(json.dumps({**rows[0], "response": 7}) + "\n")
    worse.write_text(json.dumps({**rows[1], "model": ""}) + "\n")
    command = [sys.executable, "-m", "gamut_local.cli", "score", str(GOLD), "--allow-incomplete", "--out",
               str(tmp_path / "scores.json")]
    for given, named in (([first, second], [f"{second}:1: ", f"(first at {first}:2)"]),
                         ([bad, worse], [f"{bad}:1: response: ", f"{worse}:1: model: "])):
        proc = subprocess.run([*command, *(a for p in given for a in ("--answers", str(p)))],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert all(n in proc.stderr for n in named), proc.stderr
    assert not (tmp_path / "scores.json").exists()


@pytest.fixture
def release_and_verdicts(tmp_path):
    """A release parquet whose reading warns (three warnings), and one verdict it backs."""
    pytest.importorskip("pyarrow")
    from gamut_local.data.consistency import current_checks
    from tests.support.release import write_release

    release = write_release(tmp_path / "test.parquet", warned=True)
    (qid, variant, check), (tier, _) = next(iter(current_checks(load_questions(release)).items()))
    verdicts = tmp_path / "judge.jsonl"
    verdicts.write_text(json.dumps({"question_id": qid, "model": "m", "variant": variant, "judge": "j",
                                    "check_id": check, "tier": tier, "verdict": "meets"}) + "\n")
    return release, verdicts


def test_the_datasets_warnings_reach_the_collector_and_strict_refuses_them_from_a_thread(
        release_and_verdicts, monkeypatch):
    release, verdicts = release_and_verdicts
    monkeypatch.setattr(workers, "cores", lambda: 1)
    with collecting_warnings() as warnings:
        table, (question_ids, *_) = read_verdicts_and_dataset([verdicts], release)
    assert len(table) == 1 and len(question_ids) == 4
    assert len(warnings) == 3 and all(isinstance(w, Problem) for w in warnings)
    with collecting_warnings(strict=True), pytest.raises(InputError) as e:
        read_verdicts_and_dataset([verdicts], release)
    assert e.value.problems == warnings


def test_the_datasets_warnings_reach_the_collector_and_strict_refuses_them_from_a_fork(release_and_verdicts):
    release, verdicts = release_and_verdicts
    proc = _python(f"""
from gamut_local.data.dataset import collecting_warnings
from gamut_local.data.reading import read_verdicts_and_dataset
from gamut_local.errors import InputError
from gamut_local.rubric import workers
workers.cores = lambda: 2
with collecting_warnings() as warnings:
    read_verdicts_and_dataset([{str(verdicts)!r}], {str(release)!r})
try:
    with collecting_warnings(strict=True):
        read_verdicts_and_dataset([{str(verdicts)!r}], {str(release)!r})
except InputError as e:
    print(len(warnings), e.problems == warnings)
""")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["3", "True"]
