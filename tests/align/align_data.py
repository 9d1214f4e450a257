"""The align tests' data: a store of real speech (the bundled allison English clips) and a tiny aligner config.

A module of its own name (not conftest) so that `from align_data import ...` finds this one
whatever other test folders are collected in the same session."""

from __future__ import annotations

import shutil
from pathlib import Path

from flowkit.data.demo import demo_clips_path

#: a transcript far longer than any 2-second clip can say: more tokens than frames
LONG_TEXT = " ".join(["supercalifragilistic expialidocious"] * 8)


def make_store(root: Path, clips: int = 20, long_text_clip: bool = False) -> Path:
    """``root/data.zarr`` from the first ``clips`` allison English demo clips (energy timings as
    prepare's); with ``long_text_clip``, one more clip whose transcript is `LONG_TEXT`."""
    from flowkit.data.aligners import EnergyAligner
    from flowkit.data.prepare import PrepareSettings, prepare_store

    src = demo_clips_path()
    rows = [line for line in (src / "metadata.csv").read_text(encoding="utf-8").splitlines()
            if line.split("|")[2:4] == ["allison", "en"]][:clips]
    corpus = root / "corpus"
    (corpus / "wavs").mkdir(parents=True)
    if long_text_clip:
        first = rows[0].split("|")
        shutil.copy(src / "wavs" / f"{first[0]}.flac", corpus / "wavs" / "long_text.flac")
        rows.append(f"long_text|{LONG_TEXT}|allison|en")
    for line in rows:
        name = line.split("|")[0]
        if name != "long_text":
            shutil.copy(src / "wavs" / f"{name}.flac", corpus / "wavs" / f"{name}.flac")
    (corpus / "metadata.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    import attrs

    settings = attrs.evolve(PrepareSettings(), aligner=EnergyAligner())
    prepare_store([corpus], root / "data.zarr", settings=settings, progress=False, workers=1)
    return root / "data.zarr"


#: a small, quick aligner (the test asserts contracts, not quality)
TINY = ["AlignRun.text = @text.chars()", "aligner.learned.channels = 32", "aligner.learned.attn_dim = 16",
        "aligner.learned.text_layers = 1", "aligner.learned.frame_layers = 1", "AlignRun.log_every = 2",
        "AlignRun.save_every = 3", "AlignRun.bin_start = 2", "AlignRun.warmup_steps = 2",
        "AlignRun.batch_frames = 2000"]
