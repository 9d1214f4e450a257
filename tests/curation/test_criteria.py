"""Each curation criterion flags its corruption on real clips (the bundled demo recordings) and
passes the clean ones. The judges run on a few short clips only (Whisper, DNSMOS, GE2E)."""

from __future__ import annotations

import numpy as np
import pytest
from curation_clips import decide, demo_group, noisy, with_audio, with_info

from flowkit import registry

N = 13  # one group's own statistics need MIN_GROUP (12) clips


@pytest.fixture(scope="module")
def allison_en():
    from flowkit.data.demo import demo_clips_path

    return demo_group(demo_clips_path(), "allison", "en", N)


def _build(name: str, **kwargs):
    registry.load_plugins()
    return registry.build("criterion", name, **kwargs)


def _dropped(decision) -> list[str]:
    return [r.split(":", 1)[0] for r in decision.reasons if r]


def test_clipping_flags_a_clipped_recording_only(allison_en) -> None:
    clips = list(allison_en)
    x = clips[3].audio
    clips[3] = with_audio(clips[3], np.clip(x * (4.0 / max(1e-6, float(np.max(np.abs(x))))), -1.0, 1.0))
    d = decide(_build("clipping"), clips)
    assert [i for i, r in enumerate(d.reasons) if r] == [3], d.values
    assert max(v for i, v in enumerate(d.values) if i != 3) <= 0.001  # clean studio prompts never touch full scale


def test_silence_flags_a_clip_that_is_mostly_silence(allison_en) -> None:
    clips = list(allison_en)
    x = clips[5].audio
    padded = np.concatenate([x, np.zeros(6 * x.size, dtype=np.float32)])  # six times its length of silence
    clips[5] = with_audio(clips[5], padded)
    clips[6] = with_audio(clips[6], np.zeros_like(clips[6].audio))  # digital silence
    d = decide(_build("silence"), clips)
    assert [i for i, r in enumerate(d.reasons) if r] == [5, 6], d.values


def test_speaking_rate_flags_a_transcript_that_does_not_fit_the_time(allison_en) -> None:
    clips = list(allison_en)
    long_text = " ".join(c.info.text for c in clips[:8])  # eight prompts' words for one prompt's time
    clips[2] = with_info(clips[2], text=long_text)
    d = decide(_build("speaking_rate"), clips)
    assert [i for i, r in enumerate(d.reasons) if r] == [2], (d.values, d.reasons)


def test_transcript_cer_flags_swapped_transcripts_and_skips_languages_it_does_not_know(allison_en) -> None:
    from flowkit.data.demo import demo_clips_path

    clips = list(allison_en[:5])  # Whisper on a few short clips
    spanish = demo_group(demo_clips_path(), "allison", "es", 3)

    def swap(group: list, a: int, b: int) -> None:
        assert group[a].info.text.lower() != group[b].info.text.lower()
        group[a], group[b] = with_info(group[a], text=group[b].info.text), with_info(group[b], text=group[a].info.text)

    swap(clips, 1, 4)  # judged by tiny.en
    swap(spanish, 0, 2)  # judged by the multilingual base model
    swedish = with_info(clips[0], segment_id="sv_clip", language="sv")  # no recogniser here knows it
    crit = _build("transcript_cer")
    d = decide(crit, [*clips, *spanish, swedish])
    assert [i for i, r in enumerate(d.reasons) if r] == [1, 4, 5, 7], (d.values, d.reasons)
    assert np.isnan(d.values[-1]) and any("languages sv" in n for n in d.notes)
    judge = crit.describe()["judge"]
    assert judge["en"]["model"].endswith("tiny.en") and judge["other"]["model"].endswith("faster-whisper-base")


def test_dnsmos_flags_a_clip_under_noise_at_0_db(allison_en) -> None:
    clips = list(allison_en)
    clips[7] = with_audio(clips[7], noisy(clips[7].audio, 0.0))
    d = decide(_build("dnsmos"), clips)
    assert [i for i, r in enumerate(d.reasons) if r] == [7], d.values
    # measured on these clips: clean BAK 3.9-4.1, the noisy copy under 2 (the cap of 3 is far from both)
    assert min(v for i, v in enumerate(d.values) if i != 7) > 3.0 and d.values[7] < 2.5


def test_speaker_centroid_flags_another_voice_under_the_label() -> None:
    from flowkit.data.demo import demo_clips_path

    root = demo_clips_path()
    june = demo_group(root, "june", "fr", N)
    carlo = demo_group(root, "carlo", "it", N)
    # carlo's last clip labelled june: nearer carlo's centroid than june's
    clips = [*june, *carlo[:-1], with_info(carlo[-1], speaker="june", language="fr")]
    d = decide(_build("speaker_centroid"), clips)
    assert [i for i, r in enumerate(d.reasons) if r] == [len(clips) - 1], (d.values, d.reasons)
    assert "nearer speaker carlo's centroid than june's" in d.reasons[-1]
    assert d.values[-1] > 0 > max(d.values[:-1])  # the margin: own distance less the nearest other's
