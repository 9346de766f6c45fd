"""The report's pictures, drawn with matplotlib's Agg backend (no display needed) as PNG bytes.

Each function takes numbers the report already read (metrics rows, per-family accuracy with its
interval, confusion counts) and draws them; none computes a metric.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from typing import Any

DPI = 100
COLOURS = ("#8c8c8c", "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728")


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    _pyplot().close(fig)
    return buf.getvalue()


def _series(rows: Sequence[Mapping[str, Any]], key: str) -> tuple[list[float], list[float]]:
    pts = [(float(r["step"]), float(r[key])) for r in rows
           if isinstance(r.get(key), (int, float)) and isinstance(r.get("step"), (int, float)) and math.isfinite(float(r[key]))]
    return [p[0] for p in pts], [p[1] for p in pts]


FEW_POINTS = 5  # a series with fewer points is drawn as markers (with their values), never as a line between them


def _draw(ax: Any, x: list[float], y: list[float], colour: str, label: str, *, markers: bool = False) -> str:
    """One series: a line, or with fewer than FEW_POINTS points (or `markers`) each point on its own,
    labelled with its value, so two measurements never read as a trend. Returns how it was drawn."""
    if len(x) < FEW_POINTS:
        ax.plot(x, y, "o", ms=6, linestyle="none", color=colour, label=f"{label} ({len(x)} point{'s' if len(x) != 1 else ''})")
        for xi, yi in zip(x, y):
            ax.annotate(f"{yi:.3g}", (xi, yi), textcoords="offset points", xytext=(4, 4), fontsize=7, color=colour)
        return "markers"
    ax.plot(x, y, "o-" if markers else "-", ms=3, lw=1, color=colour, label=label)
    return "line with markers" if markers else "line"


def training_figure(rows: Sequence[Mapping[str, Any]]) -> tuple[Any, dict[str, str]]:
    """The figure of training_curves and {curve: how it was drawn} for every curve on it."""
    plt = _pyplot()
    lr_x, lr_y = _series(rows, "lr")
    fig, axes = plt.subplots(2 if lr_x else 1, 1, figsize=(7, 5.2 if lr_x else 3.4), sharex=True, squeeze=False,
                             gridspec_kw={"height_ratios": [3, 1.3]} if lr_x else None)
    ax = axes[0][0]
    drawn = {}
    x, y = _series(rows, "loss")
    if x:
        drawn["training loss"] = _draw(ax, x, y, COLOURS[1], "training loss")
    vx, vy = _series(rows, "val_loss")
    if vx:
        drawn["validation loss"] = _draw(ax, vx, vy, COLOURS[2], "validation loss", markers=True)
    ax.set_ylabel("loss")
    ax.grid(alpha=0.3)
    if drawn:
        ax.legend(fontsize=8)
    if lr_x:
        drawn["learning rate"] = _draw(axes[1][0], lr_x, lr_y, COLOURS[3], "learning rate")
        axes[1][0].set_ylabel("learning rate")
        axes[1][0].ticklabel_format(axis="y", style="sci", scilimits=(0, 0))
        axes[1][0].grid(alpha=0.3)
    axes[-1][0].set_xlabel("step")
    fig.tight_layout()
    return fig, drawn


def training_curves(rows: Sequence[Mapping[str, Any]]) -> tuple[bytes, dict[str, str]]:
    """Training loss per step and validation loss where it was measured; the learning rate below. Returns
    the PNG and {curve: "line" | "line with markers" | "markers"} for the curves drawn (none: no PNG is worth
    showing, the caller leaves the section out)."""
    fig, drawn = training_figure(rows)
    return _png(fig), drawn


def accuracy_bars(families: Sequence[str], series: Sequence[tuple[str, Mapping[str, Sequence[float]]]]) -> bytes:
    """Accuracy per family, one bar per evaluation, with its 95% interval as the error bar.
    series: (label, {family: (accuracy, low, high, n, ...)}) in drawing order."""
    plt = _pyplot()
    height = max(2.4, 0.5 * len(families) * max(1, len(series)) + 1.2)
    fig, ax = plt.subplots(figsize=(7, height))
    bar = 0.8 / max(1, len(series))
    for s, (label, values) in enumerate(series):
        ys = [i + (s - (len(series) - 1) / 2) * bar for i in range(len(families))]
        acc = [values[f][0] if f in values else math.nan for f in families]
        err = [[max(0.0, values[f][0] - values[f][1]) if f in values else 0 for f in families],
               [max(0.0, values[f][2] - values[f][0]) if f in values else 0 for f in families]]
        ax.barh(ys, acc, height=bar * 0.9, xerr=err, capsize=3, color=COLOURS[s % len(COLOURS)], label=label,
                error_kw={"lw": 1, "ecolor": "#333333"})
        for y, f in zip(ys, families):
            if f in values:
                ax.text(1.01, y, f"{100 * values[f][0]:.1f}% (n={values[f][3]})", va="center", fontsize=7)
    ax.set_yticks(range(len(families)), families)
    ax.invert_yaxis()
    ax.set_xlim(0, 1.25)
    ax.set_xticks([0, 0.25, 0.5, 0.75, 1.0])
    ax.set_xlabel("accuracy (bars: 95% interval)")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.12 - 0.6 / height), ncol=min(3, len(series)), frameon=False)
    fig.tight_layout()
    return _png(fig)


def confusion_grid(matrices: Sequence[tuple[str, list[str], list[str], list[list[int]]]], title: str) -> bytes:
    """One heat map per family: rows the reference answer, columns the extracted answer, cells counts.
    matrices: (family, truth labels, predicted labels, counts[truth][pred])."""
    plt = _pyplot()
    cols = min(3, max(1, len(matrices)))
    rows = math.ceil(len(matrices) / cols)
    widest = max((len(p) for _, _, p, _ in matrices), default=2)
    size = max(3.0, 0.55 * widest + 1.6)
    fig, axes = plt.subplots(rows, cols, figsize=(size * cols, size * rows), squeeze=False)
    for ax in axes.flat[len(matrices):]:
        ax.axis("off")
    for ax, (family, truths, preds, counts) in zip(axes.flat, matrices):
        top = max((c for row in counts for c in row), default=0) or 1
        ax.imshow(counts, cmap="Blues", vmin=0, vmax=top, aspect="auto")
        for i, row in enumerate(counts):
            for j, c in enumerate(row):
                if c:
                    ax.text(j, i, str(c), ha="center", va="center", fontsize=7, color="white" if c > top / 2 else "black")
        ax.set_xticks(range(len(preds)), preds, rotation=45, ha="right", fontsize=7)
        ax.set_yticks(range(len(truths)), truths, fontsize=7)
        ax.set_xlabel("answer", fontsize=8)
        ax.set_ylabel("reference", fontsize=8)
        ax.set_title(family, fontsize=9)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return _png(fig)
