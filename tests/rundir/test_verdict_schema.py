"""One declaration of a verdict (`rundir.verdict_schema.FIELDS`) and the three checks that
derive from it: the strict reader's model (`data.records.Verdict`), the store's record check
(`validate`) and its column check (`check_columns`, which a JSONL file read as columns passes
too). A rule changed in one and not the others fails here."""

import math

import pytest
from pydantic import ValidationError

from gamut_local.data.records import Verdict
from gamut_local.errors import InputError
from gamut_local.rundir import verdict_schema as vs

GOOD = {"question_id": "q1", "model": "m", "variant": "multimodal", "judge": "j", "check_id": "c1",
        "tier": "answer_critical", "verdict": "meets", "raw": "meets",
        "probs": {"meets": 0.9, "partially_meets": 0.05, "missing": 0.03, "contradicts": 0.02},
        "settings_hash": "abc", "check_hash": "def", "answer_hash": "ghi"}


def _bad_values(field: vs.VerdictField) -> list:
    """Values the declaration refuses for a field, of the field's own type (so that a column
    of the store's schema can hold them and the column check must look at the values)."""
    if field.kind == "choice":
        return ["", "nope", field.choices[0].upper()]
    return {"id": [""], "name": ["", "a/b", "..", "x y"],
            "probs": [{"meets": 1.5}, {"meets": -0.1}, {"meets": math.nan}, {"meets": math.inf}],
            }.get(field.kind, [])


CASES = [(f.name, bad) for f in vs.FIELDS for bad in _bad_values(f)]


def test_the_pydantic_model_declares_exactly_the_strict_fields():
    strict = {f.name for f in vs.FIELDS if not f.loose}
    assert set(Verdict.model_fields) == strict
    for f in vs.FIELDS:
        if f.name in strict:
            assert Verdict.model_fields[f.name].is_required() == (f.required and f.default is None), f.name
    assert Verdict.model_fields["variant"].default == vs.FIELD["variant"].default


def test_every_rule_of_the_declaration_has_a_refused_value():
    kinds = {f.kind for f in vs.FIELDS if f.required or f.kind == "probs"}
    assert kinds <= {f.kind for f in vs.FIELDS if _bad_values(f)}


@pytest.mark.parametrize("record", [GOOD, {**GOOD, "probs": None, "raw": None},
                                    {**GOOD, "variant": "text_only", "verdict": "invalid", "probs": {"missing": 1}}])
def test_a_good_record_passes_all_three(record, tmp_path):
    assert Verdict.model_validate(record).model_dump()["check_id"] == "c1"
    assert vs.validate(record, "f", 1) == []
    vs.check_columns(vs.from_records([record]), tmp_path / "f", vs.schema().names)


@pytest.mark.parametrize(("name", "bad"), CASES, ids=[f"{n}={b!r}" for n, b in CASES])
def test_a_value_one_check_refuses_all_three_refuse_naming_the_field(name, bad, tmp_path):
    record = {**GOOD, name: bad}
    with pytest.raises(ValidationError) as e:
        Verdict.model_validate(record)
    assert {err["loc"][0] for err in e.value.errors()} == {name}
    assert {p.field for p in vs.validate(record, "f", 1)} == {name}
    column = vs.PROB_COLUMNS if name == "probs" else (name,)
    with pytest.raises(InputError) as e:
        vs.check_columns(vs.from_records([GOOD, record]), tmp_path / "f", vs.schema().names)
    assert [(p.field, p.line) for p in e.value.problems] == [(c, 2) for c in column
                                                             if c[2:] in bad or c == name]


@pytest.mark.parametrize("name", vs.REQUIRED)
def test_a_required_field_missing_or_null_is_refused_by_all_three(name, tmp_path):
    for record in ({k: v for k, v in GOOD.items() if k != name}, {**GOOD, name: None}):
        if name == "variant" and name not in record:
            continue  # absent: the declared default
        with pytest.raises(ValidationError):
            Verdict.model_validate(record)
        assert {p.field for p in vs.validate(record, "f", 1)} == {name}
        if name in record:  # a null in a required column
            with pytest.raises(InputError) as e:
                vs.check_columns(vs.from_records([GOOD, record]), tmp_path / "f", vs.schema().names)
            assert [(p.field, p.line) for p in e.value.problems] == [(name, 2)]
