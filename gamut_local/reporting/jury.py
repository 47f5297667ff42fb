"""The report's juries section: for each `RUN/juries/NAME.json` (`gamut-local jury`), its
members and rule and, for Dawid-Skene, each member's estimated confusion matrix, as tables and
one heat-map figure per jury (`figures/jury-NAME.png`), so a reader sees which member is
lenient where. Rows: the label Dawid-Skene estimates true; columns: the member's label; each
row a distribution. A jury file that cannot be read is a line in the report, not an error.
"""

from __future__ import annotations

import json
from pathlib import Path

from gamut_local.reporting.markdown import fmt, md_table


def read_juries(run_dir: Path) -> tuple[list[dict], list[str]]:
    """(the readable jury records, one note per unreadable file)."""
    out, notes = [], []
    for path in sorted((Path(run_dir) / "juries").glob("*.json")):
        try:
            info = json.loads(path.read_text(encoding="utf-8"))
            ok = isinstance(info, dict) and info.get("kind") == "gamut-local jury" and \
                isinstance(info.get("members"), list) and isinstance(info.get("label_order"), list)
        except (OSError, ValueError):
            ok = False
        if ok:
            out.append(info)
        else:
            notes.append(f"{path.relative_to(run_dir)} is not a jury record: left out")
    return out, notes


def section(run_dir: Path, out_dir: Path | None = None) -> str:
    """The Markdown section (empty without juries); draws each Dawid-Skene jury's figure into
    `out_dir`'s figures/ (default: the run directory's)."""
    juries, notes = read_juries(run_dir)
    if not juries and not notes:
        return ""
    lines = ["## Juries", "", "A jury is a judge made of judges (`gamut-local jury`); its verdicts are scored above "
             "like any judge's. For Dawid-Skene, each member's confusion matrix as the EM estimates it without "
             "gold: rows are the label estimated true, columns the member's label, each row sums to 1; weight "
             "left of the diagonal (a label with more credit than the true one) is leniency.", ""]
    lines += [f"> **Note:** {n}" for n in notes] + ([""] if notes else [])
    for info in juries:
        labels = info["label_order"]
        lines += [f"### Jury `{info['name']}`", "",
                  f"Rule `{info['rule']}`, {info.get('cells', 0):,} cells, members "
                  + ", ".join(f"`{m}`" for m in info["members"]) + ".", ""]
        confusion = info.get("confusion") or {}
        if not confusion:
            continue
        for member in info["members"]:
            matrix = confusion.get(member)
            if matrix is None:
                continue
            lines += [f"`{member}`:", "", md_table(["true \\ member"] + labels, [
                [labels[i]] + [fmt(x, 2) for x in row] for i, row in enumerate(matrix)]), ""]
        name = f"jury-{info['name']}.png"
        if draw(info, Path(out_dir or run_dir) / "figures" / name) is not None:
            lines += [f"![jury {info['name']}: members' confusion matrices](figures/{name})", ""]
    return "\n".join(lines) + "\n"


def draw(info: dict, path: Path) -> Path | None:
    """One heat map per member, numbers in the cells."""
    import numpy as np

    members = [m for m in info["members"] if (info.get("confusion") or {}).get(m) is not None]
    if not members:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from gamut_local.reporting.figures import save_figure

    labels = [x.replace("_", " ") for x in info["label_order"]]
    fig, axes = plt.subplots(1, len(members), figsize=(3.4 * len(members), 3.4), squeeze=False)
    for ax, member in zip(axes[0], members):
        m = np.array(info["confusion"][member], dtype=np.float64)
        ax.imshow(np.nan_to_num(m), vmin=0, vmax=1, cmap="Blues")
        for (i, j), x in np.ndenumerate(m):
            if np.isfinite(x):
                ax.text(j, i, f"{x:.2f}", ha="center", va="center", fontsize=7,
                        color="white" if x > 0.6 else "black")
        ax.set_xticks(range(len(labels)), labels, rotation=45, ha="right", fontsize=7)
        ax.set_yticks(range(len(labels)), labels, fontsize=7)
        ax.set_xlabel("member's label", fontsize=8)
        ax.set_title(member, fontsize=9)
    axes[0][0].set_ylabel("estimated true label", fontsize=8)
    return save_figure(fig, path)
