"""Report rendering: spectrograms drawn at the size the page shows them,
one channel label per row (none running into the neighbouring panel), audio players that
load the clip's length."""

from __future__ import annotations

import re

import numpy as np

from flowkit.report.document import Audio, Document, Figure, SampleBlock, Section
from flowkit.report.plots import SPECTROGRAM_WIDTH_PX, spectrograms_figure, spectrograms_png
from flowkit.report.render_html import png_size, render_html


def _panels() -> list[tuple[str, np.ndarray]]:
    rng = np.random.default_rng(0)
    return [("generated", rng.standard_normal((240, 80))), ("ground truth", rng.standard_normal((260, 80)))]


def test_spectrograms_are_shown_at_their_own_pixel_size_with_metadata_preloaded():
    png = spectrograms_png(_panels(), frame_rate=100.0)
    width, height = png_size(png)
    assert width == SPECTROGRAM_WIDTH_PX and height > 150
    block = SampleBlock("sample 1", "caption", [Figure("spectrograms", png, "s.png")],
                        [("generated", Audio(b"RIFF0000WAVE", "g.wav"))])
    page = render_html(Document("r", [Section("Samples", [block])]))
    (img,) = re.findall(r"<img [^>]*>", page)
    assert f'width="{width}" height="{height}"' in img
    # the page never stretches an image past its pixels (that is what blurred them)
    assert "max-width: 100%; height: auto;" in page and not re.search(r"img\s*\{[^}]*(?<![-\w])width:\s*100%", page)
    assert 'preload="metadata"' in page and 'preload="none"' not in page


def test_the_second_panel_has_no_label_over_the_first():
    fig = spectrograms_figure(_panels(), frame_rate=100.0)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    left, right = fig.axes[0], fig.axes[1]
    assert left.get_ylabel() == "channel" and right.get_ylabel() == ""
    right_box = right.get_tightbbox(renderer)
    assert right_box.x0 >= left.get_window_extent(renderer).x1  # nothing of panel 2 reaches into panel 1
