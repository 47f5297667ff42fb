"""What a verdict is: one declaration of its fields (`FIELDS`: each field's kind, labels and
range), from which every check of a verdict derives.

- the strict reader's pydantic model (`data.records.Verdict`, built from `FIELDS`);
- the store's check of a record before it is written (`validate`);
- the store's check of a file's columns when read (`check_columns`: column-wise, from types,
  null counts and dictionaries), which a JSON Lines file read as columns passes too;
- the store's Arrow schema (`schema`), and records to and from it (`to_table`, `to_records`).

`tests/rundir/test_verdict_schema.py` holds the three checks to the declaration: a record
one refuses, the others refuse, naming the same field.

Strings are dictionary encoded; the four label probabilities are the fixed columns
`p_<label>` (null: no probabilities); fields outside the schema (a verdict imported from
elsewhere may have them) go into `extra`, a JSON object, so an export gives them back.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from gamut_local.errors import InputError, Problem
from gamut_local.vocab import DEFAULT_VARIANT, JUDGE_LABELS, NAME_PATTERN, TIERS, VARIANTS, VERDICTS


@dataclass(frozen=True)
class VerdictField:
    """One field of a verdict record. `kind`: "id" (a non-empty string), "name" (a non-empty
    string usable in a file name: it names result files), "choice" (one of `choices`), "text"
    (a string or null), "whole" (a 64-bit whole number or null), "probs" (an object of
    `choices` labels to probabilities in `PROBABILITY`, or null). `loose`: a verdict from
    elsewhere may hold any JSON there (the strict reader lets it through as an extra field;
    the store keeps a value not of its kind in `extra`). `coded`: a dictionary-encoded column."""

    name: str
    kind: str
    required: bool = False
    choices: tuple[str, ...] = ()
    default: str | None = None
    loose: bool = False
    coded: bool = True


FIELDS = (
    VerdictField("question_id", "id", required=True),
    VerdictField("model", "name", required=True),
    VerdictField("variant", "choice", required=True, choices=VARIANTS, default=DEFAULT_VARIANT),
    VerdictField("judge", "name", required=True),
    VerdictField("check_id", "id", required=True),
    VerdictField("tier", "choice", required=True, choices=TIERS),
    VerdictField("verdict", "choice", required=True, choices=VERDICTS),
    VerdictField("raw", "text", coded=False),
    VerdictField("probs", "probs", choices=JUDGE_LABELS),
    VerdictField("method", "text", loose=True),
    VerdictField("settings_hash", "text"),
    VerdictField("check_hash", "text"),
    VerdictField("answer_hash", "text"),
    VerdictField("prompt_tokens", "whole", loose=True),
    VerdictField("num_cached_tokens", "whole", loose=True),
    VerdictField("attempts", "whole", loose=True),
)
PROBABILITY = (0.0, 1.0)  # a label's probability: a finite number in this closed range
FIELD = {f.name: f for f in FIELDS}

SCHEMA_VERSION = 1
META_KEY = b"gamut_local.verdicts"
PROB_COLUMNS = tuple(f"p_{label}" for label in FIELD["probs"].choices)
# Fields every verdict has (strings), then the optional ones; the order of the columns.
REQUIRED = tuple(f.name for f in FIELDS if f.required)
CODED_OPTIONAL = tuple(f.name for f in FIELDS if f.kind == "text" and f.coded)
INTEGERS = tuple(f.name for f in FIELDS if f.kind == "whole")
KNOWN = tuple(FIELD)
FIXED = {f.name: f.choices for f in FIELDS if f.kind == "choice"}  # the values these columns may hold
_NAMES = tuple(f.name for f in FIELDS if f.kind == "name")  # they name files and folders
_SAFE = re.compile(NAME_PATTERN)
_LOOSE = tuple(f.name for f in FIELDS if f.loose)


def schema(meta: dict | None = None):
    """The store's Arrow schema; `meta` goes into the file's metadata beside the version."""
    import pyarrow as pa

    coded = pa.dictionary(pa.int32(), pa.string())
    fields = [pa.field(name, coded, nullable=False) for name in REQUIRED]
    fields += [pa.field("raw", pa.string())]
    fields += [pa.field(name, pa.float64()) for name in PROB_COLUMNS]
    fields += [pa.field(name, coded) for name in CODED_OPTIONAL]
    fields += [pa.field(name, pa.int64()) for name in INTEGERS]
    fields += [pa.field("extra", pa.string())]
    return pa.schema(fields, metadata={META_KEY: json.dumps({"schema_version": SCHEMA_VERSION, **(meta or {})})})


def validate(rec: dict, where: str, no: int) -> list[Problem]:
    """What is wrong with one verdict record for the store ([] if nothing)."""
    out = [Problem(where, no, name, why) for name in REQUIRED
           if (why := _required_problem(name, rec.get(name, FIELD[name].default)))]
    for name in (f.name for f in FIELDS if f.kind == "text"):
        if rec.get(name) is not None and not isinstance(rec[name], str):
            out.append(Problem(where, no, name, "must be a string or null"))
    for name in INTEGERS:
        if not _typed(name, rec.get(name)):
            out.append(Problem(where, no, name, "must be a whole number (64-bit) or null"))
    probs = rec.get("probs")
    if probs is not None:
        if not isinstance(probs, dict) or set(probs) - set(FIELD["probs"].choices):
            out.append(Problem(where, no, "probs", f"must be an object with keys from {', '.join(JUDGE_LABELS)}"))
        elif not all(isinstance(p, (int, float)) and not isinstance(p, bool) and PROBABILITY[0] <= p <= PROBABILITY[1]
                     for p in probs.values()):  # NaN is not between them either
            out.append(Problem(where, no, "probs", "must hold finite numbers from 0 to 1"))
    return out


def _required_problem(name: str, value) -> str | None:
    """What is wrong with the value of a required field (None if nothing): the one rule for
    records written (`validate`) and for files read (`check_columns`)."""
    if not isinstance(value, str) or not value:
        return "must be a non-empty string"
    if name in FIXED and value not in FIXED[name]:
        return f"{value!r} is not one of {', '.join(FIXED[name])}"
    if name in _NAMES and not _SAFE.fullmatch(value):
        return f"{value!r} cannot be used in a file name"
    return None


def _whole(value) -> bool:
    """A whole number an int64 column holds."""
    return isinstance(value, int) and not isinstance(value, bool) and -2**63 <= value < 2**63


def _typed(name: str, value) -> bool:
    if value is None:
        return True
    return _whole(value) if name in INTEGERS else isinstance(value, str)


def to_table(records: list[dict], where: str = "<verdicts>", meta: dict | None = None, *, loose: bool = False):
    """Validated verdict records as one Arrow table of the store's schema. `loose` (import:
    records from elsewhere, already read by the strict reader, which lets these optional
    fields be any JSON): an optional field of another type is kept in `extra`."""
    if loose:
        records = [_loosened(rec) for rec in records]
    problems = [p for no, rec in enumerate(records, 1) for p in validate(rec, where, no)]
    if problems:
        raise InputError(problems[:20])
    return from_records(records, meta=meta)


def checked_table(table, where: Path):
    """An Arrow table of the store's columns (a JSONL file read column-wise, `verdicts import`)
    checked as records are (`check_columns`: the same rules, column-wise) and given the
    schema's metadata: what the writer writes."""
    names = schema().names
    check_columns(table, where, names)
    return table.select(names).replace_schema_metadata(schema().metadata)


def from_records(records: list[dict], columns: list[str] | None = None, meta: dict | None = None):
    """Verdict records as an Arrow table of the store's schema, or of some of its `columns`;
    each record valid for them (`validate`; for a VerdictTable's columns, the strict reader's
    `data.records.Verdict` is as strict)."""
    import pyarrow as pa

    target = schema(meta)
    if columns is not None:
        target = pa.schema([target.field(name) for name in columns], metadata=target.metadata)
    return pa.Table.from_arrays([_column(_values(records, f.name), f.type) for f in target],
                                schema=target)


def _values(records: list[dict], name: str) -> list:
    """The records' values in the column `name` (None: null)."""
    if FIELD.get(name) and FIELD[name].default is not None:
        return [rec.get(name, FIELD[name].default) for rec in records]
    if name in PROB_COLUMNS:
        label = name.removeprefix("p_")
        return [(rec.get("probs") or {}).get(label) for rec in records]
    if name == "extra":
        return [_extra(rec) for rec in records]
    return [rec.get(name) for rec in records]


def _extra(rec: dict) -> str | None:
    extra = {k: v for k, v in rec.items() if k not in KNOWN}
    extra.update(rec.get(_MOVED) or {})
    extra.pop(_MOVED, None)
    return json.dumps(extra, ensure_ascii=False) if extra else None


def _column(values: list, kind):
    """One column of the store's schema, built through numpy (`gamut_local.arrow`):
    pyarrow's `pa.array` over Python objects imports pandas, 0.3 s of every process that
    reads a JSONL verdict file or writes the store."""
    import numpy as np
    import pyarrow as pa

    from gamut_local import arrow  # numpy: not for the listings a current report makes

    present = np.array([v is not None for v in values], dtype=bool)
    if pa.types.is_floating(kind) or pa.types.is_integer(kind):
        data = [0 if v is None else v for v in values]
        return arrow.from_numpy(np.array(data, dtype=np.float64 if pa.types.is_floating(kind) else np.int64), present)
    items = sorted({v for v in values if v is not None})
    index = {v: i for i, v in enumerate(items)}
    codes = np.array([index.get(v, -1) for v in values], dtype=np.int32)
    if pa.types.is_dictionary(kind):
        return pa.DictionaryArray.from_arrays(arrow.from_numpy(codes, present), arrow.strings(np.arange(len(items)), items))
    return arrow.strings(codes, items)


_MOVED = "\0moved"  # fields `loose` moved out of their typed column (no JSON field has this name)


def _loosened(rec: dict) -> dict:
    moved = {k: rec[k] for k in _LOOSE if not _typed(k, rec.get(k))}
    if not moved:
        return rec
    return {**{k: v for k, v in rec.items() if k not in moved}, _MOVED: moved}


# ---------------------------------------------------------------- records out

def to_records(table) -> list[dict]:
    """The store's rows as verdict records (the JSONL form: `probs` an object, extras merged)."""
    cols = {name: table.column(name).to_pylist() for name in table.column_names}
    out = []
    for i in range(table.num_rows):
        rec = {name: cols[name][i] for name in (*REQUIRED, "raw")}
        present = {label: cols[name][i] for label, name in zip(JUDGE_LABELS, PROB_COLUMNS) if cols[name][i] is not None}
        rec["probs"] = present or None
        for name in (*CODED_OPTIONAL, *INTEGERS):
            rec[name] = cols[name][i]
        if cols["extra"][i]:
            rec.update(json.loads(cols["extra"][i]))
        out.append(rec)
    return out



def meta_problem(raw: bytes | None) -> tuple[str, str] | None:
    """(field, why) if a file's metadata entry is not this version's (it names the last part a
    compacted file holds, which readers trust to count nothing twice)."""
    try:
        meta = json.loads(raw) if raw else {}
    except ValueError:  # UnicodeDecodeError is one
        meta = None
    if not isinstance(meta, dict):
        return "schema_version", f"its metadata {META_KEY.decode()!r} is not a JSON object"
    version = meta.get("schema_version")
    if version != SCHEMA_VERSION or isinstance(version, bool):
        return "schema_version", ("has no verdict-store schema version" if version is None else
                                  f"has verdict-store schema version {version!r}; this gamut-local reads "
                                  f"version {SCHEMA_VERSION}")
    through = meta.get("through_part", 0)
    if not isinstance(through, int) or isinstance(through, bool) or through < 0:
        return "through_part", f"{through!r} is not a part number (a whole number, 0 or more)"
    return None



def check_columns(table, path: Path, names) -> None:
    """The writer's rules checked again on what a file holds: a file of this schema version
    may have been rewritten since by another tool (pyarrow keeps the metadata), and readers
    trust every value of a file they accept. Column-wise: the types, and each required column
    (`_required_problem`) through its null count and its dictionary (ids by their lengths
    alone); the rows are looked at only to name the first that holds a bad value."""
    from gamut_local import arrow

    expected, problems = schema(), []
    hint = "; verdicts from elsewhere come in by `gamut-local verdicts import`"
    for name in names:
        want = expected.field(name).type
        if name not in table.column_names:
            problems.append(Problem(str(path), None, name, f"no such column, which the store's schema has{hint}"))
        elif (got := table.schema.field(name).type) != want:
            problems.append(Problem(str(path), None, name, f"a column of type {got}, not the store's {want}{hint}"))
        elif name in REQUIRED or name in PROB_COLUMNS:
            array = arrow.whole(table.column(name))
            rows = _bad_rows(array, name) if name in REQUIRED else _not_finite(array)
            problems += [Problem(str(path), row, name, why) for row, why in rows]
    if problems:
        raise InputError(problems[:20])


def _bad_rows(array, name: str) -> list[tuple[int, str]]:
    """(row from 1, why) of the first row of each bad value of a dictionary array (a null first)."""
    import numpy as np

    values = array.dictionary
    if name in FIXED or name in _NAMES:
        bad = {k: why for k, v in enumerate(values.to_pylist()) if (why := _required_problem(name, v))}
    else:  # an id breaks the rule only by being empty: seen in the offsets, not value by value
        offsets = np.frombuffer(values.buffers()[1], dtype=np.int32)[values.offset:values.offset + len(values) + 1]
        bad = {int(k): _required_problem(name, "") for k in np.flatnonzero(offsets[1:] == offsets[:-1])}
    if not bad and not array.null_count:
        return []
    codes = array.indices.to_pylist()  # only for a bad file: the rows that hold what is wrong
    firsts = {k: codes.index(k) for k in [None, *bad] if k in codes}
    return [(row + 1, bad.get(k) or _required_problem(name, None))
            for k, row in sorted(firsts.items(), key=lambda kv: kv[1])]


def _not_finite(array) -> list[tuple[int, str]]:
    """(row from 1, why) of the first probability that is not a number from 0 to 1 (nulls aside)."""
    import numpy as np

    from gamut_local import arrow

    values = arrow.floats(array)
    with np.errstate(invalid="ignore"):
        bad = ~((values >= PROBABILITY[0]) & (values <= PROBABILITY[1])) & arrow.valid(array)  # NaN is neither
    return [(int(np.argmax(bad)) + 1, "must be a finite number from 0 to 1, or null")] if bad.any() else []
