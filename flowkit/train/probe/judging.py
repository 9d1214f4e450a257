"""The probe's scores from the panel of judges: WER/CER per language, SIM and DNSMOS.

Shape legend: n frames, d latent channels.

The judges are `flowkit.judges.panel.Judges` (the panel ``flowkit eval`` scores with). WER
and CER are pooled as eval pools them (`flowkit.judges.records.pooled_rates`) per language
(``<prefix>_wer/<lang>``) and over all languages (``<prefix>_wer``). SIM is the cosine
similarity of a clip's speaker embedding to its prompt's recording (F5-TTS's SIM-o; the
prompt's latents through the vocoder where its recording is not found) and, as
``_sim_ref``, to the sentence's own recording; each reference is embedded once. DNSMOS
gives OVRL with SIG and BAK.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from flowkit.judges.panel import Judges
from flowkit.train.probe.ceilings import Recordings

__all__ = ["ProbeJudges"]


class ProbeJudges:
    """Scores audio of the probe sentences with the panel ``judges``.

    Args:
        judges: the panel (`ProbeSettings.judges`).
        sentences: the `ProbeSentence` s; prompts: their prompt latents ``[n d]`` (None: none).
        recordings: where the sentences' and prompts' recordings are found.
        vocoder, encoder: the run's vocoder and the store's encoder record (a prompt without
            a recording is vocoded from its latents).
    """

    def __init__(self, judges: Judges, sentences: Sequence[Any], prompts: Sequence[np.ndarray | None],
                 recordings: Recordings, vocoder: Any, encoder: dict[str, Any]) -> None:
        self.judges = judges
        self.sentences = list(sentences)
        self._prompts = list(prompts)
        self._recordings = recordings
        self._vocoder = vocoder
        self._encoder = encoder
        self._references: dict[tuple[str, int], np.ndarray | None] = {}

    def score(self, audios: Sequence[tuple[np.ndarray, int]], prefix: str,
              subset: Sequence[int] | None = None) -> tuple[dict[str, float], list[str | None]]:
        """Transcribe ``audios`` (aligned with ``subset`` of the sentences) and score per language."""
        from flowkit.judges.records import pooled_rates

        index = list(range(len(self.sentences))) if subset is None else list(subset)
        said = [self.sentences[i] for i in index]
        hyps = [self.judges.transcribe(audio, sr, s.language) for s, (audio, sr) in zip(said, audios, strict=True)]
        rates = pooled_rates([s.text for s in said], hyps, [s.language for s in said])
        out: dict[str, float] = {}
        for lang, r in rates.languages.items():
            out[f"{prefix}_wer/{lang}"], out[f"{prefix}_cer/{lang}"] = r.wer, r.cer
        if rates.wer is not None:
            out[f"{prefix}_wer"], out[f"{prefix}_cer"] = rates.wer, rates.cer
        return out, hyps

    def _reference(self, what: str, i: int) -> np.ndarray | None:
        """Speaker embedding of sentence ``i``'s prompt (``what="prompt"``: its recording, else
        its latents through the vocoder) or of its own recording (``"ref"``); None without one."""
        key = (what, i)
        if key not in self._references:
            s, audio = self.sentences[i], None
            if what == "ref":
                audio = self._recordings.get(s.segment_id)
            elif s.prompt_id is not None:
                audio = self._recordings.get(s.prompt_id)
                if audio is None and self._prompts[i] is not None:
                    audio = self._vocoder(self._prompts[i], self._encoder)
            self._references[key] = None if audio is None else self.judges.embed(*audio)
        return self._references[key]

    def judge(self, audios: Sequence[tuple[np.ndarray, int]], prefix: str, index: Sequence[int],
              with_ref: bool = True, rated: int | None = None) -> tuple[dict[str, float], list[dict[str, Any]]]:
        """Speaker similarity and quality of ``audios`` (sentences ``index``): ``<prefix>_sim``
        (to the prompt), ``<prefix>_sim_ref`` (to the sentence's recording, when ``with_ref``),
        means over the clips, and ``<prefix>_dnsmos`` (OVRL) with ``_sig``/``_bak``, means over
        the first ``rated`` clips (None: all); and per clip ``{"sim", "sim_target", "quality"}``
        (its similarity to its prompt and to its recording, its DNSMOS; None where not judged)."""
        from flowkit.judges.speaker import cosine

        out: dict[str, float] = {}
        clips: list[dict[str, Any]] = [{"sim": None, "sim_target": None, "quality": None} for _ in audios]
        for clip, (audio, sr), i in zip(clips, audios, index, strict=True):
            emb = self.judges.embed(audio, sr)
            if emb is None:
                break
            prompt = self._reference("prompt", i)
            ref = self._reference("ref", i) if with_ref else None
            clip["sim"] = None if prompt is None else cosine(emb, prompt)
            clip["sim_target"] = None if ref is None else cosine(emb, ref)
        for clip, (audio, sr) in zip(clips, audios[:rated], strict=False):
            clip["quality"] = self.judges.quality_scores(audio, sr)
        for key, name in (("sim", "sim"), ("sim_target", "sim_ref")):
            judged = [c[key] for c in clips if c[key] is not None]
            if judged:
                out[f"{prefix}_{name}"] = float(np.mean(judged))
        scores = [c["quality"] for c in clips if c["quality"]]
        if scores:
            for key, name in (("ovrl", "dnsmos"), ("sig", "dnsmos_sig"), ("bak", "dnsmos_bak")):
                out[f"{prefix}_{name}"] = float(np.mean([q[key] for q in scores]))
        return out, clips
