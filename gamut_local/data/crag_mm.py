"""CRAG-MM images and domains joined to GAMUT questions, written beside a converted dataset.

GAMUT's questions are about CRAG-MM images (`crag-mm-2025/crag-mm-single-turn-public`,
revision v0.1.2, splits `validation` and `public_test`). Rows there have `session_id`,
`image` (a PIL image, or None where only `image_url` is given) and `turns`, a dict of lists
(or a list of dicts, depending on the `datasets` version) whose `domain` is a class label:
its names are read from the dataset's features at run time, never hard-coded.

Images are bounded to 960x1280 (long side 1280, short side 960, aspect kept, never enlarged)
as the CRAG-MM kit does before handing them to a model, and written as
`images/<session_id>.jpg` next to the converted JSONL, which refers to them by relative path.
Questions with no CRAG-MM row, or whose row has neither an image nor a fetchable URL, are
listed in the conversion report and keep `image: null` (the text_only variant still runs).
"""

from __future__ import annotations

import hashlib
import io
import re
from pathlib import Path
from typing import Callable, Iterable

from gamut_local.data.records import Question
from gamut_local.errors import InputError, Problem

BOUND = (960, 1280)  # (short side, long side) in pixels
IMAGE_DIR = "images"


def domain_names(features) -> list[str] | None:
    """Class names of `turns.domain` from a dataset's features (None if it is plain text)."""
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


def first_domain(turns, names: list[str] | None) -> str | None:
    """The first turn's domain name, from a dict of lists or a list of dicts."""
    if isinstance(turns, dict):
        values = turns.get("domain") or []
    elif isinstance(turns, list):
        values = [t.get("domain") for t in turns if isinstance(t, dict)]
    else:
        return None
    if not values or values[0] is None:
        return None
    value = values[0]
    if isinstance(value, str):
        return value
    if isinstance(value, int) and names is not None and 0 <= value < len(names):
        return names[value]
    return None


def bound_image(img):
    """A copy no larger than 960x1280 (either orientation), aspect ratio kept, RGB."""
    from PIL import Image

    img = img.convert("RGB")
    w, h = img.size
    limit = BOUND if w <= h else BOUND[::-1]  # (max width, max height) for this orientation
    scale = min(limit[0] / w, limit[1] / h, 1.0)
    if scale < 1.0:
        img = img.resize((max(1, round(w * scale)), max(1, round(h * scale))), Image.Resampling.LANCZOS)
    return img


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
        safe = f"{safe.strip('.')[:40]}-{hashlib.sha1(session_id.encode()).hexdigest()[:10]}"
    return f"{IMAGE_DIR}/{safe}.jpg"


def _rows_for(split, wanted: set[str]) -> Iterable[dict]:
    """Rows of a split whose session_id is wanted, decoding images only for those rows."""
    if hasattr(split, "select_columns") and hasattr(split, "select"):
        ids = split.select_columns(["session_id"])["session_id"]
        keep = [i for i, sid in enumerate(ids) if sid in wanted]
        return split.select(keep) if keep else []
    return (r for r in split if r.get("session_id") in wanted)


def join(questions: list[Question], splits: dict[str, object], out_dir: Path, *,
         fetch: Callable[[str], bytes] | None = None, progress=None) -> tuple[list[Question], dict]:
    """Questions with CRAG-MM domains and bounded images written under `out_dir`.

    `splits` maps a split name to a `datasets.Dataset` (or any iterable of row dicts; then
    domain names must be strings). `fetch(url) -> bytes` downloads an image given only by URL.
    """
    wanted = {q.question_id for q in questions}
    found: dict[str, dict] = {}
    domains_seen: dict[str, list[str] | None] = {}
    for split_name, split in splits.items():
        names = domain_names(getattr(split, "features", None))
        domains_seen[split_name] = names
        for row in _rows_for(split, wanted - set(found)):
            found[row["session_id"]] = {"split": split_name, "row": row, "names": names}
    (out_dir / IMAGE_DIR).mkdir(parents=True, exist_ok=True)
    out, report = [], {"bound": list(BOUND), "splits": {k: {"domain_names": v} for k, v in domains_seen.items()},
                       "no_crag_row": [], "no_image": [], "image_from_url": [], "no_domain": []}
    task = progress.add_task("CRAG-MM images", total=len(questions)) if progress is not None else None
    for q in questions:
        hit = found.get(q.question_id)
        update: dict = {}
        if hit is None:
            report["no_crag_row"].append(q.question_id)
        else:
            row = hit["row"]
            domain = first_domain(row.get("turns"), hit["names"])
            if domain:
                update["domain"] = domain
            else:
                report["no_domain"].append(q.question_id)
            img = _as_pil(row.get("image"))
            if img is None and fetch is not None and row.get("image_url"):
                try:
                    from PIL import Image

                    img = Image.open(io.BytesIO(fetch(row["image_url"])))
                    report["image_from_url"].append(q.question_id)
                except Exception as e:  # any network or decoding failure: record it, go on
                    report["no_image"].append({"question_id": q.question_id, "url": row["image_url"],
                                               "error": f"{type(e).__name__}: {e}"})
            elif img is None:
                report["no_image"].append({"question_id": q.question_id, "url": row.get("image_url")})
            if img is not None:
                rel = image_name(q.question_id)
                bound_image(img).save(out_dir / rel, format="JPEG", quality=95)
                update["image"] = rel
        out.append(q.model_copy(update=update) if update else q)
        if task is not None:
            progress.advance(task)
    return out, report


def merge_text_only(questions: list[Question], text_only: list[Question]) -> tuple[list[Question], dict]:
    """Set question_text_only from the release's text-only split (joined by id).

    Both variants are judged on the main split's checks (one rubric per question). Returns
    the questions and what did not line up: text-only ids with no main question, and ids
    whose text-only rubric lists other check texts than the main one.
    """
    by_id = {q.question_id: q for q in text_only}
    merged = [q.model_copy(update={"question_text_only": by_id[q.question_id].question})
              if q.question_id in by_id else q for q in questions]
    main = {q.question_id for q in questions}
    differs = sorted(q.question_id for q in questions if q.question_id in by_id
                     and [c.text for c in q.checks or []] != [c.text for c in by_id[q.question_id].checks or []])
    return merged, {"text_only_without_main_question": sorted(set(by_id) - main),
                    "text_only_rubric_differs": differs}


def fetch_url(url: str, timeout: float = 60.0) -> bytes:
    """The bytes at a URL (used where a CRAG-MM row gives only `image_url`)."""
    import urllib.request

    with urllib.request.urlopen(url, timeout=timeout) as r:  # noqa: S310 - URLs come from the dataset
        return r.read()


def write_dataset(questions: list[Question], out_path: Path) -> None:
    from gamut_local.rundir.store import write_jsonl

    write_jsonl(out_path, [q.model_dump(mode="json", exclude_none=True) for q in questions])


def build_dataset(release: Path, release_text_only: Path | None, crag_splits: dict[str, object],
                  out_path: Path, *, fetch: Callable[[str], bytes] | None = None, progress=None) -> dict:
    """Release parquet(s) + CRAG-MM -> our JSONL with images beside it; returns the report.

    The written file is read back through the dataset validator (images included) before
    this returns, so a conversion that produced anything unreadable fails here, not in a job.
    """
    from gamut_local.data.dataset import load_questions
    from gamut_local.data.gamut_release import load_release

    out_path = Path(out_path)
    questions = load_release(release)
    mismatch = {"text_only_without_main_question": [], "text_only_rubric_differs": []}
    if release_text_only is not None:
        questions, mismatch = merge_text_only(questions, load_release(release_text_only))
    questions, report = join(questions, crag_splits, out_path.parent, fetch=fetch, progress=progress)
    write_dataset(questions, out_path)
    checked = load_questions(out_path)
    if len(checked) != len(questions):  # pragma: no cover - load_questions raises first
        raise InputError([Problem(str(out_path), None, "", "written dataset does not read back")])
    report.update({
        "dataset": str(out_path),
        "questions": len(questions),
        "with_image": sum(1 for q in questions if q.image),
        "with_text_only": sum(1 for q in questions if q.question_text_only),
        **mismatch,
        "checks": sum(len(q.checks or []) for q in questions),
        "domains": dict(sorted(_count(q.domain for q in questions).items())),
    })
    return report


def _count(values) -> dict:
    out: dict = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return out
