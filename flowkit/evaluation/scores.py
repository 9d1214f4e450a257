"""The totals of an eval's results.

Scores per utterance (`flowkit.judges.panel.clip_scores`): WER and CER of the recogniser's
transcript against the target text (`flowkit.judges.scoring`, both sides normalised), SIM
(speaker similarity of the generated audio to the prompt, and ``sim_target`` to the target
recording), DNSMOS (OVRL, SIG, BAK) and the duration ratio (generated seconds / target
recording seconds). Where the line has a target recording and ``ceilings`` is on, the same
judges score the recording itself (``truth``) and the recording encoded and decoded by the
run's vocoder (``vocoded``): what a perfect model could reach through this vocoder.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["totals"]


def _mean(values: Sequence[Any]) -> float | None:
    found = [float(v) for v in values if isinstance(v, (int, float))]
    return float(np.mean(found)) if found else None


def _block_totals(blocks: Sequence[dict[str, Any]], texts: Sequence[str], languages: Sequence[str]) -> dict[str, Any]:
    """Totals of one kind of clip: corpus WER/CER (`flowkit.judges.panel.pooled_rates`), mean
    SIM, SIM to the target, DNSMOS."""
    from flowkit.judges.panel import pooled_rates

    rates = pooled_rates(texts, [b.get("hypothesis") for b in blocks], languages)
    out: dict[str, Any] = {"items": len(blocks), "wer": rates.wer, "cer": rates.cer, "words": rates.words}
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
