"""CRAG-MM images and domains joined to GAMUT questions, written beside a converted dataset.

GAMUT's questions are about CRAG-MM images (`crag-mm-2025/crag-mm-single-turn-public`,
revision v0.1.2, splits `validation` and `public_test`; a split the hub lacks is reported and
the others are used). Rows there have `session_id`, `image` (a PIL image, or None where only
`image_url` is given) and `turns`, a dict of lists (or a list of dicts, depending on the
`datasets` version) with `interaction_id` and `domain`. `domain` is a class label whose names
are read from the dataset's features at run time, never hard-coded; where it is a plain
integer with no names, the number is kept as the domain's name and the report says so.

A question joins the row whose `session_id` is its id, else the row whose first turn's
`interaction_id` is (`join_keys`).

Images: the CRAG-MM kit gives models its egocentric images (3:4 photographs from smart
glasses) at 960x1280, so the paper's candidates saw that resolution. We therefore bound every
image, egocentric or not, to 960 px on its short side and 1280 on its long side (aspect ratio
kept, Lanczos, never enlarged: a 3:4 photograph becomes exactly 960x1280), convert it to RGB and
write it as JPEG quality 95, `images/<session_id>.jpg` next to the converted JSONL, which refers
to it by relative path. `bound=None` (fetch_data.py `--image-bound none`) keeps every image at
its original size, still as RGB JPEG quality 95. Questions with no CRAG-MM row, or whose row has
neither an image nor a fetchable URL, are listed in the conversion report and keep
`image: null` (the text_only variant still runs).
"""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Callable, Iterable

from gamut_local.data.records import Question
from gamut_local.errors import InputError, Problem
from gamut_local.hashing import short_hash

BOUND = (960, 1280)  # (short side, long side) in pixels
IMAGE_DIR = "images"
JPEG_QUALITY = 95


def domain_names(features) -> list[str] | None:
    """Class names of `turns.domain` from a dataset's features (None if it has none)."""
    if features is None:
        return None
    turns = features["turns"] if "turns" in features else None
    if turns is None:
        return None
    # Sequence/List of a dict -> the inner dict; a dict of Sequences -> the entry.
    inner = getattr(turns, "feature", turns)
    dom = inner.get("domain") if isinstance(inner, dict) else None
    while dom is not None and not hasattr(dom, "names") and hasattr(dom, "feature"):
        dom = dom.feature
    return list(dom.names) if dom is not None and hasattr(dom, "names") else None


def _first_turn(turns, key: str):
    """The first turn's `key`, from a dict of lists or a list of dicts."""
    if isinstance(turns, dict):
        values = turns.get(key) or []
    elif isinstance(turns, list):
        values = [t.get(key) for t in turns if isinstance(t, dict)]
    else:
        return None
    return values[0] if values else None


def first_domain(turns, names: list[str] | None) -> str | None:
    """The first turn's domain name; a plain integer without class names is kept as its number."""
    value = _first_turn(turns, "domain")
    if isinstance(value, str):
        return value or None
    if isinstance(value, int) and not isinstance(value, bool):
        if names is None:
            return str(value)
        return names[value] if 0 <= value < len(names) else None
    return None


def join_keys(row: dict) -> list[str]:
    """The ids a CRAG-MM row answers to: its session_id, then its first turn's interaction_id."""
    keys = [row.get("session_id"), _first_turn(row.get("turns"), "interaction_id")]
    return [k for k in dict.fromkeys(keys) if isinstance(k, str) and k]


def bound_image(img, bound: tuple[int, int] | None = BOUND):
    """An RGB copy no larger than `bound` (short, long side; either orientation), aspect ratio
    kept, never enlarged; `bound=None`: the original size."""
    from PIL import Image

    img = img.convert("RGB")
    if bound is None:
        return img
    w, h = img.size
    limit = bound if w <= h else bound[::-1]  # (max width, max height) for this orientation
    scale = min(limit[0] / w, limit[1] / h, 1.0)
    if scale < 1.0:
        img = img.resize((max(1, round(w * scale)), max(1, round(h * scale))), Image.Resampling.LANCZOS)
    return img


def parse_bound(text: str) -> tuple[int, int] | None:
    """`960x1280` -> (960, 1280) (short side first, either order given); `none` -> None."""
    if text.strip().lower() == "none":
        return None
    m = re.fullmatch(r"\s*(\d+)\s*[xX]\s*(\d+)\s*", text)
    if not m or min(int(m[1]), int(m[2])) < 1:
        raise ValueError(f"expected WIDTHxHEIGHT (e.g. 960x1280) or none, got {text!r}")
    return tuple(sorted((int(m[1]), int(m[2]))))


def _as_pil(value):
    """A dataset image cell (PIL image, or {'bytes', 'path'} when not decoded) as PIL, or None."""
    from PIL import Image

    if value is None:
        return None
    if isinstance(value, Image.Image):
        return value
    if isinstance(value, dict) and value.get("bytes"):
        return Image.open(io.BytesIO(value["bytes"]))
    if isinstance(value, dict) and value.get("path") and Path(value["path"]).is_file():
        return Image.open(value["path"])
    return None


def image_name(session_id: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", session_id)
    if safe != session_id or safe.startswith("."):
        safe = f"{safe.strip('.')[:40]}-{short_hash(session_id, algorithm='sha1', chars=10)}"
    return f"{IMAGE_DIR}/{safe}.jpg"


def _rows_for(split, wanted: set[str]) -> Iterable[dict]:
    """Rows of a split that some wanted id joins, decoding images only for those rows."""
    if hasattr(split, "select_columns") and hasattr(split, "select"):
        keys = split.select_columns([c for c in ("session_id", "turns") if c in split.column_names])
        keep = [i for i, row in enumerate(keys) if wanted.intersection(join_keys(row))]
        return split.select(keep) if keep else []
    return (r for r in split if wanted.intersection(join_keys(r)))


def load_splits(load: Callable[[str], object],
                names: Iterable[str]) -> tuple[dict[str, object], dict[str, str]]:
    """Each split `load(name)` gives, and for each that failed why; InputError if none loads."""
    splits, missing = {}, {}
    for name in names:
        try:
            splits[name] = load(name)
        except (ValueError, KeyError, FileNotFoundError) as e:  # datasets: unknown split, absent file
            missing[name] = f"{type(e).__name__}: {e}"
    if not splits:
        raise InputError([Problem(f"split {n}", None, "", why) for n, why in missing.items()])
    return splits, missing


def _index(splits: dict[str, object], wanted: set[str]) -> tuple[dict[str, dict], dict]:
    """Question id -> {split, row, names} for every question some split's row joins (first wins)."""
    found: dict[str, dict] = {}
    names_of: dict[str, list[str] | None] = {}
    for split_name, split in splits.items():
        names = names_of[split_name] = domain_names(getattr(split, "features", None))
        for row in _rows_for(split, wanted - set(found)):
            for key in join_keys(row):
                if key in wanted and key not in found:
                    found[key] = {"split": split_name, "row": row, "names": names}
    return found, {k: {"domain_names": v} for k, v in names_of.items()}


def _image(q: Question, row: dict, fetch, report: dict):
    """The row's image as PIL (downloaded where only a URL is given), or None, noted in `report`."""
    img = _as_pil(row.get("image"))
    if img is not None:
        return img
    url = row.get("image_url")
    if fetch is None or not url:
        report["no_image"].append({"question_id": q.question_id, "url": url})
        return None
    try:
        from PIL import Image

        img = Image.open(io.BytesIO(fetch(url)))
        report["image_from_url"].append(q.question_id)
        return img
    except Exception as e:  # any network or decoding failure: record it, go on
        report["no_image"].append({"question_id": q.question_id, "url": url,
                                   "error": f"{type(e).__name__}: {e}"})
        return None


def _joined(q: Question, hit: dict | None, out_dir: Path, fetch, bound, report: dict) -> Question:
    if hit is None:
        report["no_crag_row"].append(q.question_id)
        return q
    row, update = hit["row"], {}
    if row.get("session_id") != q.question_id:
        report["joined_by_interaction_id"].append(q.question_id)
    domain = first_domain(row.get("turns"), hit["names"])
    if domain:
        update["domain"] = domain
    else:
        report["no_domain"].append(q.question_id)
    img = _image(q, row, fetch, report)
    if img is not None:
        rel = image_name(q.question_id)
        bound_image(img, bound).save(out_dir / rel, format="JPEG", quality=JPEG_QUALITY)
        update["image"] = rel
    return q.model_copy(update=update) if update else q


def join(questions: list[Question], splits: dict[str, object], out_dir: Path, *,
         fetch: Callable[[str], bytes] | None = None, bound: tuple[int, int] | None = BOUND,
         progress=None) -> tuple[list[Question], dict]:
    """Questions with CRAG-MM domains and images (bounded to `bound`) written under `out_dir`.

    `splits` maps a split name to a `datasets.Dataset` (or any iterable of row dicts; then
    domain names must be strings). `fetch(url) -> bytes` downloads an image given only by URL.
    """
    found, split_info = _index(splits, {q.question_id for q in questions})
    (out_dir / IMAGE_DIR).mkdir(parents=True, exist_ok=True)
    report = {"bound": list(bound) if bound else None, "jpeg_quality": JPEG_QUALITY, "splits": split_info,
              "no_crag_row": [], "no_image": [], "image_from_url": [], "no_domain": [],
              "joined_by_interaction_id": []}
    for name, info in split_info.items():
        info["domains_as_numbers"] = info["domain_names"] is None and any(
            h["split"] == name and isinstance(_first_turn(h["row"].get("turns"), "domain"), int)
            for h in found.values())
    task = progress.add_task("CRAG-MM images", total=len(questions)) if progress is not None else None
    out = []
    for q in questions:
        out.append(_joined(q, found.get(q.question_id), out_dir, fetch, bound, report))
        if task is not None:
            progress.advance(task)
    return out, report


def fetch_url(url: str, timeout: float = 60.0) -> bytes:
    """The bytes at a URL (used where a CRAG-MM row gives only `image_url`)."""
    import urllib.request

    with urllib.request.urlopen(url, timeout=timeout) as r:  # noqa: S310 - URLs come from the dataset
        return r.read()


def write_dataset(questions: list[Question], out_path: Path) -> None:
    from gamut_local.rundir.store import write_jsonl

    write_jsonl(out_path, [q.model_dump(mode="json", exclude_none=True) for q in questions])


def build_dataset(release: Path, release_text_only: Path | None, crag_splits: dict[str, object],
                  out_path: Path, *, fetch: Callable[[str], bytes] | None = None,
                  bound: tuple[int, int] | None = BOUND, strict: bool = False, progress=None) -> dict:
    """Release parquet(s) + CRAG-MM -> our JSONL with images beside it; returns the report
    (its `warnings` are the release's, as text).

    The written file is read back through the dataset validator (images included) before
    this returns, so a conversion that produced anything unreadable fails here, not in a job.
    """
    from gamut_local.data.dataset import load_questions
    from gamut_local.data.gamut_release import load_release_pair

    out_path = Path(out_path)
    loaded, mismatch = load_release_pair(release, release_text_only, strict=strict)
    questions, warnings = loaded.questions, loaded.warnings
    questions, report = join(questions, crag_splits, out_path.parent, fetch=fetch, bound=bound,
                             progress=progress)
    write_dataset(questions, out_path)
    checked = load_questions(out_path)
    if len(checked) != len(questions):  # pragma: no cover - load_questions raises first
        raise InputError([Problem(str(out_path), None, "", "written dataset does not read back")])
    report.update({
        "dataset": str(out_path),
        "questions": len(questions),
        "with_image": sum(1 for q in questions if q.image),
        "with_text_only": sum(1 for q in questions if q.question_text_only),
        "with_own_text_only_checks": sum(1 for q in questions if q.checks_text_only),
        **mismatch,
        "checks": sum(len(q.checks or []) for q in questions),
        "domains": dict(sorted(_count(q.domain for q in questions).items())),
        "warnings": [str(w) for w in warnings],
    })
    return report


def _count(values) -> dict:
    out: dict = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return out
