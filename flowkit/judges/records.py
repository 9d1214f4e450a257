"""A scored clip's record and the totals over records: what ``flowkit eval``'s ``results.jsonl``
and the training probe's ``probe/latest/results.jsonl`` hold.

A record's scores (`clip_record`): ``hypothesis``, ``wer`` and ``cer`` of it against the
clip's text with the ``words`` and ``chars`` they divide by (`flowkit.judges.scoring`, both
sides normalised; None where nothing was scored), the recogniser (``asr``) and the rate that
stands for the language (``error_metric``), ``sim`` (speaker similarity to the prompt) and
``sim_target`` (to the sentence's own recording), ``dnsmos`` (OVRL), ``dnsmos_sig`` and
``dnsmos_bak``. Each writer adds what locates the clip: ``utt``, ``text``, ``language``,
``audio`` (its WAV, relative to the folder), ``seconds``; an eval its test line, noise seed,
``duration_ratio`` and the ceilings ``truth`` and ``vocoded`` (the same scores of the target
recording, raw and through the run's vocoder); the probe its prompt's segment.

`totals` pools records as `pooled_rates` pools transcripts: edits over reference words,
per language and over all.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np

from flowkit.errors import ConfigError
from flowkit.judges.panel import Judges
from flowkit.judges.scoring import ErrorRates

__all__ = ["RESULTS", "SUMMARY", "WAVS", "PooledRates", "clip_record", "clip_scores", "pooled_rates", "totals"]

# A folder of scored clips (an eval's, a probe's): the records, one JSON line each; the totals
# with what made them; the clips' audio.
RESULTS = "results.jsonl"
SUMMARY = "summary.json"
WAVS = "wavs"


def clip_record(judges: Judges, text: str, language: str, hypothesis: str | None, sim: float | None,
                sim_target: float | None, quality: dict[str, float] | None) -> dict[str, Any]:
    """The scores of one clip that should say ``text``, from what the judges of ``judges``
    made of it: its transcript ``hypothesis``, its similarities and its DNSMOS ``quality``
    (``{"ovrl", "sig", "bak"}``); None where a judge is off."""
    from flowkit.judges.scoring import error_rates, headline_metric

    out: dict[str, Any] = {"hypothesis": hypothesis, "wer": None, "cer": None, "words": None, "chars": None}
    if hypothesis is not None:
        try:
            r = error_rates([text], [hypothesis], language or "en")
            out.update(wer=r.wer, cer=r.cer, words=r.words, chars=r.chars)
        except ConfigError:  # the reference normalises to nothing (only punctuation): nothing to score
            out.update(words=0, chars=0)
    out["asr"], out["error_metric"] = judges.asr_label(), headline_metric(language)
    out["sim"], out["sim_target"] = sim, sim_target
    quality = quality or {}
    out["dnsmos"], out["dnsmos_sig"], out["dnsmos_bak"] = quality.get("ovrl"), quality.get("sig"), quality.get("bak")
    if "p808" in quality:
        out["dnsmos_p808"] = quality["p808"]
    return out


def clip_scores(judges: Judges, audio: np.ndarray, sr: int, text: str, language: str,
                prompt: tuple[np.ndarray, int], target: tuple[np.ndarray, int] | None) -> dict[str, Any]:
    """`clip_record` of one clip ``audio [samples]`` at ``sr`` Hz, every judge run on it:
    ``sim`` to ``prompt`` and ``sim_target`` to ``target`` (recordings ``(audio, rate)``).

    Raises:
        ConfigError: a judge the caller named cannot run here (`Judges`).
    """
    hypothesis = judges.transcribe(audio, sr, language)
    sim = judges.similarity(audio, sr, *prompt)
    sim_target = None if target is None else judges.similarity(audio, sr, *target)
    return clip_record(judges, text, language, hypothesis, sim, sim_target, judges.quality_scores(audio, sr))


@attrs.frozen
class PooledRates:
    """Corpus error rates over clips: over every language (None: nothing scored) and per language."""

    wer: float | None
    cer: float | None
    words: int
    chars: int
    languages: dict[str, ErrorRates]


def pooled_rates(texts: Sequence[str], hypotheses: Sequence[str | None], languages: Sequence[str]) -> PooledRates:
    """WER and CER of ``hypotheses`` against ``texts``, pooled per language (the edits of all
    its clips over their reference words or characters, `flowkit.judges.scoring.error_rates`)
    and over all languages (each language's edits summed); a clip without a hypothesis, and
    a language whose references normalise to nothing, are left out."""
    from flowkit.judges.scoring import error_rates

    per: dict[str, ErrorRates] = {}
    for lang in sorted(set(languages)):
        pos = [k for k, h in enumerate(hypotheses) if languages[k] == lang and h is not None]
        if not pos:
            continue
        try:
            per[lang] = error_rates([texts[k] for k in pos], [hypotheses[k] for k in pos], lang or "en")
        except ConfigError:
            continue
    words = sum(r.words for r in per.values())
    chars = sum(r.chars for r in per.values())
    wer = sum(r.wer * r.words for r in per.values()) / words if words else None
    cer = sum(r.cer * r.chars for r in per.values()) / chars if chars else None
    return PooledRates(wer=wer, cer=cer, words=words, chars=chars, languages=per)


def _mean(values: Sequence[Any]) -> float | None:
    found = [float(v) for v in values if isinstance(v, (int, float))]
    return float(np.mean(found)) if found else None


def _block_totals(blocks: Sequence[dict[str, Any]], texts: Sequence[str], languages: Sequence[str]) -> dict[str, Any]:
    """Totals of one kind of clip: pooled WER/CER, mean SIM, SIM to the target, DNSMOS."""
    rates = pooled_rates(texts, [b.get("hypothesis") for b in blocks], languages)
    out: dict[str, Any] = {"items": len(blocks), "wer": rates.wer, "cer": rates.cer, "words": rates.words}
    for key in ("sim", "sim_target", "dnsmos", "dnsmos_sig", "dnsmos_bak"):
        out[key] = _mean([b.get(key) for b in blocks])
    return out


def totals(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Totals of the generated audio and of both ceilings over ``records``.

    ``generated`` covers every record (with the mean ``duration_ratio`` where records hold
    one); ``truth`` and ``vocoded`` the records with those ceilings, and
    ``generated_on_ceiling_items`` the generated audio of those same records, so a ratio to
    a ceiling compares the same sentences.
    """
    texts = [r["text"] for r in records]
    langs = [r.get("language", "") for r in records]
    out: dict[str, Any] = {"generated": _block_totals(records, texts, langs)}
    out["generated"]["duration_ratio"] = _mean([r.get("duration_ratio") for r in records])
    for kind in ("truth", "vocoded"):
        pos = [k for k, r in enumerate(records) if r.get(kind)]
        if pos:
            out[kind] = _block_totals([records[k][kind] for k in pos], [texts[k] for k in pos], [langs[k] for k in pos])
    pos = [k for k, r in enumerate(records) if r.get("truth")]
    if pos and len(pos) < len(records):
        out["generated_on_ceiling_items"] = _block_totals([records[k] for k in pos], [texts[k] for k in pos],
                                                          [langs[k] for k in pos])
    return out
