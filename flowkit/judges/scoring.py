"""Word and character error rates of hypotheses against references, with jiwer.

Both sides are normalised by `flowkit.judges.normalise.normalise_for_scoring` first. The
rates are corpus-level, as jiwer computes them for lists: total edits over total reference
words (or characters), so a long sentence weighs more than a short one. An empty
hypothesis against a non-empty reference scores 1.0 (every word deleted); WER can exceed
1.0 when a recogniser inserts words.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from flowkit.errors import ConfigError
from flowkit.judges.normalise import normalise_for_scoring

__all__ = ["UNSEGMENTED_LANGUAGES", "ErrorRates", "error_rates", "headline_metric"]

#: Languages written without spaces between words (ISO 639-1): Chinese, Japanese, Thai, Lao,
#: Khmer, Burmese, Tibetan. A "word" there is whatever a tokeniser makes of it, so their
#: error rate is counted in characters (CER), as Seed-TTS-eval scores Chinese.
UNSEGMENTED_LANGUAGES = ("zh", "ja", "th", "lo", "km", "my", "bo", "yue")


@attrs.frozen
class ErrorRates:
    """Corpus-level error rates; ``words``/``chars``: reference sizes they are divided by."""

    wer: float
    cer: float
    words: int
    chars: int


def error_rates(references: Sequence[str], hypotheses: Sequence[str], language: str = "en") -> ErrorRates:
    """WER and CER of ``hypotheses`` against ``references`` (same length, same order).

    Raises:
        ConfigError: the two lists differ in length, or every reference is empty after
            normalisation (there is nothing to score).
    """
    import jiwer

    if len(references) != len(hypotheses):
        raise ConfigError(f"error_rates: {len(references)} references but {len(hypotheses)} hypotheses")
    refs = [normalise_for_scoring(r, language) for r in references]
    hyps = [normalise_for_scoring(h, language) for h in hypotheses]
    keep = [i for i, r in enumerate(refs) if r]
    if not keep:
        raise ConfigError("error_rates: every reference is empty after normalisation; nothing to score")
    refs = [refs[i] for i in keep]
    hyps = [hyps[i] for i in keep]
    words = jiwer.process_words(refs, hyps)
    chars = jiwer.process_characters(refs, hyps)
    n_words = sum(len(r.split()) for r in refs)
    n_chars = sum(len(r) for r in refs)
    return ErrorRates(wer=float(words.wer), cer=float(chars.cer), words=n_words, chars=n_chars)


def headline_metric(language: str) -> str:
    """``"cer"`` for a language written without spaces between words (`UNSEGMENTED_LANGUAGES`),
    else ``"wer"``: the error rate that stands for intelligibility in that language."""
    return "cer" if (language or "en").split("-")[0].lower() in UNSEGMENTED_LANGUAGES else "wer"
