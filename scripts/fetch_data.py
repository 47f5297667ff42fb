"""Fetch the public GAMUT release and its CRAG-MM images once, on a machine with internet.

    python scripts/fetch_data.py [--out data/gamut] [--image-bound 960x1280|none] [--strict]

Downloads `facebook/GAMUT` (splits `test`, asked with the image, and `test_text_only`, its
own split with its own wording and possibly its own checks) and
`crag-mm-2025/crag-mm-single-turn-public` at revision v0.1.2 (splits `validation` and
`public_test`; a split the hub lacks is reported, the others are used) through `datasets`,
converts them into our question JSONL with the images beside it, and prints the path to put in
a run config's `dataset:` (configs/runs/paper-open.yaml reads `${GAMUT_DATA:-data/gamut}/gamut.jsonl`).

Images are bounded to 960x1280 (short x long side, aspect kept, never enlarged, JPEG q95), the
size the CRAG-MM kit gives models its egocentric images at; `--image-bound none` keeps the
original sizes (gamut_local/data/crag_mm.py says exactly what is done and why). Warnings about
the release (dangling citations, empty snippets, unusable rows left out) are printed at the
end and kept in source.json; `--strict` makes them errors.

Revisions: CRAG-MM is pinned to its v0.1.2 tag. GAMUT's commit could not be looked up where
this script was written, so by default it takes the current `main` and records the exact
commit it got in `<out>/source.json`; pass `--gamut-revision <commit>` to reproduce a fetch
exactly. Afterwards nothing needs the network: the converted folder is self-contained, and
the Hugging Face cache also serves both datasets with HF_HUB_OFFLINE=1.

Copy the output folder to the cluster (it is a JSONL file, an images/ folder, the release's
parquet files and source.json).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from gamut_local.data.crag_mm import BOUND, parse_bound  # noqa: E402
from gamut_local.data.gamut_release import RELEASE_FILE  # noqa: E402

GAMUT_REPO = "facebook/GAMUT"
GAMUT_SPLITS = ("test", "test_text_only")
CRAG_REPO = "crag-mm-2025/crag-mm-single-turn-public"
CRAG_REVISION = "v0.1.2"
CRAG_SPLITS = ("validation", "public_test")


def resolve_commit(repo: str, revision: str) -> str | None:
    """The commit a revision (branch, tag) points at now, for the record; None offline."""
    try:
        from huggingface_hub import HfApi

        return HfApi().dataset_info(repo, revision=revision).sha
    except Exception as e:  # offline, or the hub refused: the fetch below will say more
        print(f"note: could not resolve {repo}@{revision} to a commit ({type(e).__name__})", file=sys.stderr)
        return None


def release_parquet(out: Path, revision: str) -> dict[str, Path]:
    """The release's splits as parquet under out/release; `test` must exist, `test_text_only`
    is used where it does (without it, text_only answers are asked the generic question)."""
    import datasets

    release = datasets.load_dataset(GAMUT_REPO, revision=revision)
    if GAMUT_SPLITS[0] not in release:
        raise SystemExit(f"error: {GAMUT_REPO} has no split {GAMUT_SPLITS[0]}; found {', '.join(release)}")
    parquet = {}
    for split in GAMUT_SPLITS:
        if split not in release:
            print(f"note: {GAMUT_REPO} has no split {split}; found {', '.join(release)}", file=sys.stderr)
            continue
        parquet[split] = out / "release" / f"{split}.parquet"
        parquet[split].parent.mkdir(parents=True, exist_ok=True)
        release[split].to_parquet(str(parquet[split]))
    return parquet


def summary(report: dict, out: Path) -> None:
    print(f"{report['questions']} questions, {report['with_image']} with an image, "
          f"{report['with_text_only']} with a text-only wording ({report['with_own_text_only_checks']} "
          f"with their own text-only checks), {report['checks']} checks; "
          f"domains: {json.dumps(report['domains'])}", file=sys.stderr)
    for key in ("no_crag_row", "no_image", "no_domain", "joined_by_interaction_id", "no_text_only_form",
                "text_only_without_main_question", "text_only_rubric_differs", "missing_crag_splits"):
        if report.get(key):
            print(f"{key}: {len(report[key])} (listed in {out / 'source.json'})", file=sys.stderr)
    for line in report["warnings"][:20]:
        print(f"warning: {line}", file=sys.stderr)
    if len(report["warnings"]) > 20:
        more = len(report["warnings"]) - 20
        print(f"... {more} more warnings, all in {out / 'source.json'}", file=sys.stderr)


def fetch(out: Path, gamut_revision: str, crag_revision: str, url_images: bool,
          bound: tuple[int, int] | None = BOUND, strict: bool = False) -> Path:
    import datasets
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    from gamut_local.data.crag_mm import build_dataset, fetch_url, load_splits
    from gamut_local.rundir.store import write_json

    out.mkdir(parents=True, exist_ok=True)
    gamut_commit = resolve_commit(GAMUT_REPO, gamut_revision)
    crag_commit = resolve_commit(CRAG_REPO, crag_revision)
    parquet = release_parquet(out, gamut_commit or gamut_revision)
    crag, missing = load_splits(lambda split: datasets.load_dataset(
        CRAG_REPO, split=split, revision=crag_commit or crag_revision), CRAG_SPLITS)
    dataset = out / RELEASE_FILE
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn()) as progress:
        report = build_dataset(parquet["test"], parquet.get("test_text_only"), crag, dataset,
                               fetch=fetch_url if url_images else None, bound=bound, strict=strict,
                               progress=progress)
    report["missing_crag_splits"] = missing
    write_json(out / "source.json", {
        "gamut": {"repo": GAMUT_REPO, "revision": gamut_revision, "commit": gamut_commit,
                  "splits": {s: str(p.relative_to(out)) for s, p in parquet.items()}},
        "crag_mm": {"repo": CRAG_REPO, "revision": crag_revision, "commit": crag_commit,
                    "splits": {s: len(crag[s]) for s in crag}, "missing_splits": missing},
        "datasets_version": datasets.__version__,
        "conversion": report,
    })
    summary(report, out)
    return dataset


def _bound(text: str):
    try:
        return parse_bound(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("data/gamut"), help="output folder (default: data/gamut)")
    ap.add_argument("--gamut-revision", default="main", help="branch, tag or commit of facebook/GAMUT")
    ap.add_argument("--crag-revision", default=CRAG_REVISION, help=f"CRAG-MM revision (default {CRAG_REVISION})")
    ap.add_argument("--no-url-images", action="store_true",
                    help="do not download images that CRAG-MM gives only as a URL")
    ap.add_argument("--image-bound", type=_bound, default=BOUND, metavar="WxH|none",
                    help="bound every image to this (short x long side, aspect kept, never enlarged); default "
                         "960x1280, the CRAG-MM kit's size for egocentric images; none keeps the originals")
    ap.add_argument("--strict", action="store_true",
                    help="treat every warning about the release as an error (default: warn and go on)")
    args = ap.parse_args(argv)
    try:
        dataset = fetch(args.out, args.gamut_revision, args.crag_revision, not args.no_url_images,
                        args.image_bound, args.strict)
    except ImportError as e:
        print(f"error: {e.name or e} is not installed: pip install datasets huggingface_hub pyarrow",
              file=sys.stderr)
        return 1
    except (ConnectionError, OSError) as e:
        print(f"error: could not fetch the data ({type(e).__name__}: {e}); this needs internet access "
              f"to huggingface.co, or both datasets already in the Hugging Face cache", file=sys.stderr)
        return 1
    except Exception as e:  # datasets raises its own types (DatasetNotFoundError, ...)
        from gamut_local.errors import InputError

        if isinstance(e, InputError):
            for p in e.problems:
                print(str(p), file=sys.stderr)
            return 1
        if type(e).__module__.startswith(("datasets", "huggingface_hub")):
            print(f"error: {type(e).__name__}: {e}", file=sys.stderr)
            return 1
        raise
    print(dataset.resolve())
    return 0


if __name__ == "__main__":
    sys.exit(main())
