"""What `flowkit synthesize` and the training probe are asked to say: every input the model
cannot use gives one warning line (never silence), and a text too long for the model is
split with its cap stated, with progress, instead of hanging.

The checkpoint is a tiny aligned model with untrained weights in the trainer's format
(synthesis takes a second); the probe is built on an in-memory split (no training).
"""

from __future__ import annotations

import types
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from tiny_checkpoint import LOG_MEL_80, save_tiny_checkpoint
from typer.testing import CliRunner

from flowkit.cli.app import app

SR = 16000
WORDS = "la mora sun tie kell agent logged off"


def _checkpoint(root: Path, *, languages: tuple[str, ...] = ("en",), text_path: str = "aligned") -> Path:
    return save_tiny_checkpoint(root, [WORDS + " ."], languages=languages, text_path=text_path, encoder=LOG_MEL_80)


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _checkpoint(tmp_path_factory.mktemp("aligned"))


def _voice(seconds: float) -> np.ndarray:
    """A voiced, syllable-like test signal: a gliding harmonic tone gated at 4 Hz."""
    t = np.arange(int(seconds * SR)) / SR
    tone = sum(np.sin(2 * np.pi * k * 150 * t * (1 + 0.1 * np.sin(2 * np.pi * 0.5 * t))) / k for k in (1, 2, 3))
    return (0.2 * tone * (np.sin(2 * np.pi * 4 * t) > -0.3)).astype(np.float32)


def _synth(ckpt: Path, out: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["synthesize", str(ckpt), "--out", str(out), "--steps", "2", *args])
    return result.exit_code, result.output


def _warnings(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("warning:")]


def test_text_entirely_outside_the_vocabulary_is_warned(ckpt: Path, tmp_path: Path) -> None:
    code, output = _synth(ckpt, tmp_path / "a.wav", "--text", "日本語です")
    assert code == 0, output
    assert "warning: --text: none of its characters ('すで日本語') is in the model's vocabulary" in output
    code, output = _synth(ckpt, tmp_path / "b.wav", "--text", "la mora")
    assert code == 0 and not _warnings(output), output


@pytest.mark.parametrize("case, expected", [
    ("silent", "silent (active level"),
    ("short", "only 0.10 s, shorter than the 0.3 s flowkit prepare keeps"),
    ("truncated", "bytes of samples but the file holds"),
    ("noise", "sounds like noise, not speech (spectral flatness 0.5"),
])
def test_a_prompt_without_a_voice_is_warned(ckpt: Path, tmp_path: Path, case: str, expected: str) -> None:
    prompt = tmp_path / f"{case}.wav"
    if case == "silent":
        sf.write(prompt, np.zeros(2 * SR, np.float32), SR)
    elif case == "short":
        sf.write(prompt, _voice(0.1), SR)
    elif case == "truncated":  # a copy cut short: the decoder reads what is there and says nothing
        sf.write(prompt, _voice(2.0), SR)
        prompt.write_bytes(prompt.read_bytes()[:20_000])
    else:  # a WAV header over random bytes
        sf.write(prompt, _voice(2.0), SR, subtype="PCM_16")
        data = prompt.read_bytes()
        noise = np.random.default_rng(0).integers(0, 256, len(data) - 44, dtype=np.uint8).tobytes()
        prompt.write_bytes(data[:44] + noise)
    code, output = _synth(ckpt, tmp_path / "o.wav", "--text", "la mora", "--prompt", str(prompt),
                          "--prompt-text", "sun tie")
    assert code == 0, output
    found = [w for w in _warnings(output) if f"--prompt {prompt}" in w]
    assert any(expected in w for w in found), output


def test_a_good_prompt_gives_no_warning(ckpt: Path, tmp_path: Path) -> None:
    prompt = tmp_path / "good.wav"
    sf.write(prompt, _voice(2.0), SR)
    code, output = _synth(ckpt, tmp_path / "o.wav", "--text", "la mora", "--prompt", str(prompt),
                          "--prompt-text", "sun tie")
    assert code == 0 and not _warnings(output), output


def test_a_long_prompt_is_cut_with_its_text(ckpt: Path, tmp_path: Path, generated_utterances: list) -> None:
    """20 s of prompt: cut to at most 15 s (at a pause), its 20 words to the same share."""
    seen = generated_utterances
    prompt = tmp_path / "long.wav"
    sf.write(prompt, _voice(20.0), SR)
    words = " ".join(["la mora sun tie kell"] * 4)
    code, output = _synth(ckpt, tmp_path / "o.wav", "--text", "la mora", "--prompt", str(prompt),
                          "--prompt-text", words)
    assert code == 0, output
    (line,) = [w for w in _warnings(output) if "prompt maximum" in w]
    assert "20.0 s is longer than the 15 s prompt maximum" in line and "of 20 words" in line
    kept_words = int(line.split(" of 20 words")[0].rsplit(", ", 1)[1])
    (u,) = seen
    # 100 frames per second; the cut lands in the last second before 15 s
    assert 1400 <= u.prompt.shape[0] <= 1501
    assert 14 <= kept_words <= 15  # 20 words x (14..15 s / 20 s)
    assert len(u.prompt_text) == len(" ".join(words.split()[:kept_words]))


def test_a_language_the_model_never_saw_or_none_given_is_warned(tmp_path: Path) -> None:
    two = _checkpoint(tmp_path / "two", languages=("en", "de"))
    code, output = _synth(two, tmp_path / "a.wav", "--text", "la mora")
    assert code == 0, output
    assert "warning: no --language given and the model knows several (en, de)" in output
    code, output = _synth(two, tmp_path / "b.wav", "--text", "la mora", "--language", "fr")
    assert "warning: --language 'fr': the model never saw it in training (languages: en, de)" in output
    code, output = _synth(two, tmp_path / "c.wav", "--text", "la mora", "--language", "de")
    assert code == 0 and not _warnings(output), output


def test_a_long_text_is_split_with_its_cap_and_shows_progress(ckpt: Path, tmp_path: Path) -> None:
    """Before: a 2,100-character text ran for over 2 minutes without a line. Now a text
    longer than --max-seconds is split at sentence ends, one ODE progress line per piece
    (plain lines: the test's stdout is not a terminal)."""
    text = "La mora sun tie. Kell la mora sun tie kell. La mora sun. Tie kell la."
    out = tmp_path / "long.wav"
    code, output = _synth(ckpt, out, "--text", text.lower(), "--max-seconds", "1.5")
    assert code == 0, output
    (split,) = [w for w in _warnings(output) if "split into" in w]
    pieces = int(split.split("split into ")[1].split()[0])
    assert pieces >= 2 and "more than the 1.5 s (prompt included)" in split
    progress = [line for line in output.splitlines() if line.startswith("synthesising ")]
    assert len(progress) == pieces and progress[-1].startswith(f"synthesising {pieces * 3}/{pieces * 3}")
    assert f"{pieces} pieces" in output.splitlines()[-1] or f"{pieces} pieces" in output
    frames = sf.info(str(out)).frames
    assert frames > 1.5 * SR  # all the pieces are in the file


def test_a_word_longer_than_the_cap_is_refused_with_the_cap(ckpt: Path, tmp_path: Path) -> None:
    out = tmp_path / "w.wav"
    code, output = _synth(ckpt, out, "--text", "lamorasuntiekelllamorasuntiekell", "--max-seconds", "0.3")
    assert code == 2, output
    assert "error: --text: the word 'lamorasuntiekelllamorasuntiekell' alone is longer" in output
    assert "--max-seconds 0.3" in output and not out.exists()


def test_a_text_that_fits_is_synthesised_whole_as_before(ckpt: Path, tmp_path: Path) -> None:
    from flowkit.synth.synthesize import synthesize_file

    result = synthesize_file(ckpt, "la mora. sun tie", tmp_path / "w.wav", steps=2)
    assert result.pieces == 1 and result.warnings == ()


# ---- the probe ----------------------------------------------------------------------------


class _Recogniser:
    languages = ("en",)

    def transcribe(self, audio, sr, language):  # never called: the probe is only built
        return ""


def _split(languages: list[str], texts: list[str] | None = None) -> object:
    segments = [types.SimpleNamespace(segment_id=f"s{k}", text=(texts or [WORDS] * len(languages))[k], language=lang,
                                      speaker=f"spk{k % 2}", n_frames=60, emotion="", intensity=float("nan"),
                                      rate=1, loudness=1) for k, lang in enumerate(languages)]
    return types.SimpleNamespace(segments=segments, read=lambda idx: [np.zeros((60, 8), np.float32) for _ in idx])


def _probe(settings_kwargs: dict, split: object, model_languages: list[str]) -> object:
    from flowkit.text.chars import build_vocab
    from flowkit.train.probe import ProbeRunner, ProbeSettings

    settings = ProbeSettings(asr=_Recogniser(), **settings_kwargs)
    return ProbeRunner(settings, split, stats=None, vocab=build_vocab([WORDS]), languages=model_languages,
                       schedule=None, solver=None, vocoder=None, encoder={}, run_seed=0, device="cpu")


def test_probe_languages_the_split_or_the_recogniser_lack_are_warned(capsys: pytest.CaptureFixture) -> None:
    runner = _probe({"languages": ("en", "de", "fr")}, _split(["en", "en", "fr", "fr"]), ["en", "fr"])
    assert {s.language for s in runner.sentences} == {"en"}
    err = capsys.readouterr().err
    assert "warning: Probe.languages: 'de' has no segment in the 'val' split (it holds en, fr); not probed" in err
    assert "warning: Probe.languages: the recogniser (_Recogniser) does not know 'fr' (it knows en)" in err


def test_probe_sentences_the_model_cannot_say_are_warned(capsys: pytest.CaptureFixture) -> None:
    split = _split(["en"] * 4, ["日本語", WORDS, WORDS, WORDS])
    _probe({"sentences": 4}, split, ["de"])
    err = capsys.readouterr().err
    assert "warning: Probe: the 'en' sentences are in a language the model never saw in training (languages: de)" in err
    assert "warning: Probe: 1 of 4 sentences have no character in the model's vocabulary (s0)" in err
