"""Character front end and label vocabularies."""

from __future__ import annotations

import math
import unicodedata

import pytest

from flowkit.data import labels
from flowkit.registry import get
from flowkit.text.chars import CharVocab, build_vocab


def test_vocab_ids_are_sorted_nfc_characters():
    decomposed = unicodedata.normalize("NFD", "café")
    vocab = build_vocab(["bca", decomposed])
    assert vocab.chars == tuple(sorted("abcéf"))
    assert vocab.size == 7
    assert vocab.encode("cab") == [4, 2, 3]
    assert vocab.encode(decomposed) == vocab.encode("café")  # NFC: one é either way
    assert vocab.unknown_count == 0


def test_unknown_characters_are_counted_not_fatal():
    vocab = build_vocab(["abc"])
    assert vocab.encode("a?z") == [2, 1, 1]
    assert vocab.unknown_count == 2
    assert vocab.decode([2, 0, 1]) == "a\ufffd"


def test_state_dict_round_trip_and_registry():
    vocab = build_vocab(["hello", "мир"])
    again = CharVocab.from_state_dict(vocab.state_dict())
    assert again.chars == vocab.chars and again.encode("мир") == vocab.encode("мир")
    with pytest.raises(ValueError, match="not a character vocabulary"):
        CharVocab.from_state_dict({"kind": "bpe"})
    assert get("text", "chars").obj().build_vocab(["ab"]).size == 4


def test_labels():
    assert labels.emotion_id("") == 0 and labels.emotion_id("Happy") == 2 and labels.emotion_id("disgusted") == 7
    with pytest.raises(ValueError, match="unknown emotion 'bored'"):
        labels.emotion_id("bored")
    assert [labels.rate_bucket(x) for x in (5, 8, 12, 15.9, 30, math.nan)] == [1, 2, 3, 4, 5, 0]
    assert [labels.loudness_bucket(x) for x in (-40, -30, -23, -16, -10, -math.inf)] == [1, 2, 3, 4, 5, 0]
    assert labels.N_RATE_BUCKETS == len(labels.RATE_EDGES_CPS) + 1


def test_emotion_condition_keeps_an_intensity_only_with_its_emotion():
    # the one rule collation, the probe's and eval's synthesis share
    assert labels.emotion_condition("Sad", 0.25) == (3, 0.25)
    assert labels.emotion_condition("sad", math.nan) == (3, None)
    assert labels.emotion_condition("sad", None) == (3, None)
    assert labels.emotion_condition("", 0.8) == (0, None)  # an intensity without an emotion is unknown
    with pytest.raises(ValueError, match="unknown emotion 'bored'"):
        labels.emotion_condition("bored", 0.5)


def test_recorded_buckets_label_a_clip_as_prepare_did():
    """Synthesis labels its prompt with `recorded_buckets`; on the bundled clips it gives the
    rate and loudness buckets the demo store was prepared with."""
    from flowkit import registry
    from flowkit.data.dataset import LatentDataset
    from flowkit.data.demo import demo_clips_path, demo_store_path
    from flowkit.data.importers.sources import load_item_audio

    ds = LatentDataset.open([demo_store_path()], "train")
    record = dict(ds._readers[0].attrs["encoder"])
    segments = [s for s in ds.segments if s.rate > 0][:4]
    ds.close()
    assert len(segments) == 4
    encoder = registry.from_record("encoder", record)
    sr = int(record["params"]["sample_rate"])
    for seg in segments:
        wave = load_item_audio(demo_clips_path() / "wavs" / f"{seg.segment_id}.flac", sr)
        got = labels.recorded_buckets(wave, sr, seg.text, float(encoder.frame_rate), seg.n_frames)
        assert got == (seg.rate, seg.loudness), seg.segment_id
