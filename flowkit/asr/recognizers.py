"""Speech recognisers (kind ``asr``): audio -> text, to judge what a model says.

- ``asr.pocketsphinx``: CMU PocketSphinx (offline): its wheel ships a US
  English acoustic model, language model and dictionary, so it needs no download. Weak on
  its own (WER 0.43 on 30 clean clips of the shared corpus, issue 17) but cheap: a few
  times faster than real time on one core. English only.
- ``asr.whisper``: Whisper (Radford et al. 2022) through faster-whisper (CTranslate2) from
  a local model directory (``model_dir``: a converted model, e.g. the folder
  ``faster-whisper-small`` holds ``model.bin``, ``config.json``, ``tokenizer.json``).
  Nothing is downloaded; a missing package or model is one line with the fix. Many
  languages. Install with ``pip install flowkit[whisper]``.

Both take mono float audio at any sample rate (resampled to the 16 kHz they need with
soxr) and are deterministic: greedy decoding, no sampling.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import numpy as np

from flowkit.errors import ConfigError
from flowkit.registry import register

__all__ = ["PocketSphinx", "Whisper"]

ASR_RATE = 16000  # Hz: both recognisers' models are trained on 16 kHz audio


def _mono16k(audio: np.ndarray, sample_rate: int) -> np.ndarray:
    """``audio [samples]`` (or ``[samples, channels]``) float -> float32 mono at 16 kHz."""
    import soxr

    x = np.asarray(audio, dtype=np.float32)
    if x.ndim == 2:
        x = x.mean(axis=1)
    if x.ndim != 1:
        raise ConfigError(f"asr: audio of shape {tuple(np.shape(audio))}; give [samples] or [samples, channels]")
    if int(sample_rate) != ASR_RATE and x.size:
        x = soxr.resample(x, int(sample_rate), ASR_RATE).astype(np.float32)
    return x


@register("asr", "pocketsphinx")
@attrs.define
class PocketSphinx:
    """CMU PocketSphinx with the US English model its wheel ships (offline, English only).

    Args:
        model_dir: an acoustic model directory; None = the wheel's ``en-us`` model.
        lm: an n-gram language model file (``.lm.bin``/``.lm``); None = the wheel's.
        dict: a pronunciation dictionary; None = the wheel's ``cmudict-en-us.dict``.
    """

    model_dir: str | None = None
    lm: str | None = None
    dict: str | None = None
    _decoder: Any = attrs.field(default=None, init=False, repr=False, eq=False)

    @property
    def languages(self) -> tuple[str, ...]:
        """Languages it transcribes (ISO 639-1)."""
        return ("en",)

    def _get_decoder(self) -> Any:
        if self._decoder is None:
            try:
                import pocketsphinx
            except ImportError as exc:
                raise ConfigError(
                    f"asr.pocketsphinx needs the pocketsphinx package ({exc}); pip install 'pocketsphinx>=5'"
                ) from None
            options: dict[str, Any] = {"samprate": ASR_RATE, "loglevel": "FATAL"}
            for key, value in (("hmm", self.model_dir), ("lm", self.lm), ("dict", self.dict)):
                if value is not None:
                    if not Path(value).exists():
                        raise ConfigError(f"asr.pocketsphinx.{'model_dir' if key == 'hmm' else key} = {value!r}: no such file or directory")
                    options[key] = str(value)
            self._decoder = pocketsphinx.Decoder(**options)
        return self._decoder

    def transcribe(self, audio: np.ndarray, sample_rate: int, language: str = "en") -> str:
        """The words heard in ``audio [samples]`` (float in [-1, 1], any rate), lower case.

        Raises:
            ConfigError: ``language`` is not English, the package or a given model file is missing.
        """
        if language and language.split("-")[0] != "en":
            raise ConfigError(f"asr.pocketsphinx transcribes English only, not {language!r}; use asr.whisper")
        x = _mono16k(audio, sample_rate)
        if x.size == 0:
            return ""
        peak = float(np.max(np.abs(x)))
        if peak > 1.0:  # vocoders keep the level the latents imply: scale, never clip
            x = x / peak
        pcm = (x * 32767.0).astype("<i2").tobytes()
        decoder = self._get_decoder()
        decoder.start_utt()
        decoder.process_raw(pcm, full_utt=True)
        decoder.end_utt()
        hyp = decoder.hyp()
        return "" if hyp is None else str(hyp.hypstr)


@register("asr", "whisper")
@attrs.define
class Whisper:
    """Whisper through faster-whisper, from a local CTranslate2 model directory (no download).

    Args:
        model_dir: the model directory (``model.bin``, ``config.json``, tokenizer files),
            e.g. a ``faster-whisper-small`` folder copied to this machine. Required.
        device: "cpu", "cuda" or "auto" (CTranslate2's choice).
        compute_type: CTranslate2 compute type; "int8" is fastest on a CPU.
        beam_size: 1 = greedy decoding (deterministic and fastest).
        languages: the languages it is asked to score (ISO 639-1); Whisper knows ~100.
    """

    model_dir: str | None = None
    device: str = "cpu"
    compute_type: str = "int8"
    beam_size: int = 1
    languages: tuple[str, ...] = ("en", "es", "fr", "it", "ru", "de", "pt", "nl", "ja", "zh")
    _model: Any = attrs.field(default=None, init=False, repr=False, eq=False)

    def _get_model(self) -> Any:
        if self._model is not None:
            return self._model
        if not self.model_dir:
            raise ConfigError(
                "asr.whisper.model_dir is not set; give the local folder of a faster-whisper model "
                "(e.g. -b \"asr.whisper.model_dir = '/models/faster-whisper-small'\"): nothing is downloaded"
            )
        path = Path(self.model_dir)
        if not (path / "model.bin").is_file():
            raise ConfigError(
                f"asr.whisper.model_dir = {self.model_dir!r} holds no model.bin; give a faster-whisper "
                "(CTranslate2) model folder, e.g. one converted with ct2-transformers-converter"
            )
        try:
            from faster_whisper import WhisperModel
        except ImportError as exc:
            raise ConfigError(
                f"asr.whisper needs the faster-whisper package ({exc}); pip install 'flowkit[whisper]'"
            ) from None
        self._model = WhisperModel(str(path), device=self.device, compute_type=self.compute_type, local_files_only=True)
        return self._model

    def transcribe(self, audio: np.ndarray, sample_rate: int, language: str = "en") -> str:
        """The words heard in ``audio [samples]`` (float in [-1, 1], any rate) in ``language``.

        Raises:
            ConfigError: ``model_dir`` unset or without a model, or faster-whisper not installed.
        """
        model = self._get_model()
        x = _mono16k(audio, sample_rate)
        if x.size == 0:
            return ""
        segments, _ = model.transcribe(x, language=language or None, beam_size=self.beam_size,
                                       temperature=0.0, condition_on_previous_text=False, vad_filter=False)
        return " ".join(s.text.strip() for s in segments).strip()
