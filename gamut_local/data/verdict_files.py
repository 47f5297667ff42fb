"""One verdict file as columns: read with pyarrow and checked column-wise, or taken from the
columnar cache of a file with the same content.

`read_file_columns` reads the file's bytes once (into a buffer each thread reuses: fresh
`bytes` cost their page faults, 0.6 CPU-s per GB against 0.16), hashes them, and looks the hash up in
the cache (`$GAMUT_LOCAL_CACHE/verdict-tables/`, by default `~/.cache/gamut-local/...`). A
miss parses the bytes with pyarrow's JSON reader and checks each column: strings non-empty,
names safe, labels and tiers from the vocabulary, `probs` an object of numbers, one record
per line. A file that passes goes into the cache, keyed by the sha256 of its bytes: the checks
depend on nothing but those bytes, so an entry can never be stale, and a hit repeats the
checks on its (small) dictionaries; past CACHE_MAX_BYTES the least recently used entries go
(`prune_cache`). Anything the columns cannot vouch for returns None, and
the caller reads the files record by record (`verdict_table.read_verdicts_reference`), whose
messages name FILE:LINE: field.

A file bigger than PIECE_BYTES (16 MB; the judge stage's files are ~12 MB at paper scale) is
read in pieces cut after a newline: hashed, then, on a cache miss, read again, parsed and
checked piece by piece as files of their own and merged (its bytes hashed again, to be sure
they are the ones looked up; with the cache off, that one pass is all). So memory stays bounded whatever the layout: three judges' 338 MB
files read together peaked at 2.1 GB whole, 0.58 GB in pieces.

A file already hashed is not even read while its stat (size, mtime, ctime, inode) is what
it was then: its hash is remembered under `stat/` in the cache (git's index does the same,
and `current_record` trusts size and mtime for the outputs' inputs). That saves reading and
hashing every byte: a warm read of a paper-scale run takes 0.34 s (0.43 CPU-s) against 0.95 s
(1.5 CPU-s).

Checks that span files (a key in two files, one judge under two settings) are the table's
(`verdict_table`), made on every read, cached or not.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from stat import S_ISREG

import numpy as np

from gamut_local.data import arrow
from gamut_local.rundir.store import cache_dir, write_bytes_atomic
from gamut_local.vocab import JUDGE_LABELS, NAME_PATTERN, TIERS, VARIANTS, VERDICTS

STRING_FIELDS = ("question_id", "model", "variant", "judge", "check_id", "tier", "verdict")
# The identity hashes (rundir.identity) may be absent (code -1): records made before them, hand-made ones.
IDENTITY_FIELDS = ("settings_hash", "check_hash", "answer_hash")
CODED_FIELDS = (*STRING_FIELDS, *IDENTITY_FIELDS)
# The dictionary each string field is checked against; the vocabularies are fixed.
FIXED = {"variant": VARIANTS, "tier": TIERS, "verdict": VERDICTS}
SAFE_NAMES = ("model", "judge")  # names that become file names (`records.SafeName`)
_SAFE = re.compile(NAME_PATTERN)
# Bigger blocks than pyarrow's 1 MB default: a paper-scale file (12 MB) is one block, with no
# per-block type unification.
BLOCK_SIZE = 16 << 20
# A bigger file is hashed, then parsed, in pieces of at most this (see above); each piece is
# one pyarrow block (one judge's 338 MB file: 3.6 CPU-s in pieces against 4.6-5.5 whole).
PIECE_BYTES = BLOCK_SIZE
PIECE_THREADS = min(4, os.cpu_count() or 1)  # pieces parsed side by side when few files are read
# Bump when what a cache entry holds, or what it vouches for, changes.
CACHE_VERSION = 2  # 2: check_hash and answer_hash columns
# Beyond this, the least recently used entries go (a paper-scale run's entries: ~0.14 GB).
CACHE_MAX_BYTES = 2 << 30
# Remembered hashes of unchanged files (~0.3 KB each, one per verdict file read).
MAX_KNOWN_HASHES = 20_000
# A file changed less than this before it was hashed is hashed again on its next read.
RACY_NS = 2_000_000_000
_SHA256 = re.compile("[0-9a-f]{64}")
_BUFFERS = threading.local()


@dataclass
class FileColumns:
    """A checked verdict file: per coded field, (codes, dictionary) with code -1 for an absent
    value; `probs` (n, 4) in `vocab.JUDGE_LABELS` order, NaN where absent; `input` the file's
    record (`file_record`)."""

    codes: dict[str, tuple[np.ndarray, list[str]]]
    probs: np.ndarray
    input: dict

    @property
    def n(self) -> int:
        return len(self.probs)


# ---------------------------------------------------------------- inputs and their hashes

def file_record(path: Path, raw=None, stat: os.stat_result | None = None) -> dict:
    """Path, size, mtime and content hash of an input file (hashing `raw` when given)."""
    stat = stat or path.stat()
    if raw is None:
        raw = path.read_bytes()
    return _record(path, stat, hashlib.sha256(raw).hexdigest())


def _record(path: Path, stat: os.stat_result, sha256: str) -> dict:
    return {"path": str(path), "bytes": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": sha256}


def current_record(old: dict) -> dict | None:
    """`old` still describes its file? Same size and mtime: trust the hash (as git's index
    does); else hash again. Returns the file's record now, or None if it is gone."""
    path = Path(old.get("path", ""))
    try:
        stat = path.stat()
    except OSError:
        return None
    if stat.st_size == old.get("bytes") and stat.st_mtime_ns == old.get("mtime_ns"):
        return dict(old)
    return file_record(path)


def _buffer(size: int) -> bytearray:
    """This thread's reusable buffer, at least `size` bytes (its contents: whatever was last read)."""
    buf = getattr(_BUFFERS, "buf", None)
    if buf is None or len(buf) < size:
        buf = _BUFFERS.buf = bytearray(size)
    return buf


def _read_into_buffer(path: Path) -> tuple[memoryview, os.stat_result]:
    """The file's bytes in this thread's reusable buffer (valid until its next call)."""
    with open(path, "rb", buffering=0) as f:
        stat = os.fstat(f.fileno())
        view = memoryview(_buffer(stat.st_size))[:stat.st_size]
        got = 0
        while got < stat.st_size:  # a regular file fills it in one read; a pipe may not
            n = f.readinto(view[got:])
            if not n:
                break
            got += n
    return view[:got], stat


# ---------------------------------------------------------------- one file

def read_file_columns(path: Path, options, cache: str = "use", threads: bool = True) -> FileColumns | None:
    """The file's checked columns, or None: read it the reference way. `options`: pyarrow's
    parse options (`parse_options`); `cache`: "use", "read" (never write) or "off";
    `threads`: let pyarrow parse the file's blocks in parallel (off when the caller reads
    files in parallel itself; a file read in pieces then parses pieces side by side)."""
    import pyarrow as pa

    try:
        part = _from_known_hash(path) if cache != "off" else None
        if part is None:
            part = _read_and_check(path, options, cache, threads)
        elif cache == "use":
            _touch(_stat_entry(path))
        if part is not None and cache == "use":
            _touch(_cache_path(part.input["sha256"]))
        return part
    # UnicodeDecodeError (a ValueError) can come late: a bad byte in a key shows when the
    # schema's names are read.
    except (OSError, ValueError, pa.ArrowException):
        return None


def _read_and_check(path: Path, options, cache: str, threads: bool) -> FileColumns | None:
    """Read and hash the file; its columns from the cache entry of that hash, else parsed."""
    hashed_ns = time.time_ns()
    whole = os.stat(path).st_size <= PIECE_BYTES
    if not whole and cache == "off":  # no entry to look up: one pass, hashing as it parses
        return _parse_in_pieces(path, os.stat(path), options, threads)
    if whole:
        raw, stat = _read_into_buffer(path)
        record = file_record(path, raw, stat)
    else:
        record, stat = _hash_in_pieces(path)

    def parse() -> FileColumns | None:
        if whole:
            return _parse(raw, record, options, threads)
        return _parse_in_pieces(path, stat, options, threads, record["sha256"])

    if cache == "off":
        return parse()
    entry = _cache_path(record["sha256"])
    part = _from_cache(entry, record)
    if part is None:
        part = parse()
        if part is not None and cache == "use":
            _to_cache(entry, part)
    if part is not None and cache == "use":
        _remember_hash(path, stat, record["sha256"], hashed_ns)
    return part


def cache_files(paths: list[Path]) -> None:
    """Put these files' checked columns in the cache now (the judge stage, after writing them);
    a file the columns cannot vouch for is left to its first reader. Needs pyarrow."""
    try:
        options = parse_options()
    except ImportError:
        return
    for path in paths:
        read_file_columns(path, options)
    _BUFFERS.__dict__.pop("buf", None)  # a long-lived process keeps no file-sized buffer
    prune_cache()


def parse_options():
    import pyarrow as pa
    import pyarrow.json as pj

    schema = pa.schema([(f, pa.string()) for f in (*STRING_FIELDS, "raw", *IDENTITY_FIELDS)])
    # "infer" (not "ignore") for the other fields: pyarrow then still parses and UTF-8-checks
    # them and refuses a repeated key in them, as json.loads does in the reference; a field
    # whose type varies between records is a reader error and sends the files to the
    # reference path, which accepts it.
    return pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="infer")


def _parse(raw: memoryview, record: dict | None, options, threads: bool) -> FileColumns | None:
    """One file's (or piece's: `record` None) checked columns, or None."""
    import pyarrow.json as pj

    tab = arrow.read_jsonl(raw, options, pj.ReadOptions(block_size=BLOCK_SIZE, use_threads=threads))
    if tab is None:
        return None
    probs = _probs(tab)
    if probs is None:
        return None
    # The schema makes each a string column: pyarrow refuses a number there.
    return _checked({name: arrow.encoded(tab.column(name)) for name in CODED_FIELDS}, probs, record)


def _pieces(path: Path):
    """(piece, sha256 so far) for each piece of the file: at most PIECE_BYTES, cut after a
    newline, in this thread's buffer (valid until the next piece). A line longer than a piece
    raises ValueError (the reference reads such a file)."""
    buf = _buffer(PIECE_BYTES)
    view, sha, have = memoryview(buf)[:PIECE_BYTES], hashlib.sha256(), 0
    with open(path, "rb", buffering=0) as f:
        while True:
            n = f.readinto(view[have:])
            total = have + n
            if not n:  # the end: what is left is the last piece
                if total:
                    sha.update(view[:total])
                    yield view[:total], sha
                return
            cut = buf.rfind(b"\n", 0, total) + 1
            if not cut:
                if total < PIECE_BYTES:
                    have = total  # a short read: read on
                    continue
                raise ValueError(f"{path}: a line longer than {PIECE_BYTES} bytes")
            sha.update(view[:cut])
            yield view[:cut], sha
            have = total - cut
            buf[:have] = buf[cut:total]


def _hash_in_pieces(path: Path) -> tuple[dict, os.stat_result]:
    """A big file's record, hashed piece by piece (no buffer as big as the file)."""
    stat = os.stat(path)
    sha = hashlib.sha256()
    for _, sha in _pieces(path):
        pass
    return _record(path, stat, sha.hexdigest()), stat


def _parse_in_pieces(path: Path, stat: os.stat_result, options, threads: bool,
                     sha256: str | None = None) -> FileColumns | None:
    """A big file's columns, each piece parsed and checked as a file of its own, then merged,
    with the record of the bytes parsed; None if a piece fails, or the bytes are not those
    hashed as `sha256`. `threads`: parse PIECE_THREADS pieces side by side (copies, a few in
    flight: memory stays bounded)."""
    parts, sha = [], hashlib.sha256()
    if not threads:
        for piece, sha in _pieces(path):
            parts.append(_parse(piece, None, options, threads=False))
            if parts[-1] is None:
                return None
    else:
        with ThreadPoolExecutor(max_workers=PIECE_THREADS) as pool:
            pending: deque = deque()
            for piece, sha in _pieces(path):
                # A copy: the next piece is read into the same buffer.
                pending.append(pool.submit(_parse, bytes(piece), None, options, False))
                if len(pending) > PIECE_THREADS:
                    parts.append(pending.popleft().result())
            parts += [future.result() for future in pending]
    if sha256 not in (None, sha.hexdigest()) or not parts or any(part is None for part in parts):
        return None  # a piece failed, or changed between the hashing and the parsing: the reference reads it
    record = _record(path, stat, sha.hexdigest())
    codes = {name: merge_codes([p.codes[name] for p in parts], dtype=np.int32) for name in CODED_FIELDS}
    return FileColumns(codes=codes, probs=np.concatenate([p.probs for p in parts]), input=record)


def merge_codes(pairs: list[tuple[np.ndarray, list[str]]], fixed=None, dtype=np.int32) -> tuple[np.ndarray, list]:
    """(codes, dictionary) pairs as one: the codes of every row against one dictionary (sorted,
    or the fixed vocabulary), code -1 (no value) kept."""
    dictionary = list(fixed) if fixed else sorted({v for _, values in pairs for v in values})
    index = {v: i for i, v in enumerate(dictionary)}
    out = np.empty(sum(len(codes) for codes, _ in pairs), dtype=dtype)
    at = 0
    for codes, values in pairs:
        lookup = np.array([index[v] for v in values] + [-1], dtype=dtype)
        np.take(lookup, codes, out=out[at:at + len(codes)])  # code -1 picks the appended -1
        at += len(codes)
    return out, dictionary


def _checked(codes: dict, probs: np.ndarray, record: dict | None) -> FileColumns | None:
    """The columns if every value is one the reference accepts, else None."""
    for name in STRING_FIELDS:
        got, values = codes[name]
        if (got < 0).any() or "" in values:  # a missing field, or an empty string
            return None
        if name in FIXED and not set(values) <= set(FIXED[name]):
            return None
        if name in SAFE_NAMES and not all(_SAFE.fullmatch(v) for v in values):
            return None
    return FileColumns(codes=codes, probs=probs, input=record)


# ---------------------------------------------------------------- probabilities

def _probs(tab) -> np.ndarray | None:
    """The `probs` column as an (n, 4) float matrix; None where it is not an object of numbers
    with a number for every key it names (absent and null keys look alike in columns)."""
    import pyarrow as pa

    out = np.full((tab.num_rows, len(JUDGE_LABELS)), np.nan)
    if "probs" not in tab.column_names or pa.types.is_null(tab.schema.field("probs").type):
        return out
    column = tab.column("probs").combine_chunks()
    if not pa.types.is_struct(column.type):
        return None
    # flatten() applies the nulls of probs to its keys; a key with more nulls than that is
    # null, or absent, in some probs.
    for name, child in zip((f.name for f in column.type), column.flatten(), strict=True):
        if not (pa.types.is_floating(child.type) or pa.types.is_integer(child.type)):
            return None
        if child.null_count != column.null_count:
            return None
        if name in JUDGE_LABELS:
            out[:, JUDGE_LABELS.index(name)] = arrow.floats(child)
    return out


# ---------------------------------------------------------------- the cache

def _cache_folder() -> Path:
    return cache_dir("verdict-tables") / f"v{CACHE_VERSION}"


def _cache_path(sha256: str) -> Path:
    return _cache_folder() / f"{sha256}.arrow"


def _touch(entry: Path) -> None:
    """Mark an entry as just used (`prune_cache` deletes the least recently used first)."""
    try:
        os.utime(entry)
    except OSError:
        pass


# ---------------------------------------------------------------- hashes of unchanged files

def _stat_key(stat: os.stat_result) -> dict:
    # ctime and the inode too: `touch -r` can put an mtime back, a rename into place (how
    # this project writes files) makes a new inode, and nothing but a change sets ctime.
    return {"bytes": stat.st_size, "mtime_ns": stat.st_mtime_ns, "ctime_ns": stat.st_ctime_ns,
            "ino": stat.st_ino, "dev": stat.st_dev}


def _stat_entry(path: Path) -> Path:
    where = os.path.abspath(path).encode("utf-8", "surrogateescape")
    return _cache_folder() / "stat" / f"{hashlib.sha256(where).hexdigest()}.json"


def _remember_hash(path: Path, stat: os.stat_result, sha256: str, hashed_ns: int) -> None:
    """Note the file's hash beside its stat, unless it changed less than RACY_NS before the
    hashing began: a change in the same clock tick would not show in the stat (git's
    "racily clean" rule); and only for a regular file. Failures are ignored."""
    if max(stat.st_mtime_ns, stat.st_ctime_ns) + RACY_NS > hashed_ns or not S_ISREG(stat.st_mode):
        return  # a pipe's stat says nothing about what it will hold next
    try:
        write_bytes_atomic(_stat_entry(path), json.dumps(
            {"path": os.path.abspath(path), "stat": _stat_key(stat), "sha256": sha256}).encode(), durable=False)
    except OSError:
        pass


def _from_known_hash(path: Path) -> FileColumns | None:
    """The cached columns of a file whose stat is as it was when it was hashed, without
    reading or hashing it (as git's index trusts an unchanged stat); None otherwise."""
    try:
        stat = os.stat(path)
        known = json.loads(_stat_entry(path).read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(known, dict) or known.get("stat") != _stat_key(stat) \
            or not isinstance(sha256 := known.get("sha256"), str) or not _SHA256.fullmatch(sha256):
        return None
    return _from_cache(_cache_path(sha256), _record(path, stat, sha256))


def _cache_schema():
    import pyarrow as pa

    return pa.schema([(name, pa.dictionary(pa.int32(), pa.string())) for name in CODED_FIELDS]
                     + [(f"probs.{label}", pa.float64()) for label in JUDGE_LABELS])


def _to_cache(entry: Path, part: FileColumns) -> None:
    """Store a checked file's columns as Arrow IPC; failures are ignored (a cache is never
    worth an error, and a half-written entry fails its own read)."""
    import pyarrow as pa

    meta = {"version": CACHE_VERSION, "sha256": part.input["sha256"], "rows": part.n}
    try:
        table = pa.Table.from_arrays([arrow.dictionary(*part.codes[name]) for name in CODED_FIELDS]
                                     + [arrow.from_numpy(column) for column in part.probs.T], schema=_cache_schema())
        sink = pa.BufferOutputStream()
        with pa.ipc.new_file(sink, table.schema.with_metadata({"gamut_local": json.dumps(meta)})) as writer:
            writer.write_table(table)
        write_bytes_atomic(entry, sink.getvalue().to_pybytes(), durable=False)
    except (OSError, pa.ArrowException):
        pass


def prune_cache(max_bytes: int = CACHE_MAX_BYTES, max_hashes: int = MAX_KNOWN_HASHES) -> None:
    """Keep the cache under `max_bytes` of entries and `max_hashes` remembered hashes: past
    either, delete the least recently used (a hit touches what it used) down to 80% of it,
    so not every read prunes. Failures are ignored."""
    _drop_least_recent(_cache_folder(), ".arrow", max_bytes, lambda st: st.st_size)
    _drop_least_recent(_cache_folder() / "stat", ".json", max_hashes, lambda st: 1)


def _drop_least_recent(folder: Path, suffix: str, limit: int, size) -> None:
    try:
        entries = sorted((st.st_mtime_ns, size(st), e.path) for e in os.scandir(folder)
                         if e.name.endswith(suffix) for st in (e.stat(),))
    except OSError:
        return
    total = sum(n for _, n, _ in entries)
    if total <= limit:
        return
    for _, n, path in entries:
        if total <= 0.8 * limit:
            break
        try:
            os.unlink(path)
            total -= n
        except OSError:
            pass


def _from_cache(entry: Path, record: dict) -> FileColumns | None:
    """The cached columns for this content, checked again; None if absent or unusable."""
    import pyarrow as pa

    try:
        table = pa.ipc.open_file(pa.py_buffer(entry.read_bytes())).read_all()
        table.validate(full=True)  # indices inside their dictionaries, before numpy sees them
        meta = json.loads(table.schema.metadata[b"gamut_local"])
    except (OSError, KeyError, TypeError, ValueError, pa.ArrowException):
        return None
    if meta != {"version": CACHE_VERSION, "sha256": record["sha256"], "rows": table.num_rows} \
            or not table.schema.remove_metadata().equals(_cache_schema()) \
            or any(column.num_chunks != 1 for column in table.columns) \
            or any(table.column(f"probs.{label}").null_count for label in JUDGE_LABELS):
        return None  # not what _to_cache writes
    codes = {name: arrow.codes(table.column(name).chunk(0)) for name in CODED_FIELDS}
    probs = np.stack([arrow.values(table.column(f"probs.{label}").chunk(0), np.float64) for label in JUDGE_LABELS],
                     axis=1)
    return _checked(codes, probs, record)
