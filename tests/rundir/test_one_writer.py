"""One atomic writer: `rundir.store.atomic_file` (and `write_folder_atomic` for a folder of
new files) is where a file is made whole and renamed into place. Any other rename or
temporary file in `gamut_local/` is a second writer, unless it is listed here with why."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gamut_local.rundir import store

PACKAGE = Path(__file__).resolve().parents[2] / "gamut_local"
# A rename, or a temporary file made by hand: how a writer puts a whole file in place.
WRITER_CALLS = re.compile(r"\bos\.(replace|rename)\(|\.rename\(|\bmkstemp\(|\bNamedTemporaryFile\(|shutil\.move\(")

ALLOWED = {
    "rundir/store.py": "the writer itself",
    # A lock is made by linking a whole temporary file, never by renaming over another.
    "rundir/task_lock.py": "the task lock's link",
    # Moves a file the import has read, to mark it done; writes nothing.
    "data/verdict_io.py": "marks an imported file",
    # Moves the report's outputs, each written by the writer, from their staging folder.
    "stages/report.py": "the report's commit of written files",
    # Test support: a model folder saved by transformers, renamed into the cache.
    "demo/smollm2.py": "a saved model folder",
}


def _calls() -> dict[str, list[int]]:
    found: dict[str, list[int]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if WRITER_CALLS.search(line.split("#", 1)[0]):
                found.setdefault(path.relative_to(PACKAGE).as_posix(), []).append(no)
    return found


def test_whole_files_are_put_in_place_by_the_store_alone():
    others = {f"{name}:{lines}" for name, lines in _calls().items() if name not in ALLOWED}
    assert not others, f"renames or temporary files outside rundir/store.py: {sorted(others)}"


def test_every_allowed_module_still_needs_its_place():
    """An entry left behind once its module calls the store would let a writer back in."""
    assert sorted(set(ALLOWED) - set(_calls())) == []


def test_the_search_finds_a_writer(tmp_path):
    assert WRITER_CALLS.search("    os.replace(tmp, path)") and WRITER_CALLS.search("tmp.rename(dest)")
    assert not WRITER_CALLS.search('text.replace("a", "b")')


@pytest.mark.parametrize("exists", [False, True])
def test_a_file_is_fsynced_renamed_and_its_folder_fsynced(tmp_path, monkeypatch, exists):
    """Whole or nothing: the bytes are on disk before the rename, the folder after it."""
    import os

    path = tmp_path / "out.json"
    if exists:
        path.write_text("old")
    events = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: (events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}"))),
                                                 real_fsync(fd))[1])
    monkeypatch.setattr(os, "replace", lambda a, b: (events.append(("replace", str(a))), real_replace(a, b))[1])
    store.write_text_atomic(path, "new")
    (_, tmp), (kind, _), (_, folder) = events[0], events[1], events[2]
    assert events[0][0] == "fsync" and kind == "replace" and events[1][1] == tmp and events[2] == ("fsync", folder)
    assert folder == str(tmp_path) and path.read_text() == "new" and os.listdir(tmp_path) == ["out.json"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "out.json"
    path.write_text("old")
    with pytest.raises(RuntimeError), store.atomic_file(path) as f:
        f.write(b"half")
        raise RuntimeError("disk full")
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["out.json"]


def test_a_folder_never_takes_a_name_it_holds(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "b.yaml").write_text("mine")
    with pytest.raises(FileExistsError):
        store.write_folder_atomic(tmp_path / "out", [("a.yaml", b"a"), ("b.yaml", b"b")])
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["b.yaml"]
    assert (tmp_path / "out" / "b.yaml").read_text() == "mine" and sorted(p.name for p in tmp_path.iterdir()) == ["out"]
