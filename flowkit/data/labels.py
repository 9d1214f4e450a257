"""Label vocabularies shared by prepare, the store and the model conditions.

Every categorical condition reserves id 0 for "unknown", so a segment without a label
still has a valid id and the model learns an "unknown" embedding.

- Emotions: the seven basic categories of Ekman's work as commonly used by emotional
  TTS corpora (ESD, CREMA-D, RAVDESS subsets); ids 1..7 in `EMOTIONS` order.
- Speaking-rate buckets 1..5 (slow..fast) from characters per second of active speech.
- Loudness buckets 1..5 (quiet..loud) from ITU-R BS.1770 integrated loudness (LUFS).
- Languages: ISO-639-1 two-letter codes. `language_code` is the one normalisation every
  prepare input goes through (metadata.csv, manifests, LibriTTS, Lhotse, Hugging Face):
  ``EN``, ``en-US``, ``pt_BR``, ``English`` and ``eng`` become ``en`` / ``pt`` / ``en``.

The bucket thresholds are fixed constants (not fitted to a corpus) so that a store built
in several appends, or two stores joined in one dataset, bucket alike. They were chosen
from the measured spread of the asterisk-5voice corpus (docs/data-format.md).
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Sequence

import numpy as np

EMOTIONS: tuple[str, ...] = ("neutral", "happy", "sad", "angry", "surprised", "fearful", "disgusted")
N_RATE_BUCKETS = 5
N_LOUDNESS_BUCKETS = 5

#: Upper edges (characters per second, spaces not counted) of rate buckets 1..4; bucket 5 above.
RATE_EDGES_CPS: tuple[float, ...] = (8.0, 11.0, 14.0, 17.0)
#: Upper edges (LUFS) of loudness buckets 1..4; bucket 5 above.
LOUDNESS_EDGES_LUFS: tuple[float, ...] = (-35.0, -27.0, -21.0, -15.0)


#: English names of the languages common in speech corpora (Lhotse recipes write these) -> ISO-639-1
LANGUAGE_NAMES: dict[str, str] = {
    "arabic": "ar", "catalan": "ca", "chinese": "zh", "mandarin": "zh", "czech": "cs", "danish": "da",
    "dutch": "nl", "english": "en", "finnish": "fi", "french": "fr", "german": "de", "greek": "el",
    "hindi": "hi", "hungarian": "hu", "indonesian": "id", "italian": "it", "japanese": "ja", "korean": "ko",
    "norwegian": "no", "persian": "fa", "polish": "pl", "portuguese": "pt", "romanian": "ro", "russian": "ru",
    "spanish": "es", "swedish": "sv", "thai": "th", "turkish": "tr", "ukrainian": "uk", "vietnamese": "vi",
}
#: ISO-639-2 three-letter codes (terminological and bibliographic forms) of the same languages,
#: and ISO-639-3 ``cmn`` (Mandarin) -> ISO-639-1
LANGUAGE_CODES_3: dict[str, str] = {
    "ara": "ar", "cat": "ca", "zho": "zh", "chi": "zh", "cmn": "zh", "ces": "cs", "cze": "cs", "dan": "da",
    "nld": "nl", "dut": "nl", "eng": "en", "fin": "fi", "fra": "fr", "fre": "fr", "deu": "de", "ger": "de",
    "ell": "el", "gre": "el", "hin": "hi", "hun": "hu", "ind": "id", "ita": "it", "jpn": "ja", "kor": "ko",
    "nor": "no", "fas": "fa", "per": "fa", "pol": "pl", "por": "pt", "ron": "ro", "rum": "ro", "rus": "ru",
    "spa": "es", "swe": "sv", "tha": "th", "tur": "tr", "ukr": "uk", "vie": "vi",
}
#: the forms `language_code` maps, as rejection messages list them
LANGUAGE_FORMS = ("an ISO-639-1 code (en, de), a locale (en-US, pt_BR, zh-Hant-TW), an English name "
                  "(English, German) or an ISO-639-2 code (eng, deu)")
# a BCP-47-like tag: primary language subtag, then region / script / variant subtags
_TAG = re.compile(r"^([a-z]{2,3})(?:[-_][a-z0-9]+)*$")
_ISO_639_1 = re.compile(r"^[a-z]{2}$")


def language_code(value: object) -> str:
    """``value`` as the ISO-639-1 code a store keeps, or "" (unknown) for None / blank.

    Case and surrounding space are ignored. ``"en"``, ``"EN"``, ``"en-US"``, ``"en_us"``,
    ``"English"`` and ``"eng"`` all give ``"en"``; a locale keeps its language subtag
    (``"pt_BR"`` -> ``"pt"``, ``"zh-Hant-TW"`` -> ``"zh"``). A value it cannot map comes back
    lowered (``"Klingon"`` -> ``"klingon"``), for `language_ok` to refuse, or for
    ``prepare.languages`` to admit as it is.
    """
    text = "" if value is None else str(value).strip().lower()
    if not text:
        return ""
    if text in LANGUAGE_NAMES:
        return LANGUAGE_NAMES[text]
    match = _TAG.match(text)
    if match:
        primary = match.group(1)
        if len(primary) == 2:
            return primary
        if primary in LANGUAGE_CODES_3:
            return LANGUAGE_CODES_3[primary]
    return text


def language_id(languages: Sequence[str], code: str) -> int:
    """The model's id of language ``code``: its position in the model's ``languages`` list
    plus one, 0 (unknown) for a code not in it or empty."""
    return languages.index(code) + 1 if code in languages else 0


def language_ok(code: str, allowed: Sequence[str] | None) -> bool:
    """Whether the normalised ``code`` may enter a store: "" (unknown) always; else any
    ISO-639-1 code when ``allowed`` is None, or one of ``allowed`` (normalised alike)."""
    if code == "":
        return True
    if allowed is None:
        return bool(_ISO_639_1.match(code))
    return code in {language_code(a) for a in allowed}


def emotion_id(name: str) -> int:
    """Id of emotion ``name`` (1..7), 0 for "" (unknown).

    Raises:
        ValueError: ``name`` is neither "" nor one of `EMOTIONS`.
    """
    key = name.strip().lower()
    if not key:
        return 0
    try:
        return EMOTIONS.index(key) + 1
    except ValueError:
        raise ValueError(f"unknown emotion {name!r}; known: {', '.join(EMOTIONS)} or '' for unknown") from None


def emotion_condition(name: str, intensity: float | None) -> tuple[int, float | None]:
    """The emotion condition of a label, as training and synthesis both give it to the model:
    ``(emotion_id(name), intensity)``, the intensity (in [0, 1]) kept only with a named emotion
    and a finite value, else None (the model's "unknown intensity").

    Raises:
        ValueError: ``name`` is neither "" nor one of `EMOTIONS`.
    """
    emotion = emotion_id(name)
    known = emotion > 0 and intensity is not None and math.isfinite(float(intensity))
    return emotion, float(intensity) if known else None


def _bucket(value: float, edges: tuple[float, ...]) -> int:
    if value is None or not math.isfinite(value):
        return 0
    return bisect.bisect_right(edges, value) + 1


def rate_bucket(chars_per_second: float) -> int:
    """Speaking-rate bucket 1..5 of ``chars_per_second``; 0 when not finite (unknown)."""
    return _bucket(chars_per_second, RATE_EDGES_CPS)


def loudness_bucket(lufs: float) -> int:
    """Loudness bucket 1..5 of integrated loudness ``lufs``; 0 when not finite (unknown)."""
    return _bucket(lufs, LOUDNESS_EDGES_LUFS)


def recorded_buckets(
    audio: np.ndarray, sample_rate: int, text: str, frame_rate: float, n_frames: int
) -> tuple[int, int]:
    """``(rate, loudness)`` buckets of a recording, as ``flowkit prepare`` labels a clip.

    The rate is the characters of ``text`` (spaces not counted) per second of active
    speech (`flowkit.data.audio.speech_span` over ``n_frames`` frames at ``frame_rate``
    Hz); the loudness is the clip's ITU-R BS.1770 integrated loudness. Synthesis labels
    its prompt the same way, so a model conditions on what it was trained on rather than
    on "unknown".

    Args:
        audio: mono samples ``[samples]`` (float) at ``sample_rate`` Hz.
        sample_rate: Hz.
        text: the clip's transcript.
        frame_rate: latent frames per second of the encoder (Hz).
        n_frames: the clip's latent frames.

    Returns:
        ``(rate, loudness)``, each 1..5, or 0 (unknown) where no speech is found or the
        loudness is not finite.
    """
    from flowkit.data import audio as audio_mod

    hop = max(1, round(sample_rate / frame_rate))
    start, end = audio_mod.speech_span(audio, hop, n_frames)
    chars = sum(1 for c in text if not c.isspace())
    cps = chars / ((end - start) / frame_rate) if end > start else math.nan
    return rate_bucket(cps), loudness_bucket(audio_mod.integrated_loudness(audio, sample_rate))
