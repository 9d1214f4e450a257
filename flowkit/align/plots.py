"""An aligner run's report: its loss curve and the alignments of a few clips.

``RUN/report/loss.png``, ``RUN/report/align-<k>.png`` (each: the soft attention of the
frames over the tokens, the hard path MAS takes through it, and the word boundaries it
gives) and ``RUN/report.md`` / ``RUN/report.html`` that show them.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import numpy as np
import torch

from flowkit.io import atomic_write_text

__all__ = ["write_report"]

CLIPS = 3  # clips plotted


def _loss_plot(records: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.2))
    steps = [r["step"] for r in records]
    for key, label in (("loss", "total"), ("forward_sum", "forward-sum"), ("binarisation", "binarisation")):
        pts = [(r["step"], r[key]) for r in records if r.get(key) is not None]
        if pts:
            ax.plot(*zip(*pts, strict=True), label=label)
    ax.set_xlabel("step")
    ax.set_ylabel("loss per token")
    ax.set_xlim(0, max(steps) if steps else 1)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _alignment_plot(log_attn: np.ndarray, durations: np.ndarray, title: str, words: list[tuple[str, int, int]],
                    path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 3.6))
    ax.imshow(np.exp(log_attn.T), origin="lower", aspect="auto", cmap="magma", interpolation="none")
    edges = np.concatenate([[0], np.cumsum(durations)])
    ax.step(edges, np.arange(len(edges)) - 0.5, where="post", color="cyan", linewidth=0.8, label="MAS path")
    for word, start, end in words:
        ax.axvline(start, color="white", linewidth=0.4, alpha=0.6)
        ax.text((start + end) / 2, len(durations) + 0.3, word, rotation=60, fontsize=6, ha="left", va="bottom",
                clip_on=False)
    ax.set_xlabel("frame")
    ax.set_ylabel("token")
    ax.set_title(title, fontsize=8, pad=40)
    ax.legend(loc="lower right", fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_report(run: Path, *, corpus: Any, model: torch.nn.Module, progress: bool = True) -> Path:
    """Write the run's report (see the module docstring); returns ``RUN/report.html``."""
    from flowkit.align.corpus import collate
    from flowkit.align.search import maximum_path
    from flowkit.loggers.jsonl import read_records

    folder = run / "report"
    folder.mkdir(parents=True, exist_ok=True)
    records = [r for r in read_records(run / "metrics.jsonl") if r.get("kind") == "train"]
    _loss_plot(records, folder / "loss.png")
    usable = corpus.alignable()
    picks = usable[np.linspace(0, len(usable) - 1, min(CLIPS, len(usable))).astype(int)] if len(usable) else []
    model.eval()
    rows = []
    with torch.no_grad():
        for k, i in enumerate(picks.tolist() if len(picks) else []):
            batch = collate(corpus, [i])
            log_attn = model(batch.tokens, batch.token_mask, batch.latents, batch.frame_mask)
            durations = maximum_path(log_attn, batch.n_tokens, batch.n_frames).sum(-1)[0].numpy()
            tokens = corpus.tokens[i]
            text = corpus.texts[i]
            words = [(text[cs:ce], fs, fe) for cs, ce, fs, fe in tokens.word_frames(durations)]
            _alignment_plot(log_attn[0].numpy(), durations, f"{corpus.segment_ids[i]}: {text}", words,
                            folder / f"align-{k}.png")
            rows.append((corpus.segment_ids[i], text, f"report/align-{k}.png"))
    last = records[-1] if records else {}
    summary = (f"steps {last.get('step', 0)}, loss {last.get('loss', float('nan')):.4f}"
               if records else "no training records")
    md = [f"# Aligner run {run.name}", "", summary, "", "![loss](report/loss.png)", ""]
    md += [f"## {sid}\n\n{text}\n\n![alignment]({png})\n" for sid, text, png in rows]
    atomic_write_text(run / "report.md", "\n".join(md) + "\n")
    body = [f"<h1>Aligner run {html.escape(run.name)}</h1>", f"<p>{html.escape(summary)}</p>",
            '<img src="report/loss.png" alt="loss curve">']
    body += [f"<h2>{html.escape(sid)}</h2><p>{html.escape(text)}</p><img src=\"{png}\" alt=\"alignment\">"
             for sid, text, png in rows]
    page = "<!doctype html><meta charset=\"utf-8\"><title>aligner report</title>\n" + "\n".join(body) + "\n"
    atomic_write_text(run / "report.html", page)
    return run / "report.html"
