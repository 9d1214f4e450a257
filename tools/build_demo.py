"""Rebuild the bundled demo store ``flowkit/demo/asterisk5_demo.zarr`` from the shared corpus.

Deterministic: the same corpus gives the same clips, store bytes and fingerprint. Picks
30 clips per (speaker, language) pair - every other one of the 60 shortest, skipping the
near-silent ``*_silence-N`` clips - so the demo holds all 4 speakers and 5 languages in
about 4 MB. Log-mel latents (the default encoder), energy-aligner word timings
(``units_estimated = True``), and at least 3 validation clips per speaker.

Usage: python tools/build_demo.py [--corpus ../shared/data/asterisk-5voice]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_CORPUS = REPO.parent / "shared" / "data" / "asterisk-5voice"
DEMO = REPO / "flowkit" / "demo" / "asterisk5_demo.zarr"
PER_PAIR = 30
CHUNK_FRAMES = 8192  # small chunks: the padded last chunk costs at most 1.3 MB in git


def pick_clips(corpus: Path) -> list[dict[str, str]]:
    import soundfile as sf

    groups: dict[tuple[str, str], list[tuple[float, str, str]]] = {}
    for line in (corpus / "metadata.csv").read_text(encoding="utf-8").splitlines():
        seg, text, speaker, language = line.split("|")
        if "_silence-" in seg:
            continue
        seconds = sf.info(str(corpus / "wavs" / f"{seg}.flac")).duration
        groups.setdefault((speaker, language), []).append((round(seconds, 4), seg, text))
    picked = []
    for (speaker, language), clips in sorted(groups.items()):
        for _, seg, text in sorted(clips)[: 2 * PER_PAIR : 2]:
            picked.append({"id": seg, "audio": str(corpus / "wavs" / f"{seg}.flac"), "text": text,
                           "speaker": speaker, "language": language})
    return picked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    args = parser.parse_args()
    if not (args.corpus / "metadata.csv").is_file():
        sys.exit(f"build_demo: the asterisk-5voice corpus is not at {args.corpus} (pass --corpus DIR); "
                 "the bundled demo store is left as it is")
    from flowkit.data.aligners import EnergyAligner
    from flowkit.data.prepare import PrepareSettings, prepare_store
    from flowkit.data.store import REJECTIONS_FILE

    clips = pick_clips(args.corpus)
    with tempfile.TemporaryDirectory() as tmp:
        manifest = Path(tmp) / "demo.jsonl"
        manifest.write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in clips), encoding="utf-8")
        out = Path(tmp) / "asterisk5_demo.zarr"
        settings = PrepareSettings(aligner=EnergyAligner(), chunk_frames=CHUNK_FRAMES, val_fraction=0.05,
                                   min_val_per_speaker=3)
        summary = prepare_store([manifest], out, settings=settings, workers=2, progress=False)
        if summary.rejected:
            sys.exit(f"build_demo: unexpected rejections {dict(summary.rejected)}; see {out / REJECTIONS_FILE}")
        (out / REJECTIONS_FILE).unlink()  # empty, and its paths would name the temporary folder
        if DEMO.exists():
            shutil.rmtree(DEMO)
        shutil.copytree(out, DEMO)
    size = sum(p.stat().st_size for p in DEMO.rglob("*") if p.is_file())
    files = sum(1 for p in DEMO.rglob("*") if p.is_file())
    print(f"demo store: {summary.accepted} clips, {summary.audio_seconds / 60:.1f} min, {size / 1e6:.1f} MB "
          f"in {files} files, fingerprint {summary.fingerprint[:16]} -> {DEMO.relative_to(REPO)}")


if __name__ == "__main__":
    main()
