"""Issue 42, the store's writers: nothing writes into a run's store but the task that owns it,
holding the task's lock. `verdicts export` never writes inside a run's `verdicts/` (or its
`superseded/`, its `answers/`), however the path is spelled; two writers of one task are
refused (the lock file names its holder's host and pid; a dead holder's lock on this host is
stale and taken over); `verdicts import` adds only what no unit holds, into the unit that
holds the question (shards included), and a person's verdicts by (annotator, key, revision).

Every refusal is a clean failure: exit 1, no traceback, the file and field named, and every
file of the world, the run included, byte-identical afterwards."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gamut_local.rundir import task_lock, verdict_store
from tests.support import processes
from tests.hostile.conftest import CHECKS

FAKE_CLI = Path(__file__).with_name("fake_cli.py")
REPO = Path(__file__).resolve().parents[2]
JUDGES = [{"name": "j1", "path": "models/judge"}, {"name": "j2", "path": "models/judge"}]
UNIT = Path("run/verdicts/j1/cand.text_only.parquet")


def tree(root: Path) -> dict[str, str]:
    """Hashes of every file under the world, the run directory and hidden files included."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()}


def keys(files) -> list[tuple]:
    out = []
    for f in files:
        rows = verdict_store.records(f) if verdict_store.is_store(f) else \
            [(0, json.loads(line)) for line in Path(f).read_text().splitlines() if line.strip()]
        out += [(r["question_id"], r["model"], r["variant"], r["judge"], r["check_id"]) for _, r in rows]
    return out


def judged(world, expect, **over) -> Path:
    cfg = world.config(judges=JUDGES, **over)
    expect(0, "generate", "--config", cfg, inputs_change=True)
    expect(0, "judge", "--config", cfg, inputs_change=True)
    return cfg


def refused(world, expect, *argv, named=()) -> str:
    """`argv` fails cleanly and leaves every file of the world as it was."""
    before = tree(world.root)
    out = expect(1, *argv, named=named)
    assert tree(world.root) == before, "a file changed"
    return out


# ---------------------------------------------------------------- export never writes in a store

@pytest.mark.parametrize("out", [
    "run/verdicts/j1/cand.text_only.parquet",  # the example: j1's unit replaced by j2's
    "run/verdicts/j1/cand.multimodal.parquet",  # a new unit in the run's own store
    "run/verdicts/j1/cand.text_only.jsonl",  # a JSONL beside the unit: read twice
    "run/verdicts/j9/all.jsonl",  # a judge folder the store does not have yet
    "run/verdicts/all.jsonl",  # the verdicts folder itself
    "run/verdicts/j1/cand.text_only.parquet.parts/part-000009.parquet",
    "run/superseded/verdicts/j1/cand.text_only.parquet",  # the run's superseded verdicts
    "run/answers/cand.text_only.jsonl",  # read as answers by the judge stage
])
def test_export_into_a_runs_store_is_refused(world, expect, out):
    judged(world, expect)
    (world.root / "run" / "superseded" / "verdicts" / "j1").mkdir(parents=True)
    refused(world, expect, "verdicts", "export", "run/verdicts/j2", "--out", out, named=[out, "--out", "store"])


def test_export_into_another_runs_store_is_refused(world, expect):
    judged(world, expect)
    other = world.config("other.yaml", output_dir="other", judges=JUDGES)
    expect(0, "generate", "--config", other, inputs_change=True)
    expect(0, "judge", "--config", other, inputs_change=True)
    refused(world, expect, "verdicts", "export", "run", "--out", "other/verdicts/j1/cand.text_only.parquet",
            named=["other/verdicts/j1", "--out"])


def test_export_through_a_symlink_into_a_store_is_refused(world, expect):
    judged(world, expect)
    (world.root / "link").symlink_to(world.root / "run" / "verdicts" / "j1")
    (world.root / "file.parquet").symlink_to(world.root / UNIT)
    refused(world, expect, "verdicts", "export", "run/verdicts/j2", "--out", "link/x.jsonl", named=["link/x.jsonl"])
    refused(world, expect, "verdicts", "export", "run/verdicts/j2", "--out", "file.parquet", named=["file.parquet"])


def test_export_beside_a_run_or_into_a_plain_verdicts_folder_is_fine(world, expect):
    judged(world, expect)
    store = tree(world.root / "run" / "verdicts")
    for out in ("verdicts/all.parquet", "run/all.jsonl", "exports/verdicts/j1/x.jsonl"):
        expect(0, "verdicts", "export", "run/verdicts/j2", "--out", out, named=["12 verdicts"], inputs_change=True)
    assert tree(world.root / "run" / "verdicts") == store
    assert not list(world.root.rglob(".*.lock")), "an export left a lock file"


# ---------------------------------------------------------------- one writer per task

def _start(world, *argv, delay: float) -> subprocess.Popen:
    env = {**os.environ, "FAKE_DELAY": str(delay), "PYTHONPATH": os.pathsep.join(
        [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])}
    return subprocess.Popen([sys.executable, str(FAKE_CLI), *map(str, argv)], cwd=world.root, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)


def test_two_judges_of_one_task_started_at_once_one_is_refused_naming_the_other(world, expect):
    """A double submit (or a requeued task beside its predecessor): two real `judge` processes
    of the same task at once. Before: both exit 0 and the unit holds keys twice."""
    cfg = world.config(judges=JUDGES[:1], chunk_size=3)
    expect(0, "generate", "--config", cfg, inputs_change=True)
    procs = [_start(world, "judge", "--config", cfg, delay=2.0) for _ in range(2)]
    try:
        outs = [p.communicate(timeout=300)[0] for p in procs]
    finally:
        for p in procs:
            processes.kill_session(p.pid)
    codes = [p.returncode for p in procs]
    assert sorted(codes) == [0, 1], (codes, outs)
    loser, winner = (1, 0) if codes[1] else (0, 1)
    out = " ".join(outs[loser].split())
    assert f"pid {procs[winner].pid}" in out and socket.gethostname() in out, out
    assert "Traceback" not in out and "nothing was written" in out, out
    assert "cand.text_only.parquet" in out, out
    unit = world.root / UNIT
    assert sorted(keys([unit])) == sorted(set(keys([unit]))) and len(keys([unit])) == 12
    assert not list(unit.parent.glob(".*.lock")), "the winner left its lock behind"


def _lock(world, unit: Path, **holder) -> Path:
    path = task_lock.lock_path(world.root / unit)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "started": None,
                                "since": "2025-01-01T00:00:00+00:00", "command": "gamut-local judge", **holder}))
    return path


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


@pytest.fixture
def sleeper():
    p = subprocess.Popen(["sleep", "300"])
    yield p
    p.send_signal(signal.SIGKILL)
    p.wait()


def test_a_judge_beside_a_live_holder_on_this_host_is_refused(world, expect, sleeper):
    cfg = world.config(judges=JUDGES[:1])
    expect(0, "generate", "--config", cfg, inputs_change=True)
    lock = _lock(world, UNIT, pid=sleeper.pid)
    refused(world, expect, "judge", "--config", cfg, named=[f"pid {sleeper.pid}", str(lock.name), "lock"])


def test_a_lock_from_another_host_is_refused_and_says_how_to_clear_it(world, expect):
    cfg = world.config(judges=JUDGES[:1])
    expect(0, "generate", "--config", cfg, inputs_change=True)
    lock = _lock(world, UNIT, host="node-17.cluster", pid=4242)
    out = refused(world, expect, "judge", "--config", cfg, named=["node-17.cluster", "pid 4242", lock.name])
    assert "delete" in out


def test_a_beating_lock_from_another_host_is_refused_while_it_beats_and_taken_once_it_stops(world, expect):
    """A judge task requeued onto another node after its node died: the dead task's lock beat
    (a whole task's hold touches it every task_lock.HEARTBEAT s); untouched for STALE_AFTER, it
    is taken over with a note, with no hand needed. Still beating, it refuses."""
    cfg = world.config(judges=JUDGES[:1])
    expect(0, "generate", "--config", cfg, inputs_change=True)
    lock = _lock(world, UNIT, host="node-17.cluster", pid=4242, heartbeat=True)
    out = refused(world, expect, "judge", "--config", cfg, named=["node-17.cluster", "pid 4242", lock.name])
    assert "taken over once its heartbeat has stopped" in out
    old = time.time() - task_lock.STALE_AFTER - 5
    os.utime(lock, (old, old))
    out = expect(0, "judge", "--config", cfg, inputs_change=True)
    assert "stale lock" in out and "heartbeat stopped" in out, out
    assert not lock.exists() and len(keys([world.root / UNIT])) == 12


def test_a_whole_task_hold_touches_its_lock_while_it_lives(tmp_path, monkeypatch):
    """The heartbeat itself: a hold with `heartbeat` touches its lock file every HEARTBEAT
    seconds and marks it as beating; a short write's hold does neither."""
    monkeypatch.setattr(task_lock, "HEARTBEAT", 0.05)
    unit, short = tmp_path / "j" / "m.multimodal.parquet", tmp_path / "j" / "m.text_only.parquet"
    with task_lock.hold([unit], heartbeat=True), task_lock.hold([short], wait=1):
        lock = task_lock.lock_path(unit)
        os.utime(lock, (1, 1))
        os.utime(task_lock.lock_path(short), (1, 1))
        deadline = time.monotonic() + 30
        while lock.stat().st_mtime == 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert lock.stat().st_mtime > 1 and task_lock.read_holder(lock)["heartbeat"] is True
        assert task_lock.lock_path(short).stat().st_mtime == 1
        assert task_lock.read_holder(task_lock.lock_path(short))["heartbeat"] is False
    assert not lock.exists()


@pytest.mark.parametrize("holder", [
    {"pid": "dead"},  # the holder was killed (SIGKILL, OOM, a node's reboot) on this host
    {"pid": "self-other-start"},  # the pid is alive, but it is another process (pid reused)
])
def test_a_stale_lock_on_this_host_is_taken_over_with_a_note(world, expect, holder):
    cfg = world.config(judges=JUDGES[:1])
    expect(0, "generate", "--config", cfg, inputs_change=True)
    if holder["pid"] == "dead":
        lock = _lock(world, UNIT, pid=_dead_pid())
    else:
        lock = _lock(world, UNIT, pid=os.getpid(), started=1)
    out = expect(0, "judge", "--config", cfg, inputs_change=True)
    assert "stale lock" in out and lock.name in " ".join(out.split()), out
    assert not lock.exists() and len(keys([world.root / UNIT])) == 12


def test_a_damaged_lock_file_is_refused_naming_it(world, expect):
    cfg = world.config(judges=JUDGES[:1])
    expect(0, "generate", "--config", cfg, inputs_change=True)
    lock = task_lock.lock_path(world.root / UNIT)
    lock.parent.mkdir(parents=True)
    for text in ("", "not json", '{"host": 3, "pid": "x"}', "[1]"):
        lock.write_text(text)
        refused(world, expect, "judge", "--config", cfg, named=[lock.name, "delete"])


def test_import_into_a_unit_another_process_holds_is_refused(world, expect, sleeper, monkeypatch):
    judged(world, expect)
    expect(0, "verdicts", "export", "run/verdicts/j1", "--out", "j1.jsonl", inputs_change=True)
    lock = _lock(world, UNIT, pid=sleeper.pid)
    monkeypatch.setattr(task_lock, "WAIT", 0.3)
    refused(world, expect, "verdicts", "import", "j1.jsonl", "--into", "run", named=[f"pid {sleeper.pid}", lock.name])


def test_import_while_a_shard_of_another_layout_is_held_is_refused(world, expect, sleeper, monkeypatch):
    """A unit not yet written (its task just started) still has its lock: an import adding to
    the unsharded unit would judge the same keys twice."""
    judged(world, expect)
    expect(0, "verdicts", "export", "run/verdicts/j1", "--out", "j1.jsonl", inputs_change=True)
    for unit in ("cand.text_only.parquet", "cand.multimodal.parquet"):
        (world.root / "run/verdicts/j1" / unit).unlink(missing_ok=True)
    lock = _lock(world, Path("run/verdicts/j1/cand.text_only.shard-0-of-2.parquet"), pid=sleeper.pid)
    monkeypatch.setattr(task_lock, "WAIT", 0.3)
    refused(world, expect, "verdicts", "import", "j1.jsonl", "--into", "run", named=[f"pid {sleeper.pid}", lock.name])


def test_a_judge_of_another_shard_layout_beside_a_running_one_is_refused(world, expect, sleeper):
    cfg = world.config(judges=JUDGES[:1])
    expect(0, "generate", "--config", cfg, inputs_change=True)
    _lock(world, Path("run/verdicts/j1/cand.text_only.shard-1-of-2.parquet"), pid=sleeper.pid)
    refused(world, expect, "judge", "--config", cfg, named=[f"pid {sleeper.pid}", "shard-1-of-2"])
    refused(world, expect, "judge", "--config", cfg, "--shard", "0/3", named=[f"pid {sleeper.pid}"])
    # The same layout's other shard is the array's sibling task: it runs beside it.
    expect(0, "judge", "--config", cfg, "--shard", "0/2", inputs_change=True)


# ---------------------------------------------------------------- import adds only what is not there

def test_importing_a_sharded_runs_own_export_changes_nothing(world, expect):
    cfg = world.config(judges=JUDGES[:1])
    expect(0, "generate", "--config", cfg, inputs_change=True)
    for shard in ("0/2", "1/2"):
        expect(0, "judge", "--config", cfg, "--shard", shard, inputs_change=True)
    expect(0, "verdicts", "export", "run", "--out", "all.jsonl", inputs_change=True)
    before = tree(world.root)
    expect(0, "verdicts", "import", "all.jsonl", "--into", "run", named=["0 verdicts imported"], inputs_change=True)
    assert tree(world.root) == before  # no unsharded unit beside the shards, no lock left
    expect(0, "score-run", "--config", cfg, inputs_change=True)


def test_a_new_verdict_goes_into_the_shard_unit_that_holds_its_question(world, expect):
    cfg = world.config(judges=JUDGES[:1])
    expect(0, "generate", "--config", cfg, inputs_change=True)
    for shard in ("0/2", "1/2"):
        expect(0, "judge", "--config", cfg, "--shard", shard, inputs_change=True)
    shards = sorted((world.root / "run/verdicts/j1").glob("*.shard-*.parquet"))
    qid = keys([shards[1]])[0][0]
    world.write_jsonl(world.root / "new.jsonl", [
        {"question_id": qid, "model": "cand", "variant": "text_only", "judge": "j1", "check_id": c,
         "tier": "context", "verdict": "meets"} for c in ("c7", "c8", "c9")])
    expect(0, "verdicts", "import", "new.jsonl", "--into", "run", named=["3 verdicts imported"], inputs_change=True)
    assert sorted((world.root / "run/verdicts/j1").iterdir()) == shards  # no unsharded unit beside them
    assert len(keys([shards[1]])) == 6 + 3 and len(set(keys([shards[1]]))) == 9


def _human(path: Path, rows: list[tuple]) -> Path:
    """A person's verdicts: (question, check, verdict, revision) rows, in file (time) order."""
    tiers = {c["check_id"]: c["tier"] for c in CHECKS}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"question_id": q, "model": "cand", "variant": "text_only",
                                        "judge": "human-ann", "check_id": c, "tier": tiers[c],
                                        "verdict": v, "revision": r}) + "\n" for q, c, v, r in rows))
    return path


def _last(path: Path) -> dict[tuple, str]:
    out = {}
    for line in path.read_text().splitlines():
        r = json.loads(line)
        out[(r["question_id"], r["check_id"])] = r["verdict"]
    return out


HUMAN = Path("run/verdicts/human-ann/cand.text_only.jsonl")


def test_importing_a_human_file_twice_adds_it_once(world, expect):
    judged(world, expect)
    src = _human(world.root / "h.jsonl", [("q1", "c1", "meets", 1), ("q2", "c1", "missing", 1)])
    expect(0, "verdicts", "import", src, "--into", "run", named=["2 verdicts imported"], inputs_change=True)
    before = tree(world.root)
    expect(0, "verdicts", "import", src, "--into", "run", named=["0 verdicts imported"], inputs_change=True)
    assert tree(world.root) == before
    assert len((world.root / HUMAN).read_text().splitlines()) == 2


def test_an_older_human_file_never_brings_back_a_changed_verdict(world, expect):
    judged(world, expect)
    # The person judged q1/c1 `meets`, then changed it to `missing` (revision 2), in the viewer.
    _human(world.root / HUMAN, [("q1", "c1", "meets", 1), ("q2", "c1", "meets", 1), ("q1", "c1", "missing", 2)])
    old = _human(world.root / "old.jsonl", [("q1", "c1", "meets", 1), ("q2", "c1", "meets", 1)])
    before = tree(world.root)
    expect(0, "verdicts", "import", old, "--into", "run", named=["0 verdicts imported"], inputs_change=True)
    assert tree(world.root) == before and _last(world.root / HUMAN)[("q1", "c1")] == "missing"
    # A file with revisions the run lacks adds exactly those, newest last: the newer one wins.
    newer = _human(world.root / "newer.jsonl", [("q1", "c1", "meets", 1), ("q1", "c1", "missing", 2),
                                                ("q1", "c1", "contradicts", 3), ("q3", "c2", "meets", 1)])
    expect(0, "verdicts", "import", newer, "--into", "run", named=["2 verdicts imported"], inputs_change=True)
    assert _last(world.root / HUMAN) == {("q1", "c1"): "contradicts", ("q2", "c1"): "meets", ("q3", "c2"): "meets"}
    expect(0, "verdicts", "import", newer, old, "--into", "run", named=["0 verdicts imported"], inputs_change=True)


def test_a_human_verdict_without_a_revision_is_added_only_to_a_cell_not_held(world, expect):
    judged(world, expect)
    _human(world.root / HUMAN, [("q1", "c1", "missing", 1)])
    src = world.write_jsonl(world.root / "norev.jsonl", [
        {"question_id": q, "model": "cand", "variant": "text_only", "judge": "human-ann", "check_id": "c1",
         "tier": "answer_critical", "verdict": "meets"} for q in ("q1", "q2")])
    out = expect(0, "verdicts", "import", src, "--into", "run", named=["1 verdicts imported"], inputs_change=True)
    assert "q1" in out and _last(world.root / HUMAN) == {("q1", "c1"): "missing", ("q2", "c1"): "meets"}


def test_of_many_takers_of_a_stale_lock_at_once_exactly_one_holds_it(tmp_path):
    """A dead holder's lock, and four processes that find it at the same instant: each may
    remove it, but only one may then hold the task (the others are refused, naming it)."""
    unit = tmp_path / "verdicts" / "j" / "m.text_only.parquet"
    unit.parent.mkdir(parents=True)
    task_lock.lock_path(unit).write_text(json.dumps({"host": socket.gethostname(), "pid": _dead_pid()}))
    go = tmp_path / "go"
    code = f"""
import sys, time
from pathlib import Path
from gamut_local.errors import InputError
from gamut_local.rundir import task_lock
while not Path({str(go)!r}).exists():
    time.sleep(0.001)
try:
    with task_lock.hold([Path({str(unit)!r})]):
        print("held", flush=True)
        time.sleep(3)
except InputError as e:
    print("refused", e, flush=True)
"""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])}
    takers = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
              for _ in range(4)]
    time.sleep(3)  # every taker started and waiting
    go.touch()
    outs = [t.communicate(timeout=120)[0] for t in takers]
    assert sorted(o.split()[0] for o in outs) == ["held", "refused", "refused", "refused"], outs
    holder = takers[[o.startswith("held") for o in outs].index(True)].pid
    assert all(f"pid {holder}" in o for o in outs if o.startswith("refused")), outs
    assert not task_lock.lock_path(unit).exists()


def test_an_old_runs_own_shard_file_moves_into_its_own_shard_unit_however_spelled(world, expect):
    """An old run's JSONL of shard 0 (named by an absolute path, the run by a relative one):
    its verdicts move into that shard's unit, not beside it, and none is taken as held by
    the very file they come from."""
    cfg = world.config(judges=JUDGES[:1])
    expect(0, "generate", "--config", cfg, inputs_change=True)
    for shard in ("0/2", "1/2"):
        expect(0, "judge", "--config", cfg, "--shard", shard, inputs_change=True)
    unit = world.root / "run/verdicts/j1/cand.text_only.shard-0-of-2.parquet"
    old = unit.with_suffix(".jsonl")
    expect(0, "verdicts", "export", unit, "--out", world.root / "old.jsonl", inputs_change=True)
    os.replace(world.root / "old.jsonl", old)
    want = sorted(keys([unit]))
    unit.unlink()
    expect(0, "verdicts", "import", old.resolve(), "--into", "run", named=[f"{len(want)} verdicts imported"],
           inputs_change=True)
    assert sorted(keys([unit])) == want and not old.exists() and old.with_name(old.name + ".imported").exists()
    assert sorted(p.name for p in unit.parent.iterdir()) == [
        "cand.text_only.shard-0-of-2.jsonl.imported", unit.name, "cand.text_only.shard-1-of-2.parquet"]
    expect(0, "score-run", "--config", cfg, inputs_change=True)


# ---------------------------------------------------------------- the viewer's human verdicts

_VIEWER_PROCESS = """
import json, sys, time
from pathlib import Path
from starlette.testclient import TestClient
from gamut_local.viewer.app import create_app
from gamut_local.viewer.index import open_run
run, go, cells, n, pace = Path(sys.argv[1]), Path(sys.argv[2]), json.loads(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
client = TestClient(create_app(open_run(run), annotator="ann"), base_url="http://127.0.0.1:8765")
print("ready", flush=True)
while not go.exists():
    time.sleep(0.001)
for k in range(n):
    for cell in cells:
        res = client.post("/api/verdicts", json={**cell, "verdict": ("meets", "missing")[k % 2]})
        assert res.status_code == 200, res.text
        print(json.dumps(res.json()["record"]["revision"]), flush=True)
        time.sleep(pace)
"""

_IMPORT_PROCESS = """
import sys, time
from pathlib import Path
from gamut_local.data.verdict_io import import_files
from gamut_local.data.verdict_table import read_verdicts  # imported before the start, not during it
run, go, files = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:]
print("ready", flush=True)
while not go.exists():
    time.sleep(0.001)
for f in files:
    import_files([Path(f)], run)
"""


TIER: dict[str, str] = {}  # check id -> tier, of the cells `_viewer_run` gives


def _viewer_run(tmp_path):
    """The bundled sample (no model) and a viewer over it for annotator `ann`, opened now."""
    from starlette.testclient import TestClient

    from tests.support.sample_run import build_sample_run
    from gamut_local.viewer.app import create_app
    from gamut_local.viewer.index import open_run

    run = build_sample_run(tmp_path / "run", seed=0)
    client = TestClient(create_app(open_run(run), annotator="ann"), base_url="http://127.0.0.1:8765")
    # Two cells of one system, so of one file of the person's.
    cells = [client.get("/api/queue", params={"pos": k}).json() for k in (1, 2)]
    assert len({(c["model"], c["variant"]) for c in cells}) == 1, cells
    TIER.update({c["check_id"]: c["tier"] for c in cells})
    return run, client, [{k: c[k] for k in ("question_id", "model", "variant", "check_id")} for c in cells]


def _person_file(run: Path, cell: dict) -> Path:
    return run / "verdicts" / "human-ann" / f"{cell['model']}.{cell['variant']}.jsonl"


def _a_persons_file(path: Path, rows: list[tuple[dict, str, int]]) -> Path:
    """Verdicts by human-ann as (cell, verdict, revision) rows, the way an export holds them."""
    path.write_text("".join(json.dumps({**c, "judge": "human-ann", "tier": TIER[c["check_id"]], "verdict": v,
                                        "revision": r}) + "\n" for c, v, r in rows))
    return path


def _revisions(path: Path, cell: dict) -> list[int]:
    """The revisions of `cell`'s verdicts in the person's file, in file (time) order."""
    recs = [json.loads(line) for line in path.read_text().splitlines()]
    return [r["revision"] for r in recs if all(r[k] == cell[k] for k in cell)]


def _python(code: str, *argv) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])}
    return subprocess.Popen([sys.executable, "-c", code, *map(str, argv)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def _started_together(procs, go: Path) -> list[str]:
    """Start `procs` (each prints `ready` once it is set up) at one instant; their outputs."""
    try:
        for p in procs:
            assert p.stdout.readline().strip() == "ready", p.communicate(timeout=120)[0]
        go.touch()
        outs = [p.communicate(timeout=300)[0] for p in procs]
    finally:
        for p in procs:
            p.kill()
    assert all(p.returncode == 0 for p in procs), outs
    return outs


def test_a_viewer_write_after_an_import_numbers_from_the_file_not_from_its_start(tmp_path, gamut):
    """The viewer read the run before an import of the person's own verdicts (revisions 1
    and 2 of a cell, and 1 of a cell it has judged since): its next verdicts on those cells
    are revisions 3 and 2, never a number the file holds, and it shows what was imported."""
    run, client, (cell, other) = _viewer_run(tmp_path)
    assert client.post("/api/verdicts", json={**other, "verdict": "meets"}).json()["record"]["revision"] == 1
    src = _a_persons_file(tmp_path / "h.jsonl", [(cell, "meets", 1), (cell, "missing", 2),
                                                 (other, "meets", 1), (other, "contradicts", 2)])
    res = gamut("verdicts", "import", src, "--into", run)
    assert res.exit_code == 0 and "3 verdicts imported" in " ".join(res.output.split()), res.output
    for c, want in ((cell, 3), (other, 3)):
        res = client.post("/api/verdicts", json={**c, "verdict": "partially_meets"})
        assert res.status_code == 200 and res.json()["record"]["revision"] == want, res.text
        assert _revisions(_person_file(run, c), c) == list(range(1, want + 1))


def test_a_viewer_shows_an_imported_verdict_once_it_writes_to_that_file(tmp_path, gamut):
    run, client, (cell, other) = _viewer_run(tmp_path)
    src = _a_persons_file(tmp_path / "h.jsonl", [(cell, "contradicts", 1)])
    assert gamut("verdicts", "import", src, "--into", run).exit_code == 0
    client.post("/api/verdicts", json={**other, "verdict": "meets"})
    got = client.get("/api/queue", params={"pos": 1}).json()
    assert got["mine"]["verdict"] == "contradicts", got


def test_a_viewer_write_waits_for_the_persons_file_lock_then_is_a_503_naming_its_holder(
        tmp_path, sleeper, monkeypatch):
    """Another process writing the person's file (an import) holds its lock: the viewer waits
    its turn like the store's short writes, then answers 503 with Retry-After, writing nothing."""
    run, client, (cell, _) = _viewer_run(tmp_path)
    path = _person_file(run, cell)
    lock = task_lock.lock_path(path)
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text(json.dumps({"host": socket.gethostname(), "pid": sleeper.pid, "started": None,
                                "since": "2025-01-01T00:00:00+00:00", "command": "gamut-local verdicts import"}))
    monkeypatch.setattr(task_lock, "WAIT", 0.5)
    t0 = time.monotonic()
    res = client.post("/api/verdicts", json={**cell, "verdict": "meets"})
    assert time.monotonic() - t0 >= 0.5
    assert res.status_code == 503 and res.headers.get("retry-after"), (res.status_code, res.text)
    assert f"pid {sleeper.pid}" in res.json()["error"] and "\n" not in res.json()["error"], res.text
    assert not path.exists()
    lock.unlink()
    res = client.post("/api/verdicts", json={**cell, "verdict": "meets"})
    assert res.status_code == 200 and _revisions(path, cell) == [1] and not lock.exists()


def test_two_viewer_processes_of_one_annotator_interleave_their_revisions(tmp_path):
    """Two viewers for one person (two tabs' servers, two machines on one share), writing the
    same two cells at once: every revision of a cell once, in file order 1, 2, 3, ..."""
    run, _, cells = _viewer_run(tmp_path)
    go = tmp_path / "go"
    outs = _started_together([_python(_VIEWER_PROCESS, run, go, json.dumps(cells), 8, 0) for _ in range(2)], go)
    for cell in cells:
        assert _revisions(_person_file(run, cell), cell) == list(range(1, 17)), outs
    assert sorted(int(x) for o in outs for x in o.split()) == sorted(list(range(1, 17)) * 2)


def test_an_import_beside_a_viewer_writing_never_reuses_a_revision(tmp_path):
    """`verdicts import` of the person's files (revisions 2, 4, ... of a cell) in one process
    while the viewer writes that cell in another: the file's revisions of the cell only grow."""
    run, client, (cell, _) = _viewer_run(tmp_path)
    files = [_a_persons_file(tmp_path / f"h{r}.jsonl", [(cell, "contradicts", r)]) for r in range(2, 22, 2)]
    go = tmp_path / "go"
    _started_together([_python(_VIEWER_PROCESS, run, go, json.dumps([cell]), 10, 0.05),
                       _python(_IMPORT_PROCESS, run, go, *files)], go)
    revs = _revisions(_person_file(run, cell), cell)
    assert len(revs) >= 10 and revs == sorted(set(revs)), revs
