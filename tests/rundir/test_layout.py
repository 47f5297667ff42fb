"""The run directory's file names and shards."""

from __future__ import annotations

import pytest

from gamut_local.errors import InputError
from gamut_local.rundir.layout import (
    Shard,
    answer_files,
    answers_path,
    check_name,
    parse_shard,
    scores_path,
    verdict_files,
    verdict_siblings,
    verdicts_path,
)


def test_shards_partition_the_questions_the_same_way_in_any_order():
    ids = [f"q{k:03d}" for k in range(50)]
    picked = [Shard(i, 4).select(ids) for i in range(4)]
    assert set().union(*picked) == set(ids) and sum(map(len, picked)) == len(ids)
    assert Shard(1, 4).select(list(reversed(ids))) == picked[1] == {ids[k] for k in range(1, 50, 4)}
    assert parse_shard("1/4") == Shard(1, 4) and parse_shard(None) == Shard()
    assert Shard(1, 4).suffix == ".shard-1-of-4" and Shard().suffix == ""
    for bad in ("4/4", "-1/2", "1", "a/b", "0/0"):
        with pytest.raises(InputError):
            parse_shard(bad)


def test_a_pilot_limit_takes_the_first_questions_by_id_then_shards_them():
    ids = [f"q{k:02d}" for k in range(20)]
    shuffled = ids[7:] + ids[:7]
    assert parse_shard(None, 5).select(shuffled) == set(ids[:5])
    assert parse_shard("1/2", 5).select(shuffled) == {"q01", "q03"}
    assert parse_shard(None, 50).select(ids) == set(ids) and parse_shard("0/1", None).select(ids) == set(ids)
    assert parse_shard(None, 5).suffix == ""  # a pilot writes the files the full run resumes from
    with pytest.raises(InputError, match="--limit: <record>: expected a number of questions >= 1, got 0"):
        parse_shard(None, 0)


def test_paths_follow_the_documented_layout(tmp_path):
    assert answers_path(tmp_path, "m", "text_only") == tmp_path / "answers" / "m.text_only.jsonl"
    assert verdicts_path(tmp_path, "j", "m", "multimodal", Shard(0, 2)) == \
        tmp_path / "verdicts" / "j" / "m.multimodal.shard-0-of-2.jsonl"
    assert scores_path(tmp_path) == tmp_path / "scores" / "scores.json"


def test_siblings_are_the_unsharded_file_and_every_shard(tmp_path):
    for shard in (Shard(), Shard(0, 2), Shard(1, 2)):
        path = answers_path(tmp_path, "m", "multimodal", shard)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")
    answers_path(tmp_path, "other", "multimodal").write_text("")
    assert [p.name for p in answer_files(tmp_path, "m", "multimodal")] == [
        "m.multimodal.jsonl", "m.multimodal.shard-0-of-2.jsonl", "m.multimodal.shard-1-of-2.jsonl"]
    only_shard = verdicts_path(tmp_path, "j", "m", "text_only", Shard(1, 3))
    only_shard.parent.mkdir(parents=True)
    only_shard.write_text("")
    assert verdict_siblings(tmp_path, "j", "m", "text_only") == [only_shard]
    assert verdict_files(tmp_path) == [only_shard] and verdict_files(tmp_path, "other-judge") == []


@pytest.mark.parametrize("name", ["qwen3-vl-8b", "Qwen3_VL.8B+ft", "a"])
def test_safe_names_pass(name):
    check_name(name, "models", "run.yaml")


@pytest.mark.parametrize("name", ["../x", "a/b", ".hidden", "", "a b", "-rf", "x\x00"])
def test_names_that_would_escape_or_confuse_a_path_are_refused(name):
    with pytest.raises(InputError, match="run.yaml: models: .* cannot be used in a file name"):
        check_name(name, "models", "run.yaml")
