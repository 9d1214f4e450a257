"""The panel of judges that ``flowkit eval`` and the training probe both score with."""

from __future__ import annotations

import numpy as np
import pytest

from flowkit.errors import ConfigError
from flowkit.judges.panel import Judges, build_judges, describe
from flowkit.judges.records import pooled_rates
from flowkit.judges.scoring import error_rates


def test_pooled_rates_sum_each_languages_edits() -> None:
    texts = ["the cat sat", "a dog", "hola amigo", "buenos dias"]
    hyps = ["the cat sad", "a dog", "hola", None]
    rates = pooled_rates(texts, hyps, ["en", "en", "es", "es"])
    en = error_rates(texts[:2], hyps[:2], "en")
    es = error_rates(texts[2:3], hyps[2:3], "es")  # the clip without a hypothesis is left out
    assert rates.languages == {"en": en, "es": es}
    assert rates.words == en.words + es.words == 7
    # exact: the same float operations on the same counts (1 + 1 edits over 7 words)
    assert rates.wer == pytest.approx(2 / 7, abs=1e-12)
    nothing = pooled_rates(["..."], ["x"], ["en"])  # a reference that normalises to nothing
    assert nothing.wer is None and nothing.languages == {} and nothing.words == 0


def test_describe_names_a_judge_without_describe() -> None:
    class Plain:
        def transcribe(self, audio, sr, language):
            return ""

    assert describe(None, "asr") is None
    assert describe(Plain(), "asr") == {"name": "Plain", "model": "", "version": ""}

    class Rich(Plain):
        def describe(self):
            return {"name": "asr.rich", "model": "m", "version": "1", "decoding": "beam 1"}

    assert describe(Rich(), "asr")["decoding"] == "beam 1"


def test_a_judge_that_fails_on_first_use_is_turned_off_with_one_note() -> None:
    class Broken:
        def embed(self, audio, sr):
            raise ImportError("resemblyzer needs webrtcvad")

        def similarity(self, a, sr_a, b, sr_b):
            raise ImportError("resemblyzer needs webrtcvad")

    judges = Judges(asr=None, speaker=Broken())
    silence = np.zeros(1600, dtype=np.float32)
    assert judges.embed(silence, 16000) is None and judges.speaker is None
    assert judges.similarity(silence, 16000, silence, 16000) is None
    assert len(judges.notes) == 1 and "webrtcvad" in judges.notes[0] and "flowkit[eval]" in judges.notes[0]
    assert judges.describe()["speaker"] is None


def test_a_named_judge_that_fails_raises_with_its_reason() -> None:
    class Missing:
        def transcribe(self, audio, sr, language):
            raise ConfigError("asr.missing: no model at /models/none")

    panel = build_judges(Missing(), speaker=None, quality=None)
    assert panel.named == {"asr"}
    with pytest.raises(ConfigError, match="the asr judge Missing cannot run here: asr.missing: no model"):
        panel.transcribe(np.zeros(160, np.float32), 16000, "en")
    assert panel.asr is not None and panel.notes == []


def test_build_judges_takes_judges_names_or_none() -> None:
    class Heard:
        def transcribe(self, audio, sr, language):
            return "hello"

    given = Heard()
    panel = build_judges(given, speaker=None, quality=False)
    assert panel.asr is given and panel.speaker is None and panel.quality is None and panel.notes == []
    assert build_judges("pocketsphinx", speaker=None, quality=None).asr.describe()["name"] == "asr.pocketsphinx"
    with pytest.raises(ConfigError, match="is not a recogniser"):
        build_judges(object())
