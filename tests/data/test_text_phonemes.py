"""text.phonemes: IPA symbols from espeak-ng through phonemizer, chosen at training time."""

from __future__ import annotations

import itertools
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("phonemizer")
if shutil.which("espeak-ng") is None:
    pytest.skip("espeak-ng is not installed (tools/setup.sh installs it)", allow_module_level=True)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "train"))

from real_clips import real_clips  # noqa: E402

from flowkit.text.phonemes import (  # noqa: E402
    PhonemeFrontEnd,
    PhonemeVocab,
    phonemize,
    split_symbols,
    voice_for,
)


def test_symbols_keep_phonemizers_output_and_split_it():
    from phonemizer.backend import EspeakBackend
    from phonemizer.separator import Separator

    for clip in real_clips(10):
        voice = voice_for(clip.language, "en")
        plain = EspeakBackend(voice, preserve_punctuation=True, with_stress=True, language_switch="remove-flags")
        [reference] = plain.phonemize([clip.text], separator=Separator(phone="", word=" ", syllable=""), strip=True)
        symbols = phonemize(clip.text, voice)
        # nothing lost or added: the symbols spell phonemizer's own output
        assert "".join(symbols).replace(" ", "") == reference.replace(" ", ""), clip.text
        assert " " not in symbols[0] and all(s for s in symbols)
    assert split_symbols("b ɔ̃ ʒ ˈu ʁ, | l ə- | m ˈɔ̃ d!") == ["b", "ɔ̃", "ʒ", "ˈ", "u", "ʁ", ",", " ", "l", "ə", "-",
                                                             " ", "m", "ˈ", "ɔ̃", "d", "!"]


def test_vocab_per_language_and_state_round_trip():
    texts, languages = ["Bonjour le monde.", "hello world", "привет"], ["fr", "en", "ru"]
    vocab = PhonemeFrontEnd().build_vocab(texts, languages)
    assert vocab.voices == {"fr": "fr-fr", "en": "en-us", "ru": "ru"}
    assert {"ʁ", "ɔ̃", "ʒ", " "} <= set(vocab.symbols)  # IPA symbols, a word boundary
    ids = vocab.encode("Bonjour le monde.", "fr")
    assert 1 not in ids and (vocab.decode(ids).replace(" ", "")
                             == "".join(phonemize("Bonjour le monde.", "fr-fr")).replace(" ", ""))
    again = PhonemeVocab.from_state_dict(json.loads(json.dumps(vocab.state_dict())))
    assert again.symbols == vocab.symbols and again.encode("hello world", "en") == vocab.encode("hello world", "en")
    assert vocab.encode("hello world", "fr") != vocab.encode("hello world", "en")  # read in its own language

    from flowkit.errors import DataError

    with pytest.raises(DataError, match="no espeak-ng voice for language 'xx'"):
        PhonemeFrontEnd().build_vocab(["x"], ["xx"])


def test_training_with_phonemes_on_the_bundled_multilingual_clips(tmp_path):
    """A few steps on the bundled demo store (4 speakers, 5 languages); the vocabulary travels
    with the checkpoint and synthesis reads it back."""
    from train_helpers import DEBUG_GIN, TINY

    from flowkit.synth.inference import load_inference_model
    from flowkit.train import run

    outcome = run.train([DEBUG_GIN], [*TINY, "Trainer.text = @text.phonemes()"], data=[], out=tmp_path / "run",
                        steps=3, device="cpu")
    assert outcome.status == "completed" and outcome.step == 3
    im = load_inference_model(tmp_path / "run")
    assert isinstance(im.vocab, PhonemeVocab)
    assert set(im.vocab.voices) == {"en", "es", "fr", "it", "ru"}
    assert {"ʁ", "ɲ", " "} <= set(im.vocab.symbols)  # French and Italian phones among them
    lines = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in lines if r.get("kind") == "train"] == [1, 2, 3]
    assert im.vocab.encode("ciao", "it") == im.vocab.encode("ciao", "it") and 1 not in im.vocab.encode("ciao", "it")


def test_units_over_phonemes_keep_each_words_symbols_and_frames():
    """The aligned path's units re-indexed over phonemes: unit k owns exactly the symbols of
    its own words, the text between units gives separators only, frames are unchanged."""
    text = "For they cast iniquity upon me, and in wrath."
    spans = [(0, 3), (4, 8), (9, 13), (14, 22), (23, 27), (28, 30), (32, 35), (36, 44)]  # "in wrath" one unit
    units = [(cs, ce, 10 * k, 10 * k + 8) for k, (cs, ce) in enumerate(spans)]
    vocab = PhonemeFrontEnd().build_vocab([text], ["en"])
    ids, token_units = vocab.encode_units(text, units, "en")
    assert [u[2:] for u in token_units] == [u[2:] for u in units]
    for (ts, te, _, _), (cs, ce) in zip(token_units, spans, strict=True):
        assert vocab.decode(ids[ts:te]) == "".join(phonemize(text[cs:ce], "en-us")), text[cs:ce]
    # between units: a word boundary, the comma before "and", the full stop at the end
    gaps = [vocab.decode(ids[a[1]:b[0]]) for a, b in itertools.pairwise(token_units)]
    assert gaps == [" "] * 5 + [", "] + [" "]
    assert vocab.decode(ids[token_units[-1][1]:]) == "."
    assert 1 not in ids
    # synthesis asks for its separator with a space: the word boundary's id
    assert vocab.encode(" ") == [vocab.encode("a b")[1]] and vocab.decode(vocab.encode(" ")) == " "


def test_aligned_path_trains_on_phonemes_and_synthesises(tmp_path):
    """E11 (unit timings) with phoneme input: the collate hands the model units over phoneme
    ids, the duration head learns them, and synthesis sizes its units from the word boundary."""
    import importlib.util

    from train_helpers import train

    spec = importlib.util.spec_from_file_location("train_fixtures",
                                                  Path(__file__).resolve().parents[1] / "train" / "conftest.py")
    fixtures = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fixtures)
    write_store = fixtures.write_store

    from flowkit.synth.inference import generate, load_inference_model
    from flowkit.synth.sample import Utterance, inference_conditions

    store = write_store(tmp_path / "s.zarr")
    e11 = Path(__file__).resolve().parents[2] / "gin" / "e11_aligned.gin"
    outcome = train(store, tmp_path / "run", "model.dit.preset = 'tiny'", "Trainer.text = @text.phonemes()",
                    steps=3, config=e11)
    assert outcome.status == "completed" and outcome.step == 3
    im = load_inference_model(tmp_path / "run")
    assert isinstance(im.vocab, PhonemeVocab) and " " in im.vocab.symbols
    lines = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    train_lines = [r for r in lines if r.get("kind") == "train"]
    assert train_lines and all(r["loss"] == r["loss"] for r in train_lines)  # finite: no NaN
    assert all(r["loss/duration_l1"] > 0 for r in train_lines)  # the duration head learned the phonemes
    utterance = Utterance(text=im.vocab.encode("la mora tie", "en"), language=1)
    space = [i for i in im.vocab.encode(" ") if i > 1]
    cond = inference_conditions(im.model, [utterance], separator_ids=space)
    assert int(cond.unit_mask.sum()) == 3  # one unit per word, sized by the duration head
    [latents] = generate(im, [utterance], steps=2)
    assert latents.shape == (int(cond.target_mask.sum()), 8) and np.isfinite(latents).all()


def test_a_phoneme_vocabulary_grows_by_the_symbols_of_a_new_language():
    from flowkit.text.vocabs import grown_vocab, missing_tokens

    english = PhonemeFrontEnd().build_vocab(["the cat sat on the mat", "a good book"], ["en", "en"])
    texts, languages = ["el niño come pan", "the cat"], ["es", "en"]
    added = missing_tokens(english, texts, languages)
    spanish = set(phonemize("el niño come pan", "es"))
    assert added == sorted(spanish - set(english.symbols)) and "ɲ" in added  # what English lacks, sorted
    assert missing_tokens(english, ["the cat"], ["en"]) == []
    grown, again = grown_vocab(english, texts, languages)
    assert again == added and grown.symbols == english.symbols + tuple(added)  # old ids unchanged, new after
    assert grown.voices == {"en": "en-us", "es": "es"}
    assert grown.encode("the cat", "en") == english.encode("the cat", "en")
    assert 1 not in grown.encode("el niño come pan", "es") and 1 in english.encode("el niño come pan", "es")
    assert PhonemeVocab.from_state_dict(json.loads(json.dumps(grown.state_dict()))).symbols == grown.symbols
    assert grown_vocab(english, ["the cat"], ["en"]) == (english, [])


def test_init_from_a_phoneme_base_grows_its_text_embedding_for_a_new_language(tmp_path):
    """A phoneme base (English) fine-tuned on Spanish: the symbols English lacks get rows of their
    own (old rows unchanged), the run says which, and synthesis reads Spanish without unknowns."""
    import importlib.util

    from train_helpers import DEBUG_GIN, TINY, spanish_store

    from flowkit.checkpoints import files as checkpoint
    from flowkit.synth.inference import load_inference_model
    from flowkit.train import run
    from flowkit.train.vocab_growth import INIT_RULE

    spec = importlib.util.spec_from_file_location("train_fixtures",
                                                  Path(__file__).resolve().parents[1] / "train" / "conftest.py")
    fixtures = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fixtures)
    english = fixtures.write_store(tmp_path / "en.zarr", per_speaker=4)
    spanish = spanish_store(tmp_path / "es.zarr")
    phonemes = "Trainer.text = @text.phonemes()"
    base = run.train([DEBUG_GIN], [*TINY, phonemes], data=[english], out=tmp_path / "base", steps=2, device="cpu")
    assert base.status == "completed"
    child = run.train([DEBUG_GIN], [*TINY, phonemes], data=[spanish], out=tmp_path / "child", steps=2,
                      device="cpu", init_from=tmp_path / "base")
    assert child.status == "completed"
    parent_vocab = load_inference_model(tmp_path / "base").vocab
    im = load_inference_model(tmp_path / "child")
    info = json.loads((tmp_path / "child" / "run_info.json").read_text())["init_from"]["added_tokens"]
    assert info["tokens"] and im.vocab.symbols == parent_vocab.symbols + tuple(info["tokens"])
    assert info["rows"] == [parent_vocab.size, im.vocab.size] and info["init"] == INIT_RULE
    assert 1 not in im.vocab.encode("año más niño sol", "es") and 1 in parent_vocab.encode("año más niño sol", "es")
    grown = checkpoint.load_checkpoint(checkpoint.find_latest(tmp_path / "child" / "checkpoints")[0])
    assert grown.state["model"]["text.embed.weight"].shape[0] == im.vocab.size
