"""The scoring normalisation: case, punctuation, notes, digits to words per language."""

from __future__ import annotations

import pytest

from flowkit.errors import ConfigError
from flowkit.judges.normalise import normalise_for_scoring
from flowkit.judges.scoring import error_rates


@pytest.mark.parametrize(
    ("text", "language", "expected"),
    [
        ("Press 7 to delete this message.", "en", "press seven to delete this message"),
        ("That is not a valid password.  Please try again.", "en", "that is not a valid password please try again"),
        ("I'm afraid i don't know", "en", "i'm afraid i don't know"),
        ("Call-Forward on No Answer.", "en", "call forward on no answer"),
        ("...to exit the menu.", "en", "to exit the menu"),
        ("(simple tone sound plays) press 1", "en", "press one"),
        ("[!] You have 21 new messages", "en", "you have twenty one new messages"),
        ("the 2nd option", "en", "the second option"),
        ("Appuyez sur 7", "fr", "appuyez sur sept"),
        ("Pulse 3, por favor.", "es", "pulse tres por favor"),
        ("Premere 2", "it", "premere due"),
        ("Нажмите 5", "ru", "нажмите пять"),
        ("  MiXeD   Case  ", "en", "mixed case"),
    ],
)
def test_normalise(text: str, language: str, expected: str) -> None:
    assert normalise_for_scoring(text, language) == expected


def test_normalise_is_idempotent() -> None:
    for text in ("Press 7 -- now!", "L'appel n°3", "voice-mail's 2nd box"):
        once = normalise_for_scoring(text, "en")
        assert normalise_for_scoring(once, "en") == once


def test_unknown_language_keeps_digits() -> None:
    assert normalise_for_scoring("Press 7", "xx") == "press 7"


def test_error_rates_ignore_spelling_conventions() -> None:
    rates = error_rates(["Press 7 to delete this message."], ["press seven to delete this message"])
    assert rates.wer == 0.0 and rates.cer == 0.0 and rates.words == 6


def test_error_rates_count_edits_over_reference_words() -> None:
    # one substitution and one deletion over 2 + 3 reference words
    rates = error_rates(["please try", "try again now"], ["please cry", "try again"])
    assert rates.wer == pytest.approx(2 / 5)
    assert error_rates(["hello there"], [""]).wer == 1.0


def test_error_rates_refuse_mismatched_lists() -> None:
    with pytest.raises(ConfigError, match="2 references but 1 hypotheses"):
        error_rates(["a", "b"], ["a"])
    with pytest.raises(ConfigError, match="empty after normalisation"):
        error_rates(["(tone)"], ["x"])
