"""``Probe.<field>``: what the intelligibility probe synthesises and which judges score it.

The judges are the panel of `flowkit.judges.panel` (the one ``flowkit eval`` scores with):
"auto" picks the installed default and leaves a note to print when there is none.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import gin

from flowkit.errors import ConfigError
from flowkit.judges.panel import DEFAULT as AUTO
from flowkit.judges.panel import Judges, build_judges

__all__ = ["AUTO", "PROBE_SPLITS", "ProbeSettings"]

PROBE_SPLITS = ("val", "train")


def _positive(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if value < 1:
        raise ConfigError(f"Probe.{attribute.name} = {value!r} must be >= 1; fix it in the gin file or -b binding")


@gin.configurable("Probe")
@attrs.frozen
class ProbeSettings:
    """What the intelligibility probe synthesises and how it scores it (gin: ``Probe.<field>``).

    Turned on by ``Trainer.probe = @Probe()``; every field may change on resume (the probe
    does not touch training).

    Args:
        every: steps between probes (also at the last step, and at step 0 with ``at_start``).
        at_start: also probe the untrained model at step 0, the start of the WER curve. It
            costs about as much as a probe of a trained model (its babble is transcribed up
            to the recogniser's token cap). The ground-truth ceiling is measured at step 0
            either way.
        asr: the recogniser (``@asr.whisper()``, ``@asr.pocketsphinx()``); None =
            `flowkit.judges.choice.default_recognizer` for the first of ``languages`` that is
            not English, else English (Whisper when installed, with one line when it falls
            back to pocketsphinx). A recogniser named here that cannot run stops the run.
        speaker: the speaker-similarity judge for ``probe_sim``; "auto" =
            ``speaker.resemblyzer`` when installed (else none, with one line); None = none.
        quality: the quality judge for ``probe_dnsmos``; "auto" = ``quality.dnsmos`` when
            installed (else none, with one line); None = none.
        sentences: probe sentences per language (spread evenly over the split).
        split: "val" (held-out sentences) or "train" (memorisation, gin/memorise.gin).
        languages: languages to probe; empty = every language of the split the recogniser knows.
        solver_steps: ODE steps of the run's solver (F5-TTS samples with 32).
        cfg_strength: classifier-free guidance strength (F5-TTS: 2.0).
        vocoder: latents -> audio; None = the run's (``Trainer.vocoder`` where a run has
            one, else ``vocoder.griffin_lim``).
        audio_dirs: folders holding the recorded ``<segment_id>.{wav,flac,ogg}`` for the raw
            ceiling, searched before the bundled demo clips; sentences found nowhere are left
            out of it (``probe_truth_raw_items`` counts the ones scored).
        seed: added to the run's seed for the probe's noise.
        draws: noise draws per sentence; the WER and CER pool every draw's transcript. On 16
            sentences (about 100 words) one draw's WER moves by up to 0.06 from one noise
            seed to the next, so a run judged against a bar (gin/memorise.gin) takes 2.
            The report's audio and hypotheses are the first draw's.

    Raises:
        ConfigError: a value out of range, naming ``Probe.<field>``.
    """

    every: int = attrs.field(default=200, validator=_positive)
    at_start: bool = True
    asr: Any = None
    speaker: Any = AUTO
    quality: Any = AUTO
    sentences: int = attrs.field(default=8, validator=_positive)
    split: str = "val"
    languages: Sequence[str] = ()
    solver_steps: int = attrs.field(default=32, validator=_positive)
    cfg_strength: float = 2.0
    vocoder: Any = None
    audio_dirs: Sequence[str] = ()
    seed: int = 0
    draws: int = attrs.field(default=1, validator=_positive)
    #: the panel of ``asr``, ``speaker`` and ``quality`` (its notes: a default judge not available)
    judges: Judges = attrs.field(default=None, init=False, eq=False, repr=False)

    @property
    def notes(self) -> tuple[str, ...]:
        """Lines the probe prints once: a default judge that was not available."""
        return tuple(self.judges.notes)

    def __attrs_post_init__(self) -> None:
        if self.asr is not None and not hasattr(self.asr, "transcribe"):
            raise ConfigError(f"Probe.asr = {self.asr!r} is not a recogniser; use e.g. @asr.pocketsphinx()")
        if self.speaker not in (None, AUTO) and not hasattr(self.speaker, "similarity"):
            raise ConfigError(f"Probe.speaker = {self.speaker!r} is not a speaker judge; "
                              "use @speaker.resemblyzer() or None")
        if self.quality not in (None, AUTO) and not hasattr(self.quality, "score"):
            raise ConfigError(f"Probe.quality = {self.quality!r} is not a quality judge; use @quality.dnsmos() or None")
        if self.split not in PROBE_SPLITS:
            raise ConfigError(f"Probe.split = {self.split!r} is not one of {', '.join(map(repr, PROBE_SPLITS))}")
        if self.cfg_strength < 0:
            raise ConfigError(f"Probe.cfg_strength = {self.cfg_strength!r} must be >= 0 (F5-TTS uses 2.0)")
        # a recogniser that knows the probed languages: a multilingual Whisper when one is not English
        language = next((lang for lang in self.languages if lang.split("-")[0] != "en"), "en")
        panel = build_judges(self.asr, language=language, speaker=self.speaker, quality=self.quality)
        for kind in ("asr", "speaker", "quality", "judges"):
            object.__setattr__(self, kind, panel if kind == "judges" else getattr(panel, kind))
