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


def test_export_text_is_what_one_emitter_call_per_value_wrote():
    """Export dumps a question's items in one call with its own node builder; the text is the
    plain safe dumper's, value by value."""
    from gamut_local.rubric import revision

    base = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

    def plain(value, indent):
        text = yaml.dump(value, Dumper=base, sort_keys=False, allow_unicode=True, width=revision.WIDTH,
                         default_flow_style=False)
        return "".join(" " * indent + line if line.strip() else line for line in text.splitlines(keepends=True))

    for k in range(len(ODD_TEXTS)):
        rec = odd_record(k)
        items = [revision._readable(i) for i in rec["meta_rubric"]["items"]]
        assert revision._dump_each(items, 2) == [plain([i], 2) for i in items]
        assert revision._dump(rec, 0) == plain(rec, 0)
        keys = {key: rec[key] for key in ("question_id", "domain", "question")}
        assert revision._dump(keys, 0) == "".join(plain({key: v}, 0) for key, v in keys.items())


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
    """Every file's bytes are fsynced before its rename (a crash leaves it whole or absent)
    and the folder after the last rename (so the names last too); before, nothing was. A new
    folder is written whole under another name and renamed once, after its files and itself
    were fsynced; into an existing one, each file is renamed from a temporary file."""
    from gamut_local.stages import revise

    events = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: (events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}"))),
                                                 real_fsync(fd))[1])
    monkeypatch.setattr(os, "replace", lambda a, b: (events.append(("replace", str(a), str(b))), real_replace(a, b))[1])
    src = tmp_path / "d.jsonl"
    src.write_text("".join(json.dumps(odd_record(k)) + "\n" for k in range(5)))
    folder = tmp_path / "yaml"
    if folder_exists:
        folder.mkdir()
    paths = revise.export_dataset(src, folder)
    assert len(paths) == 5 and sorted(folder.iterdir()) == paths
    synced = [e[1] for e in events if e[0] == "fsync"]
    renames = [i for i, e in enumerate(events) if e[0] == "replace"]
    for i in renames:
        assert events[i][1] in synced[:i], f"{events[i][1]} renamed before it was fsynced"
    assert len(renames) == (5 if folder_exists else 1)
    assert str(folder) in [e[1] for e in events[renames[-1]:] if e[0] == "fsync"]
    assert folder_exists or str(tmp_path) in synced  # the folder was new: its name is in its parent


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
