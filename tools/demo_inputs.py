"""Lay the bundled demo recordings out as another corpus kind, to try `flowkit prepare` on it.

    python tools/demo_inputs.py libritts data/demo-libritts      # speaker/chapter/*.wav + .normalized.txt
    python tools/demo_inputs.py lhotse   data/demo-lhotse        # recordings + supervisions + cuts (.jsonl.gz)
    python tools/demo_inputs.py hf       data/demo-hf            # Dataset.save_to_disk (audio bytes inside)
    python tools/demo_inputs.py parquet  data/demo-parquet       # one parquet file with an Audio column

Each is made from the clips in ``flowkit/demo/clips`` (``--clips DIR`` for another
LJSpeech-style folder with ``id|text|speaker|language`` lines); ``--limit N`` keeps the
first N clips. The docs' "bring your own data" examples run these, then prepare the result.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

KINDS = ("libritts", "lhotse", "hf", "parquet")


def default_clips() -> Path:
    from flowkit.data.demo import demo_clips_path

    return demo_clips_path()


def read_clips(root: Path, limit: int | None) -> list[dict]:
    rows = []
    for line in (root / "metadata.csv").read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        sid, text, speaker, language = (line.split("|") + ["", "", ""])[:4]
        audio = next((root / "wavs" / f"{sid}{s}" for s in (".flac", ".wav", ".ogg")
                      if (root / "wavs" / f"{sid}{s}").is_file()), None)
        if audio is not None:
            rows.append({"id": sid, "text": text, "speaker": speaker, "language": language, "audio": audio.resolve()})
    return rows[:limit] if limit else rows


def write_libritts(rows: list[dict], out: Path) -> None:
    """<speaker number>/<chapter = language index>/<speaker>_<chapter>_000000_<n>.wav + transcripts."""
    import soundfile as sf

    speakers = {s: str(100 + k) for k, s in enumerate(sorted({r["speaker"] for r in rows}))}
    chapters = {lang: str(1000 + k) for k, lang in enumerate(sorted({r["language"] for r in rows}))}
    for n, r in enumerate(rows):
        spk, chap = speakers[r["speaker"]], chapters[r["language"]]
        stem = out / spk / chap / f"{spk}_{chap}_000000_{n:06d}"
        stem.parent.mkdir(parents=True, exist_ok=True)
        audio, sr = sf.read(str(r["audio"]), dtype="float32")
        sf.write(str(stem) + ".wav", audio, sr, subtype="PCM_16")
        Path(str(stem) + ".normalized.txt").write_text(r["text"] + "\n", encoding="utf-8")
        Path(str(stem) + ".original.txt").write_text(r["text"] + "\n", encoding="utf-8")


def write_lhotse(rows: list[dict], out: Path) -> None:
    from lhotse import CutSet, Recording, RecordingSet, SupervisionSegment, SupervisionSet

    recordings = [Recording.from_file(str(r["audio"]), recording_id=r["id"]) for r in rows]
    supervisions = [SupervisionSegment(r["id"], r["id"], 0.0, rec.duration, text=r["text"], speaker=r["speaker"],
                                       language=r["language"]) for r, rec in zip(rows, recordings, strict=True)]
    out.mkdir(parents=True, exist_ok=True)
    recs, sups = RecordingSet.from_recordings(recordings), SupervisionSet.from_segments(supervisions)
    recs.to_file(out / "demo_recordings_all.jsonl.gz")
    sups.to_file(out / "demo_supervisions_all.jsonl.gz")
    CutSet.from_manifests(recordings=recs, supervisions=sups).to_file(out / "demo_cuts_all.jsonl.gz")


def _hf_dataset(rows: list[dict]):
    import datasets

    data = {
        "audio": [{"bytes": r["audio"].read_bytes(), "path": r["audio"].name} for r in rows],
        "text": [r["text"] for r in rows], "speaker_id": [r["speaker"] for r in rows],
        "language": [r["language"] for r in rows], "id": [r["id"] for r in rows],
    }
    return datasets.Dataset.from_dict(data).cast_column("audio", datasets.Audio())


def write_hf(rows: list[dict], out: Path) -> None:
    _hf_dataset(rows).save_to_disk(str(out))


def write_parquet(rows: list[dict], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    _hf_dataset(rows).to_parquet(str(out / "train-00000-of-00001.parquet"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=KINDS)
    parser.add_argument("out", type=Path)
    parser.add_argument("--clips", type=Path, default=None, help="LJSpeech-style folder (default: the bundled clips)")
    parser.add_argument("--limit", type=int, default=None)
    args = parser.parse_args()
    if args.out.exists():
        shutil.rmtree(args.out)
    rows = read_clips(args.clips or default_clips(), args.limit)
    if not rows:
        sys.exit("no clips found")
    {"libritts": write_libritts, "lhotse": write_lhotse, "hf": write_hf,
     "parquet": write_parquet}[args.kind](rows, args.out)
    print(f"{args.kind}: {len(rows)} clips in {args.out}")


if __name__ == "__main__":
    main()
