"""Scores of one clip, and the totals of an eval's results.

Scores per utterance: WER and CER of the recogniser's transcript against the target text
(`flowkit.judges.scoring`, both sides normalised), SIM (speaker similarity of the generated
audio to the prompt, and ``sim_target`` to the target recording), DNSMOS (OVRL, SIG, BAK)
and the duration ratio (generated seconds / target recording seconds). Where the line has
a target recording and ``ceilings`` is on, the same judges score the recording itself
(``truth``) and the recording encoded and decoded by the run's vocoder (``vocoded``): what
a perfect model could reach through this vocoder.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from flowkit.errors import ConfigError
from flowkit.evaluation.judges import Judges
from flowkit.evaluation.testset import TestItem

__all__ = ["judge_clip", "totals"]


def _rates(text: str, hypothesis: str | None, language: str) -> dict[str, Any]:
    """``wer``, ``cer``, ``words``, ``chars`` of one transcript (None where not scored)."""
    from flowkit.judges.scoring import error_rates

    if hypothesis is None:
        return {"wer": None, "cer": None, "words": None, "chars": None}
    try:
        r = error_rates([text], [hypothesis], language or "en")
    except ConfigError:  # the reference normalises to nothing (only punctuation): nothing to score
        return {"wer": None, "cer": None, "words": 0, "chars": 0}
    return {"wer": r.wer, "cer": r.cer, "words": r.words, "chars": r.chars}


def judge_clip(judges: Judges, audio: np.ndarray, sr: int, item: TestItem, prompt: tuple[np.ndarray, int],
               target: tuple[np.ndarray, int] | None) -> dict[str, Any]:
    """Every score of one clip (generated, or a ceiling's)."""
    from flowkit.judges.scoring import headline_metric

    hypothesis = judges.transcribe(audio, sr, item.language)
    out: dict[str, Any] = {"hypothesis": hypothesis, **_rates(item.text, hypothesis, item.language)}
    # the judge that heard it and the rate that stands for the language (CER where words are not the unit)
    out["asr"], out["error_metric"] = judges.asr_label(), headline_metric(item.language)
    out["sim"] = judges.similarity(audio, sr, *prompt)
    out["sim_target"] = None if target is None else judges.similarity(audio, sr, *target)
    quality = judges.quality_scores(audio, sr)
    out["dnsmos"] = None if quality is None else quality.get("ovrl")
    out["dnsmos_sig"] = None if quality is None else quality.get("sig")
    out["dnsmos_bak"] = None if quality is None else quality.get("bak")
    if quality is not None and "p808" in quality:
        out["dnsmos_p808"] = quality["p808"]
    return out


def _mean(values: Sequence[Any]) -> float | None:
    found = [float(v) for v in values if isinstance(v, (int, float))]
    return float(np.mean(found)) if found else None


def _block_totals(blocks: Sequence[dict[str, Any]], texts: Sequence[str], languages: Sequence[str]) -> dict[str, Any]:
    """Totals of one kind of clip: corpus WER/CER (edits over reference words, as
    `flowkit.judges.scoring` computes them), mean SIM, SIM to the target, DNSMOS."""
    from flowkit.judges.scoring import error_rates

    out: dict[str, Any] = {"items": len(blocks)}
    edits_w = words = edits_c = chars = 0.0
    for lang in sorted(set(languages)):
        pos = [k for k, b in enumerate(blocks) if languages[k] == lang and b.get("hypothesis") is not None]
        if not pos:
            continue
        try:
            r = error_rates([texts[k] for k in pos], [blocks[k]["hypothesis"] for k in pos], lang or "en")
        except ConfigError:
            continue
        edits_w, words = edits_w + r.wer * r.words, words + r.words
        edits_c, chars = edits_c + r.cer * r.chars, chars + r.chars
    out["wer"] = edits_w / words if words else None
    out["cer"] = edits_c / chars if chars else None
    out["words"] = int(words)
    for key in ("sim", "sim_target", "dnsmos", "dnsmos_sig", "dnsmos_bak"):
        out[key] = _mean([b.get(key) for b in blocks])
    return out


def totals(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Totals of the generated audio and of both ceilings over ``records`` (results lines).

    ``generated`` covers every record; ``truth`` and ``vocoded`` the records with a target
    recording, and ``generated_on_ceiling_items`` the generated audio of those same records,
    so a ratio to a ceiling compares the same sentences.
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
