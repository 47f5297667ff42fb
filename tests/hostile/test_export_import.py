"""`export` and `import`: the YAML an export writes (the plain safe dumper's text, value by
value), the round trip to the same bytes, the export's durability (on disk when it says so,
nothing left by a failure half way), and `import` refusing a repeated key or an alias bomb
with a message naming the file."""

from __future__ import annotations

import json
import os

import pytest
import yaml

from tests.hostile.odd_texts import ODD_TEXTS, odd_record


def test_odd_texts_export_and_import_to_the_same_bytes(tmp_path):
    from gamut_local.stages.revise import export_dataset, import_dir

    src = tmp_path / "odd.jsonl"
    src.write_text("".join(json.dumps(odd_record(k), ensure_ascii=False, sort_keys=True,
                                      separators=(",", ":")) + "\n" for k in range(len(ODD_TEXTS))))
    export_dataset(src, tmp_path / "yaml")
    import_dir(tmp_path / "yaml", tmp_path / "back.jsonl")
    assert (tmp_path / "back.jsonl").read_bytes() == src.read_bytes()


@pytest.mark.parametrize("folder_exists", [False, True])
def test_an_export_is_on_disk_when_it_says_so(tmp_path, monkeypatch, folder_exists):
    """Every file's bytes are on disk (one sync) before the first rename (a crash leaves them
    whole or absent) and the folder is fsynced after the last rename (so the names last too).
    A new folder is written whole under another name and renamed once; into an existing one,
    each file is renamed from the temporary folder."""
    from gamut_local.stages import revise

    events = []
    real_fsync, real_replace, real_sync = os.fsync, os.replace, os.sync
    monkeypatch.setattr(os, "fsync", lambda fd: (events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}"))),
                                                 real_fsync(fd))[1])
    monkeypatch.setattr(os, "replace", lambda a, b: (events.append(("replace", str(a), str(b))), real_replace(a, b))[1])
    monkeypatch.setattr(os, "sync", lambda: (events.append(("sync",)), real_sync())[1])
    src = tmp_path / "d.jsonl"
    src.write_text("".join(json.dumps(odd_record(k)) + "\n" for k in range(5)))
    folder = tmp_path / "yaml"
    if folder_exists:
        folder.mkdir()
    paths = revise.export_dataset(src, folder)
    assert len(paths) == 5 and sorted(folder.iterdir()) == paths
    kinds = [e[0] for e in events]
    renames = [i for i, k in enumerate(kinds) if k == "replace"]
    assert kinds.count("sync") == 1 and kinds.index("sync") < renames[0]
    assert len(renames) == (5 if folder_exists else 1)
    after = [e[1] for e in events[renames[-1]:] if e[0] == "fsync"]
    assert str(folder) in after and str(tmp_path) in after  # the names in the folder, the folder in its parent


@pytest.mark.parametrize("folder_exists", [False, True])
def test_an_export_that_fails_half_way_leaves_nothing(tmp_path, monkeypatch, folder_exists):
    """Into a new folder (written whole beside it, then renamed) nothing is left, neither the
    folder nor its temporary; into an existing one, no file (one temporary file each)."""
    from gamut_local.stages import revise

    real = revise.export_text

    def fail_on_the_third(rec, q, source):
        if rec["question_id"] == "q2":
            raise OSError(28, "No space left on device")
        return real(rec, q, source)

    monkeypatch.setattr(revise, "export_text", fail_on_the_third)
    src = tmp_path / "d.jsonl"
    src.write_text("".join(json.dumps(odd_record(k)) + "\n" for k in range(5)))
    if folder_exists:
        (tmp_path / "yaml").mkdir()
    with pytest.raises(OSError):
        revise.export_dataset(src, tmp_path / "yaml")
    assert sorted(p.name for p in tmp_path.iterdir()) == (["d.jsonl", "yaml"] if folder_exists else ["d.jsonl"])
    assert not folder_exists or list((tmp_path / "yaml").iterdir()) == []


def test_import_refuses_a_key_given_twice_with_its_line(world, expect, exported):
    first = sorted(exported.glob("*.yaml"))[0]
    first.write_text(first.read_text() + "domain: other\n")
    out = world.root / "rev.jsonl"
    expect(1, "import", exported, "--out", out, named=[first.name, "'domain' appears twice"])
    assert not out.exists()


def test_import_refuses_an_alias_bomb(world, expect, exported):
    first = sorted(exported.glob("*.yaml"))[0]
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n" for p, c in zip("abcdef", "bcdefg"))
    first.write_text(first.read_text() + bomb)
    expect(1, "import", exported, "--out", world.root / "rev.jsonl", named=[first.name, "through its aliases"])
