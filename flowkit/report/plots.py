"""Report plots as PNG bytes (matplotlib, Agg backend: no display needed).

Curves are drawn against the training step; several runs share one axes so they can be
compared directly. Spectrograms are ``[n d]`` latents drawn with frames on x.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")  # before pyplot: reports are written on machines without a display

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

__all__ = ["SPECTROGRAM_WIDTH_PX", "Curve", "curves_png", "spectrograms_figure", "spectrograms_png"]

# Small figures: the report embeds every image, and docs/images keeps them under 200 KB.
_DPI = 80
#: pixel width the report shows a spectrogram row at (rendered at that size, never scaled up)
SPECTROGRAM_WIDTH_PX = 900
_SPECTROGRAM_DPI = 100


class Curve:
    """One line: a label (the run, or the pass of an evaluation) and its points."""

    def __init__(self, label: str, steps: Sequence[int], values: Sequence[float], *, dashed: bool = False,
                 highlight: bool = False) -> None:
        self.label = label
        self.steps = list(steps)
        self.values = list(values)
        self.dashed = dashed
        self.highlight = highlight  # drawn thicker and on top (the best run of a comparison)


def _png(fig: plt.Figure, dpi: int = _DPI, tight: bool = True) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight" if tight else None)
    plt.close(fig)
    return buffer.getvalue()


def curves_png(title: str, ylabel: str, curves: Sequence[Curve], *, log_y: bool = False) -> bytes:
    """A line plot of ``curves`` against step; a single point is drawn as a marker.

    ``log_y`` is applied only when every value is positive (a loss can be negative for
    some schedules, and a log axis would hide it).
    """
    drawn = [c for c in curves if c.steps]
    # Many curves (a sweep): the legend goes beside the axes in columns of up to 24 entries,
    # the figure widens for it, and the colours come from a qualitative map that has as many.
    many = len(drawn) > _LEGEND_INSIDE
    columns = -(-len(drawn) // _LEGEND_ROWS) if many else 1
    font = 7 if len(drawn) <= 24 else 6
    # a legend column's width in inches: the line sample, then the longest label (~0.55 em a character)
    column_in = 0.55 + max((len(c.label) + 7 * c.highlight for c in drawn), default=0) * font * 0.55 / 72
    fig, ax = plt.subplots(figsize=(6.4 + (column_in * columns if many else 0), 3.2 if len(drawn) <= 16 else 4.2))
    colours = _colours(len(drawn)) if many else [None] * len(drawn)
    for curve, colour in zip(drawn, colours, strict=True):
        ax.plot(
            curve.steps,
            curve.values,
            linestyle="--" if curve.dashed else "-",
            marker="o" if len(curve.steps) < 12 else None,
            markersize=3,
            linewidth=2.6 if curve.highlight else 1.2,
            zorder=3 if curve.highlight else 2,
            color=colour,
            label=curve.label + (" (best)" if curve.highlight else ""),
        )
    values = [v for c in curves for v in c.values if np.isfinite(v)]
    # a log axis only pays off over a decade or more; below that plain ticks read better
    if log_y and values and min(values) > 0 and max(values) / min(values) >= 10:
        ax.set_yscale("log")
    ax.set_title(title)
    ax.set_xlabel("step")
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    if many:
        ax.legend(fontsize=font, loc="upper left", bbox_to_anchor=(1.01, 1.0), ncol=columns,
                  frameon=False, borderaxespad=0.0)
        # room for the legend set by hand: a tight crop would draw the big legend twice
        axes_in = 5.4
        fig.subplots_adjust(left=0.9 / fig.get_figwidth(), right=(0.9 + axes_in) / fig.get_figwidth(),
                            top=0.9, bottom=0.14)
        return _png(fig, tight=False)
    if len(drawn) > 1:
        ax.legend(fontsize=8)
    return _png(fig)


#: Up to this many curves the legend sits inside the axes; beyond, beside them.
_LEGEND_INSIDE = 6
_LEGEND_ROWS = 24


def _colours(n: int) -> list[tuple[float, ...]]:
    """``n`` distinguishable colours: tab10, tab20, then evenly spaced on a perceptual map."""
    if n <= 10:
        return [plt.get_cmap("tab10")(i) for i in range(n)]
    if n <= 20:
        return [plt.get_cmap("tab20")(i) for i in range(n)]
    cmap = plt.get_cmap("turbo")
    return [cmap(0.05 + 0.9 * i / (n - 1)) for i in range(n)]


def spectrograms_figure(panels: Sequence[tuple[str, np.ndarray]], *, frame_rate: float | None = None) -> plt.Figure:
    """Latents side by side: each panel is ``(title, latents [n d])``, one shared colour scale.

    The row is laid out for `SPECTROGRAM_WIDTH_PX` pixels; the panels share the channel
    axis, labelled once on the left, so no label runs into a neighbouring panel.
    """
    finite = [p[np.isfinite(p)] for _, p in panels if p.size]
    lo = min((float(f.min()) for f in finite if f.size), default=0.0)
    hi = max((float(f.max()) for f in finite if f.size), default=1.0)
    width = SPECTROGRAM_WIDTH_PX / _SPECTROGRAM_DPI
    fig, axes = plt.subplots(1, len(panels), figsize=(width, 2.6), squeeze=False, sharey=True,
                             layout="constrained")
    for k, (ax, (title, latents)) in enumerate(zip(axes[0], panels, strict=True)):
        n = latents.shape[0]
        extent = (0.0, n / frame_rate if frame_rate else float(n), 0.0, float(latents.shape[1]))
        ax.imshow(latents.T, origin="lower", aspect="auto", vmin=lo, vmax=hi, cmap="magma", extent=extent)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("seconds" if frame_rate else "frame")
        if k == 0:
            ax.set_ylabel("channel")
    return fig


def spectrograms_png(panels: Sequence[tuple[str, np.ndarray]], *, frame_rate: float | None = None) -> bytes:
    """`spectrograms_figure` as PNG bytes, about `SPECTROGRAM_WIDTH_PX` pixels wide."""
    # constrained layout already fits the labels: no tight crop, so the width is exact
    return _png(spectrograms_figure(panels, frame_rate=frame_rate), dpi=_SPECTROGRAM_DPI, tight=False)
