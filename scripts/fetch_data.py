"""Fetch the public GAMUT release and its CRAG-MM images once, on a machine with internet.

    python scripts/fetch_data.py [--out data/gamut]

Downloads `facebook/GAMUT` (splits `test` and `test_text_only`) and
`crag-mm-2025/crag-mm-single-turn-public` at revision v0.1.2 (splits `validation` and
`public_test`) through `datasets`, converts them into our question JSONL with the images
(bounded to 960x1280) beside it, and prints the path to put in a run config's `dataset:`
(configs/runs/paper-open.yaml reads `${GAMUT_DATA:-data/gamut}/gamut.jsonl`).

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


def fetch(out: Path, gamut_revision: str, crag_revision: str, url_images: bool) -> Path:
    import datasets
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from gamut_local.data.crag_mm import build_dataset, fetch_url
    from gamut_local.rundir.store import write_json

    out.mkdir(parents=True, exist_ok=True)
    gamut_commit = resolve_commit(GAMUT_REPO, gamut_revision)
    crag_commit = resolve_commit(CRAG_REPO, crag_revision)
    release = datasets.load_dataset(GAMUT_REPO, revision=gamut_commit or gamut_revision)
    missing = [s for s in GAMUT_SPLITS if s not in release]
    if missing:
        raise SystemExit(f"error: {GAMUT_REPO} has no split(s) {', '.join(missing)}; "
                         f"found {', '.join(release)}")
    parquet = {}
    for split in GAMUT_SPLITS:
        parquet[split] = out / "release" / f"{split}.parquet"
        parquet[split].parent.mkdir(parents=True, exist_ok=True)
        release[split].to_parquet(str(parquet[split]))
    crag = {split: datasets.load_dataset(CRAG_REPO, split=split, revision=crag_commit or crag_revision)
            for split in CRAG_SPLITS}
    dataset = out / "gamut.jsonl"
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn()) as progress:
        report = build_dataset(parquet["test"], parquet["test_text_only"], crag, dataset,
                               fetch=fetch_url if url_images else None, progress=progress)
    write_json(out / "source.json", {
        "gamut": {"repo": GAMUT_REPO, "revision": gamut_revision, "commit": gamut_commit,
                  "splits": {s: len(release[s]) for s in GAMUT_SPLITS}},
        "crag_mm": {"repo": CRAG_REPO, "revision": crag_revision, "commit": crag_commit,
                    "splits": {s: len(crag[s]) for s in CRAG_SPLITS}},
        "datasets_version": datasets.__version__,
        "conversion": report,
    })
    print(f"{report['questions']} questions, {report['with_image']} with an image, "
          f"{report['with_text_only']} with a text-only wording, {report['checks']} checks; "
          f"domains: {json.dumps(report['domains'])}", file=sys.stderr)
    for key in ("no_crag_row", "no_image", "no_domain", "text_only_without_main_question",
                "text_only_rubric_differs"):
        if report[key]:
            print(f"{key}: {len(report[key])} (listed in {out / 'source.json'})", file=sys.stderr)
    return dataset


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("data/gamut"), help="output folder (default: data/gamut)")
    ap.add_argument("--gamut-revision", default="main", help="branch, tag or commit of facebook/GAMUT")
    ap.add_argument("--crag-revision", default=CRAG_REVISION, help=f"CRAG-MM revision (default {CRAG_REVISION})")
    ap.add_argument("--no-url-images", action="store_true",
                    help="do not download images that CRAG-MM gives only as a URL")
    args = ap.parse_args(argv)
    try:
        dataset = fetch(args.out, args.gamut_revision, args.crag_revision, not args.no_url_images)
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
