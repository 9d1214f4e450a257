"""Rebuild the bundled demo data from the shared corpus: the clips and the store made from them.

Deterministic on one machine and torch build: the same corpus gives the same clips, store bytes
and fingerprint. Another CPU or build may round a few float16 latents the other way (9 of 1.7M
values, one float16 step, rebuilt on an AMD EPYC against the committed store); the committed
store is the one the README's quick-start figures come from. Picks
30 clips per (speaker, language) pair - every other one of the 60 shortest, skipping the
near-silent ``*_silence-N`` clips - so the demo holds all 4 speakers and 5 languages.

- ``flowkit/demo/clips/``: the 150 picked recordings as they are in the corpus (FLAC,
  copied byte for byte, about 4.4 MB) with an LJSpeech-style ``metadata.csv``
  (``id|text|speaker|language``) and ``ATTRIBUTION.md``: ``flowkit prepare`` input that
  ships with every clone.
- ``flowkit/demo/sentences/``: 16 English sentences of allison, the input of ``make demo``
  (tools/demo.sh) and tools/memorise.py: clips of 1.8-3.6 s with at least 4 words, no
  ellipsis or bracketed note, 16 spread evenly over their durations (FLAC, copied byte for
  byte, about 0.8 MB; ``metadata.csv`` ``id|text|speaker|language|split``, every clip in
  ``train``: the demo memorises them). The demo clips of that speaker are single words and
  short phrases (median about 1 s), too short to judge sentences by.
- ``flowkit/demo/asterisk5_demo.zarr``: the same clips prepared - log-mel latents (the
  default encoder), energy-aligner word timings (``units_estimated = True``), and at least
  3 validation clips per speaker (about 4 MB).

Usage: python tools/build_demo.py [--corpus ../shared/data/asterisk-5voice]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_CORPUS = REPO.parent / "shared" / "data" / "asterisk-5voice"
DEMO = REPO / "flowkit" / "demo" / "asterisk5_demo.zarr"
CLIPS = REPO / "flowkit" / "demo" / "clips"
SENTENCES = REPO / "flowkit" / "demo" / "sentences"
PER_PAIR = 30


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


def pick_sentences(corpus: Path, n: int = 16) -> list[dict[str, str]]:
    """The demo's sentences (the rule is in the module docstring)."""
    import soundfile as sf

    pool = []
    for line in (corpus / "metadata.csv").read_text(encoding="utf-8").splitlines():
        seg, text, speaker, language = line.split("|")
        if speaker != "allison" or language != "en" or "_silence-" in seg:
            continue
        if "..." in text or "(" in text or "[" in text or len(text.split()) < 4:
            continue
        audio = corpus / "wavs" / f"{seg}.flac"
        seconds = sf.info(str(audio)).duration
        if 1.8 <= seconds <= 3.6:
            pool.append((seconds, seg, text, audio))
    pool.sort()
    chosen = sorted({round(i * (len(pool) - 1) / (n - 1)) for i in range(n)})
    return [{"id": pool[i][1], "audio": str(pool[i][3]), "text": pool[i][2], "speaker": "allison",
             "language": "en", "split": "train"} for i in chosen]


def write_clips(clips: list[dict[str, str]], dest: Path) -> None:
    """Copy the picked recordings into ``dest/wavs`` with their ``metadata.csv``."""
    if (dest / "wavs").exists():
        shutil.rmtree(dest / "wavs")  # the folder's other files (eval.lst) stay
    (dest / "wavs").mkdir(parents=True)
    for clip in clips:
        shutil.copyfile(clip["audio"], dest / "wavs" / Path(clip["audio"]).name)
    columns = ["id", "text", "speaker", "language"] + (["split"] if "split" in clips[0] else [])
    rows = "".join("|".join(c[k] for k in columns) + "\n" for c in clips)
    (dest / "metadata.csv").write_text(rows, encoding="utf-8")


CLIPS_ATTRIBUTION = """# Bundled demo clips: attribution

`wavs/` holds {n} recordings (30 per language, FLAC, 16 kHz mono) from the **asterisk-5voice**
corpus, unchanged; `metadata.csv` gives each one's transcript, speaker and language
(`id|text|speaker|language`, pipe-separated, no header). They are rebuilt by
`tools/build_demo.py`.

| speaker | language(s) | recorded by | licence |
|---|---|---|---|
| allison | en (US), es (MX) | Allison Smith | CC-BY-SA-3.0 |
| june | fr (CA) | June Wallack | CC-BY-SA-3.0 |
| carlo | it | Carlo Flora | CC-BY-3.0 |
| maxim | ru | Maxim Topal (ivrvoice.ru) | CC-BY-3.0 |

Source: Debian packages asterisk-core-sounds-{{en,es,fr,it,ru}} and their -g722 variants
(G.722 wideband, decoded to 16-bit PCM). Whoever redistributes these clips, or data derived
from them, keeps the attribution above and the licence of each voice (the CC-BY-SA-3.0
voices' recordings and derived data stay under CC-BY-SA-3.0).

`eval.lst` is a three-line test list of these clips in the Seed-TTS / F5-TTS `meta.lst` format
(`utt|prompt_text|prompt_wav|target_text|target_wav`) for `flowkit eval`: allison speaks one
sentence as the prompt of another.
"""


SENTENCES_ATTRIBUTION = """# Bundled demo sentences: attribution

`wavs/` holds {n} English recordings of Allison Smith (FLAC, 16 kHz mono) from the
**asterisk-5voice** corpus, unchanged; `metadata.csv` gives each one's transcript, speaker,
language and split (`id|text|speaker|language|split`, pipe-separated, no header). They are
rebuilt by `tools/build_demo.py`; `make demo` (tools/demo.sh) trains on them.

Recorded by Allison Smith; licence CC-BY-SA-3.0. Source: the Debian package
asterisk-core-sounds-en-g722 (G.722 wideband, decoded to 16-bit PCM). Whoever redistributes
these recordings, or data derived from them such as latents or a model trained on them, keeps
this attribution and the CC-BY-SA-3.0 licence.
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    args = parser.parse_args()
    if not (args.corpus / "metadata.csv").is_file():
        sys.exit(f"build_demo: the asterisk-5voice corpus is not at {args.corpus} (pass --corpus DIR); "
                 "the bundled demo store is left as it is")
    from flowkit.data.demo import demo_prepare_settings
    from flowkit.data.prepare import prepare_store
    from flowkit.data.store import REJECTIONS_FILE

    clips = pick_clips(args.corpus)
    write_clips(clips, CLIPS)
    (CLIPS / "ATTRIBUTION.md").write_text(CLIPS_ATTRIBUTION.format(n=len(clips)), encoding="utf-8")
    sentences = pick_sentences(args.corpus)
    write_clips(sentences, SENTENCES)
    (SENTENCES / "ATTRIBUTION.md").write_text(SENTENCES_ATTRIBUTION.format(n=len(sentences)), encoding="utf-8")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "asterisk5_demo.zarr"
        summary = prepare_store([CLIPS], out, settings=demo_prepare_settings(), workers=2, progress=False)
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
    clip_bytes = sum(p.stat().st_size for p in CLIPS.rglob("*") if p.is_file())
    print(f"demo clips: {len(clips)} recordings, {clip_bytes / 1e6:.1f} MB -> {CLIPS.relative_to(REPO)}")
    sentence_bytes = sum(p.stat().st_size for p in SENTENCES.rglob("*") if p.is_file())
    print(f"demo sentences: {len(sentences)} recordings, {sentence_bytes / 1e6:.1f} MB -> "
          f"{SENTENCES.relative_to(REPO)}")


if __name__ == "__main__":
    main()
