"""report.html opens offline in headless Chromium and shows its plots and audio players."""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

from flowkit.report.document import Audio, Document, Figure, SampleBlock, Section
from flowkit.report.plots import Curve, curves_png, spectrograms_png
from flowkit.report.render_html import render_html
from flowkit.synth.wav import wav_bytes


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def _document() -> Document:
    curve = curves_png("training loss", "loss", [Curve("run", [1, 2, 3, 4], [2.0, 1.5, 1.2, 1.1])])
    spec = spectrograms_png([("generated", np.random.default_rng(0).normal(size=(60, 80))),
                             ("ground truth", np.zeros((60, 80)))], frame_rate=100.0)
    tone = 0.2 * np.sin(np.linspace(0, 2000, 8000)).astype(np.float32)
    sample = SampleBlock("item", "caption: EMA weights, step 4", [Figure("spec", spec, "s.png")],
                         [("generated", Audio(wav_bytes(tone, 16000), "g.wav"))])
    return Document("browser check", [Section("Curves", [Figure("loss", curve, "loss.png")]),
                                      Section("Samples", [sample])])


def test_html_embeds_images_and_audio() -> None:
    html = render_html(_document())
    assert len(re.findall(r'<img [^>]*src="data:image/png;base64,', html)) == 2
    assert len(re.findall(r'<audio [^>]*src="data:audio/wav;base64,', html)) == 1
    assert "http://" not in html and "https://" not in html  # opens offline


def test_chromium_screenshot(tmp_path: Path) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium is not on PATH (CI installs Debian's chromium in .ci/run)")
    page = tmp_path / "report.html"
    page.write_text(render_html(_document()))
    shot = tmp_path / "shot.png"
    cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}", "--window-size=1200,3000",
           page.as_uri()]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert shot.is_file(), proc.stderr[-2000:]
    data = shot.read_bytes()
    assert _png_size(data) == (1200, 3000)
    # A blank page compresses to a few KB; plots, text and players make it much larger.
    assert len(data) > 20_000
    from PIL import Image

    pixels = np.asarray(Image.open(shot).convert("L"))
    assert (pixels < 128).mean() > 0.005  # dark ink: text and curves were drawn
