"""Measure the judges on real recordings: the figures docs/judges.md quotes.

- ASR: corpus WER/CER of ``asr.whisper`` (the model found with no configuration) and of
  ``asr.pocketsphinx`` on the same English clips, with seconds per clip;
- speaker: ``speaker.resemblyzer`` cosine similarity of pairs of clips of the same speaker
  and of different speakers (range and mean), on each speaker's longest clips;
- quality: ``quality.dnsmos`` OVRL/SIG/BAK of clean clips and of the same clips with white
  noise at ``--snr`` dB.

The clips are the bundled demo clips (flowkit/demo/clips: 30 English clips of allison, 30
per other speaker) unless ``--corpus`` names an LJSpeech-style folder
(``metadata.csv`` as ``id|text|speaker|language``, audio in ``wavs/``). Prints one JSON
object.

Usage: python tools/judge_figures.py [--corpus DIR] [--clips 30] [--per-speaker 6] [--snr 10]
           [--only asr speaker quality]
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from pathlib import Path

import numpy as np


def _clips(corpus: Path) -> list[dict]:
    rows = []
    for line in (corpus / "metadata.csv").read_text(encoding="utf-8").splitlines():
        parts = line.split("|")
        if len(parts) >= 4:
            audio = next((corpus / "wavs" / f"{parts[0]}{s}" for s in (".flac", ".wav")
                          if (corpus / "wavs" / f"{parts[0]}{s}").is_file()), None)
            if audio is not None:
                rows.append({"id": parts[0], "text": parts[1], "speaker": parts[2], "language": parts[3],
                             "audio": audio})
    return rows


def _read(path: Path) -> tuple[np.ndarray, int]:
    import soundfile as sf

    audio, sr = sf.read(str(path), dtype="float32", always_2d=False)
    return audio, int(sr)


def asr_figures(english: list[dict]) -> dict:
    from flowkit import registry
    from flowkit.judges.choice import default_recognizer
    from flowkit.judges.scoring import error_rates

    out = {"clips": len(english), "words": sum(len(c["text"].split()) for c in english)}
    for asr in (default_recognizer(), registry.build("asr", "pocketsphinx")):
        audios = [_read(c["audio"]) for c in english]
        asr.transcribe(*audios[0])  # load the model outside the timing
        started = time.perf_counter()
        hyps = [asr.transcribe(a, sr, "en") for a, sr in audios]
        seconds = time.perf_counter() - started
        rates = error_rates([c["text"] for c in english], hyps)
        out[asr.describe()["name"]] = {"judge": asr.describe(), "wer": round(rates.wer, 4), "cer": round(rates.cer, 4),
                                       "s_per_clip": round(seconds / len(english), 3),
                                       "wrong": [(c["text"], h) for c, h in zip(english, hyps, strict=True)
                                                 if error_rates([c["text"]], [h]).wer > 0]}
    return out


def speaker_figures(by_speaker: dict[str, list[dict]]) -> dict:
    from flowkit import registry

    judge = registry.build("speaker", "resemblyzer")
    emb = {s: [judge.embed(*_read(c["audio"])) for c in clips] for s, clips in by_speaker.items()}
    same = [float(a @ b) for s in emb for a, b in itertools.combinations(emb[s], 2)]
    other = [float(a @ b) for s, t in itertools.combinations(emb, 2) for a in emb[s] for b in emb[t]]
    per = {s: round(float(np.mean([a @ b for a, b in itertools.combinations(e, 2)])), 3) for s, e in emb.items()}

    def summary(v: list[float]) -> dict:
        return {"pairs": len(v), "min": round(min(v), 3), "mean": round(float(np.mean(v)), 3), "max": round(max(v), 3)}

    return {"judge": judge.describe(), "same_speaker": summary(same), "other_speaker": summary(other),
            "same_speaker_mean_by_speaker": per}


def quality_figures(clips: list[dict], snr_db: float) -> dict:
    from flowkit import registry

    judge = registry.build("quality", "dnsmos")
    rng = np.random.default_rng(0)
    clean, noisy = [], []
    for c in clips:
        audio, sr = _read(c["audio"])
        noise = rng.standard_normal(audio.size).astype(np.float32)
        noise *= np.sqrt(np.mean(audio ** 2) / np.mean(noise ** 2) / 10 ** (snr_db / 10))
        clean.append(judge.score(audio, sr))
        noisy.append(judge.score(np.clip(audio + noise, -1, 1), sr))

    def mean(rows: list[dict]) -> dict:
        return {k: round(float(np.mean([r[k] for r in rows])), 3) for k in ("ovrl", "sig", "bak")}

    return {"judge": judge.describe(), "clips": len(clips), "snr_db": snr_db, "clean": mean(clean),
            "noisy": mean(noisy)}


def main() -> None:
    from flowkit.data.demo import demo_clips_path

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=None)
    parser.add_argument("--clips", type=int, default=30, help="English clips of the ASR comparison")
    parser.add_argument("--per-speaker", type=int, default=6, help="clips per speaker for the similarities")
    parser.add_argument("--snr", type=float, default=10.0, help="dB of the white noise added for DNSMOS")
    parser.add_argument("--only", nargs="+", default=["asr", "speaker", "quality"],
                        choices=["asr", "speaker", "quality"])
    args = parser.parse_args()
    rows = _clips(args.corpus or demo_clips_path())
    from flowkit.judges.normalise import normalise_for_scoring

    # clips whose text has words to score ("[beep]" or "..." normalise to nothing)
    english = [r for r in rows if r["language"] == "en" and normalise_for_scoring(r["text"], "en")][: args.clips]
    import soundfile as sf

    by_speaker: dict[str, list[dict]] = {}
    for r in sorted(rows, key=lambda r: (-sf.info(str(r["audio"])).duration, r["id"])):  # the longest clips
        if not normalise_for_scoring(r["text"], r["language"]):  # "(10 secondi di silenzio)"
            continue
        if len(by_speaker.setdefault(r["speaker"], [])) < args.per_speaker:
            by_speaker[r["speaker"]].append(r)
    parts = {"asr": lambda: asr_figures(english), "speaker": lambda: speaker_figures(by_speaker),
             "quality": lambda: quality_figures(english[:8], args.snr)}
    print(json.dumps({k: f() for k, f in parts.items() if k in args.only}, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
