"""End to end: real clips prepared with vocos_mel -> the debug preset trains -> Vocos decodes.

A tiny random-weight Vocos directory in the published layout stands in for
charactr/vocos-mel-24khz (nothing is downloaded); the clips are the bundled real recordings.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import soundfile as sf
from typer.testing import CliRunner
from vocos_helpers import REPO, write_tiny_release

from flowkit.cli.app import app

SPEAKERS = 2
PER_SPEAKER = 6


def _small_corpus(source: Path, root: Path) -> Path:
    """A metadata.csv + wavs/ folder of a few of ``source``'s real clips, two speakers."""
    rows, taken = [], {}
    for line in (source / "metadata.csv").read_text(encoding="utf-8").splitlines():
        parts = line.split("|")
        speaker = parts[2] if len(parts) > 2 else ""
        if len(taken) < SPEAKERS or speaker in taken:
            if taken.get(speaker, 0) < PER_SPEAKER:
                taken[speaker] = taken.get(speaker, 0) + 1
                rows.append(line)
    (root / "wavs").mkdir(parents=True)
    for line in rows:
        found = sorted((source / "wavs").glob(line.split("|")[0] + ".*"))
        shutil.copy(found[0], root / "wavs" / found[0].name)
    (root / "metadata.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return root


@pytest.mark.slow  # prepares, trains and decodes: ~40 s on two cores
def test_vocos_mel_run_synthesizes_through_vocos(demo_clips: Path, tmp_path: Path) -> None:
    release = write_tiny_release(tmp_path / "vocos-mel-24khz")
    corpus = _small_corpus(demo_clips, tmp_path / "corpus")
    store, run = tmp_path / "clips.zarr", tmp_path / "run"
    cli = CliRunner()
    result = cli.invoke(app, ["prepare", str(corpus), "--out", str(store), "--encoder", "vocos_mel",
                              "--workers", "1", "--quiet"])
    assert result.exit_code == 0, result.output
    result = cli.invoke(app, ["train", str(REPO / "gin" / "debug.gin"), "--data", str(store), "--out", str(run),
                              "-b", "Trainer.steps = 4", "-b", "Trainer.eval_every = 4", "-b", "Trainer.save_every = 4",
                              "-b", "Trainer.vocoder = @vocoder.vocos()", "-b", f"vocoder.vocos.path = '{release}'"])
    assert result.exit_code == 0, result.output

    wav = tmp_path / "out.wav"
    result = cli.invoke(app, ["synthesize", str(run), "--text", "Please try again.", "--out", str(wav),
                              "--seconds", "1.0", "--steps", "4", "--vocoder", "vocos", "--vocoder-path", str(release)])
    assert result.exit_code == 0, result.output
    frames = round(1.0 * 24000 / 256)  # 94 frames of 93.75 Hz
    info = sf.info(str(wav))
    assert info.samplerate == 24000 and info.frames == (frames - 1) * 256
    assert f"vocoder.vocos ({release})" in result.output.replace("\n", "")  # the console wraps at spaces

    result = cli.invoke(app, ["report", str(run), "--samples", "1", "--out", str(tmp_path / "rep")])
    assert result.exit_code == 0, result.output
    md = (tmp_path / "rep" / "report.md").read_text(encoding="utf-8")
    assert f"audio by vocoder.vocos ({release.resolve()}) at 24000 Hz" in md and "level as decoded" in md

    # the stores move away: the checkpoint's own encoder record and vocoder still decode right
    store.rename(tmp_path / "moved.zarr")
    again = tmp_path / "again.wav"
    result = cli.invoke(app, ["synthesize", str(run), "--text", "Please try again.", "--out", str(again),
                              "--seconds", "1.0", "--steps", "4"])
    assert result.exit_code == 0, result.output
    # input warnings (language, vocabulary) may come; none about the encoder or the vocoder
    assert not [line for line in result.output.splitlines()
                if line.startswith("warning")
                and ("vocoder" in line or "encoder" in line or "store" in line)], result.output
    assert sf.info(str(again)).samplerate == 24000 and sf.info(str(again)).frames == (frames - 1) * 256
