"""The forest plots (matplotlib, Agg): Δ per layer (cell − control), one panel per metric, and a piece run's
effect per piece. A real effect is a filled dark marker on a thick line, a draw a hollow grey one on a thin
dashed line, and a comparison without an interval a grey cross marked "no interval", never a zero-width one."""

from __future__ import annotations

import atexit
import os
import sys
from pathlib import Path
from typing import Any

from ablate.core.tempwork import make_work_dir, remove_tree
from ablate.folder.metrics import BY_NAME
from ablate.report.model import BINARY_METRICS, METRIC_LABELS, Report

REAL_COLOR = "#1f4e79"
DRAW_COLOR = "#9a9a9a"


def _private_matplotlib_dirs() -> None:
    """matplotlib writes a font cache and config under ``~/.cache`` and ``~/.config`` on first import; ablate
    promises to leave the user's home byte-identical, so it gets a private folder, removed at exit, unless
    the user chose one (``MPLCONFIGDIR``)."""
    if "MPLCONFIGDIR" in os.environ or "matplotlib" in sys.modules:
        return
    folder = make_work_dir("ablate-mpl-")
    atexit.register(remove_tree, folder)
    os.environ["MPLCONFIGDIR"] = str(folder)


def pyplot() -> Any:
    """pyplot on the Agg backend (its cache in a private folder), with reproducible SVGs."""
    _private_matplotlib_dirs()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"svg.hashsalt": "ablate", "font.size": 9})
    return plt


def draw_interval(
    ax: Any, y: float, est: float, lo: float | None, hi: float | None, *, real: bool, scale: float = 1.0
) -> None:
    """One row of a forest plot, drawn as the module docstring says."""
    if lo is None or hi is None:
        ax.plot(est * scale, y, "x", color=DRAW_COLOR, markersize=6)
        ax.annotate("no interval", (est * scale, y), xytext=(6, -3), textcoords="offset points", fontsize=7)
        return
    if real:
        ax.plot([lo * scale, hi * scale], [y, y], color=REAL_COLOR, linewidth=2.5, solid_capstyle="butt")
        ax.plot(est * scale, y, "o", color=REAL_COLOR, markersize=7)
    else:
        ax.plot([lo * scale, hi * scale], [y, y], color=DRAW_COLOR, linewidth=1.2, linestyle="--")
        ax.plot(est * scale, y, "o", markerfacecolor="white", markeredgecolor=DRAW_COLOR, markersize=6)


def _legend(fig: Any, real: str, draw: str, *, crosses: bool = False) -> None:
    from matplotlib.lines import Line2D

    handles = [
        Line2D([0], [0], color=REAL_COLOR, linewidth=2.5, marker="o", label=real),
        Line2D([0], [0], color=DRAW_COLOR, linestyle="--", marker="o", markerfacecolor="white", label=draw),
    ]
    if crosses:
        handles.append(
            Line2D([0], [0], color=DRAW_COLOR, linestyle="", marker="x", label="Δ, interval not computable")
        )
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), frameon=False)


def save_figure(plt: Any, fig: Any, out_dir: Path, stem: str) -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    svg, png = out_dir / f"{stem}.svg", out_dir / f"{stem}.png"
    fig.savefig(svg, format="svg", metadata={"Date": None})
    fig.savefig(png, format="png", dpi=110, metadata={"Software": None})
    plt.close(fig)
    return svg, png


def forest_plot(report: Report, out_dir: Path) -> tuple[Path, Path] | None:
    """Write ``forest.svg`` and ``forest.png`` into ``out_dir``; None when there is nothing to plot."""
    pooled = [c for c in report.comparisons if c.task is None and c.delta is not None]
    if not pooled:
        return None
    plt = pyplot()
    metrics = list(dict.fromkeys(c.metric for c in pooled))
    cells = list(dict.fromkeys(c.cell for c in pooled))
    labels = {
        c.cell: f"{c.cell} −{c.layers[0]}" if len(c.layers) == 1 else f"{c.cell} ({len(c.layers)} layers)"
        for c in pooled
    }
    fig, axes = plt.subplots(
        1, len(metrics), figsize=(3.2 * len(metrics), 0.5 * len(cells) + 1.4), sharey=True, squeeze=False
    )
    for ax, metric in zip(axes[0], metrics, strict=True):
        scale = 100.0 if metric in BINARY_METRICS else 1.0
        for y, cell in enumerate(cells):
            c = next((x for x in pooled if x.cell == cell and x.metric == metric), None)
            if c is None or c.delta is None:
                continue
            draw_interval(ax, y, c.delta, c.ci_low, c.ci_high, real=c.real, scale=scale)
        ax.axvline(0.0, color="black", linewidth=0.8)
        unit = {"rate": " (pts)", "usd": " (USD)"}.get(BY_NAME[metric].unit, "") if metric in BY_NAME else ""
        ax.set_title(f"Δ {METRIC_LABELS.get(metric, metric)}{unit}")
        ax.grid(axis="x", color="#e5e5e5")
        ax.set_yticks(range(len(cells)))
        ax.set_yticklabels([labels[c] for c in cells])
        ax.invert_yaxis()
    _legend(fig, "real (Holm-adjusted)", "draw", crosses=True)
    fig.suptitle(f"Δ = cell − control ({report.run.control}), {int(100 * (1 - report.alpha))}% intervals")
    fig.tight_layout(rect=(0, 0.08, 1, 0.95))
    return save_figure(plt, fig, out_dir, "forest")


def pieces_plot(report: Report, out_dir: Path) -> tuple[Path, Path] | None:
    """``pieces.svg``/``.png``: the forest plot of a piece run's effects (None: no effect to draw)."""
    info = report.piece_design
    rows = [r for r in report.pieces if r.effect is not None]
    if info is None or not rows:
        return None
    plt = pyplot()
    scale = 100.0 if info.metric in BINARY_METRICS else 1.0
    fig, ax = plt.subplots(figsize=(6.4, 0.4 * len(rows) + 1.6))
    for y, r in enumerate(rows):
        assert r.effect is not None
        draw_interval(ax, y, r.effect, r.ci_low, r.ci_high, real=r.verdict in ("helps", "hurts"), scale=scale)
    ax.axvline(0.0, color="black", linewidth=0.8)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([r.id for r in rows])
    ax.invert_yaxis()
    ax.grid(axis="x", color="#e5e5e5")
    unit = " (pts)" if scale == 100.0 else ""
    ax.set_title(f"effect on {METRIC_LABELS.get(info.metric, info.metric)}{unit}: with − without the piece")
    _legend(fig, "helps / hurts (Holm)", "draw / undecided")
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    return save_figure(plt, fig, out_dir, "pieces")
