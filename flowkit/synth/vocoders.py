"""Vocoders: latent frames -> audio, each declaring the latents it can invert.

Shape legend: n frames, d latent channels (mel bins), s audio samples.

A vocoder is called as ``vocoder(latents [n d], encoder_record) -> (audio [s], Hz)`` and
declares, through ``accepts()``, the encoder records it inverts
(`flowkit.data.encoder_records.EncoderSpec`: the encoder's name and the parameters that
must match — sample rate, hop, bins, mel scale); `check_vocoder` there refuses any other
latents in one line. Audio comes back at the vocoder's own level; see
`flowkit.synth.level` for loudness and clipping.

- ``vocoder.griffin_lim`` (the weight-free default) inverts ``encoder.log_mel`` and
  ``encoder.vocos_mel`` latents: the mel spectrogram is mapped back to a linear magnitude
  spectrogram through the pseudo-inverse of the encoder's own filterbank (Slaney for
  log_mel, HTK without area normalisation for vocos_mel), and phase is recovered by fast
  Griffin-Lim (Griffin & Lim 1984; Perraudin et al. 2013 for the momentum variant), both as
  implemented by librosa. Intelligible, not natural.
- ``vocoder.vocos`` decodes ``encoder.vocos_mel`` latents with a Vocos release directory
  (charactr/vocos-mel-24khz, as published), through `flowkit.synth.vocos`.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from flowkit import hub
from flowkit.data.encoder_records import MEL_SCALES, EncoderSpec, check_vocoder, record_params
from flowkit.errors import ConfigError
from flowkit.registry import register

__all__ = ["GriffinLim", "Vocos", "choose_vocoder"]

@functools.lru_cache(maxsize=4)
def _mel_pinv(sample_rate: int, n_fft: int, n_mels: int, fmin: float, fmax: float, htk: bool) -> np.ndarray:
    import librosa

    basis = librosa.filters.mel(
        sr=sample_rate, n_fft=n_fft, n_mels=n_mels, fmin=fmin, fmax=fmax, htk=htk, norm=None if htk else "slaney"
    )
    return np.linalg.pinv(basis)


@register("vocoder", "griffin_lim")
@attrs.frozen
class GriffinLim:
    """Griffin-Lim phase recovery for log_mel and vocos_mel latents (no weights).

    Args:
        n_iter: Griffin-Lim iterations; 32 is librosa's default, more is slower and cleaner.
        momentum: fast Griffin-Lim momentum in [0, 1); 0.99 is librosa's default.
        seed: seed of the initial random phase, so the same latents give the same audio.
    """

    n_iter: int = 32
    momentum: float = 0.99
    seed: int = 0

    @property
    def label(self) -> str:
        """``vocoder.griffin_lim (32 iterations)``."""
        return f"vocoder.griffin_lim ({self.n_iter} iterations)"

    def accepts(self) -> tuple[EncoderSpec, ...]:
        """Both built-in mel encoders, at any of their parameters (they are read from the record)."""
        return tuple(EncoderSpec(name, {"mel_scale": scale}) for name, scale in MEL_SCALES.items())

    def __call__(self, latents: np.ndarray, encoder: Mapping[str, Any]) -> tuple[np.ndarray, int]:
        """Latents ``[n d]`` (de-normalised, natural-log mel) -> ``(audio [s] float32, Hz)``.

        The audio keeps the level the mel implies (it is not normalised).

        Args:
            latents: ``[n d]`` log-mel frames as the store holds them.
            encoder: the latents' encoder record, ``{"name": "log_mel", "params": {...}}``.

        Raises:
            ConfigError: the latents were made by another encoder, or their width is not
                the encoder's ``n_mels``.
        """
        import librosa

        check_vocoder(self, encoder)
        p = record_params(encoder)
        latents = np.asarray(latents, dtype=np.float32)
        if latents.ndim != 2 or latents.shape[1] != int(p["n_mels"]):
            raise ConfigError(
                f"vocoder.griffin_lim: latents of shape {tuple(latents.shape)} do not match "
                f"n_mels={p['n_mels']} of the encoder"
            )
        sr = int(p["sample_rate"])
        pinv = _mel_pinv(sr, int(p["n_fft"]), int(p["n_mels"]), float(p.get("fmin") or 0.0), float(p["fmax"]),
                         p["mel_scale"] == "htk")
        mel = np.exp(latents.T.astype(np.float64))  # [d n] magnitude mel
        # pseudo-inverse, clipped at zero: librosa's NNLS inverse is ~50x slower for the
        # same Griffin-Lim result at these sizes
        stft_mag = np.maximum(pinv @ mel, 0.0)
        audio = librosa.griffinlim(
            stft_mag,
            n_iter=self.n_iter,
            hop_length=int(p["hop_length"]),
            win_length=int(p.get("win_length") or p["n_fft"]),
            n_fft=int(p["n_fft"]),
            momentum=self.momentum,
            random_state=self.seed,
        )
        return audio.astype(np.float32), sr


@functools.lru_cache(maxsize=2)
def _loaded(directory: str, device: str, stamp: tuple[float, ...]) -> Any:
    """One loaded release per (directory, device, file times): a report decodes many clips."""
    from flowkit.synth.vocos import load_vocos

    return load_vocos(directory, device=device)


@register("vocoder", "vocos")
@attrs.frozen
class Vocos:
    """Vocos (Siuzdak 2023) from a release directory, for vocos_mel latents (24 kHz).

    Args:
        path: a Vocos release directory as published: ``config.yaml`` and
            ``pytorch_model.bin`` (e.g. a download of charactr/vocos-mel-24khz), or
            ``hf://charactr/vocos-mel-24khz``: the Hugging Face cache first, fetched
            only when missing and the hub may be reached (`flowkit.hub`).
        device: "cpu" or "cuda" ("cuda:N"): where the decoder runs.
    """

    path: str = ""
    device: str = "cpu"

    def __attrs_post_init__(self) -> None:
        if hub.is_hub(self.path):  # its form only, nothing fetched: `flowkit config` refuses what train would
            try:
                hub.parse(self.path)
            except ConfigError as exc:
                raise ConfigError(f"vocoder.vocos.path = {str(self.path)!r}: {exc}") from None

    def _directory(self) -> Path:
        if not str(self.path):
            raise ConfigError(
                "vocoder.vocos needs the Vocos directory (config.yaml + pytorch_model.bin): pass "
                "--vocoder-path DIR or bind vocoder.vocos.path = 'DIR'"
            )
        if hub.is_hub(self.path):
            return hub.resolve(self.path, kind="dir")
        return Path(self.path).expanduser()

    @property
    def label(self) -> str:
        """``vocoder.vocos (path/to/vocos-mel-24khz)``."""
        return f"vocoder.vocos ({self.path or 'no path'})"

    def accepts(self) -> tuple[EncoderSpec, ...]:
        """The vocos_mel features the directory's ``config.yaml`` names (reads only that file).

        Raises:
            ConfigError: no path. CheckpointError: a missing or foreign config (one line).
        """
        from flowkit.synth.vocos import CONFIG_FILE, check_directory, read_config

        directory = self._directory()
        check_directory(directory)
        cfg = read_config(directory / CONFIG_FILE)
        return (EncoderSpec("vocos_mel", {**cfg.encoder_params(), "mel_scale": "htk"}),)

    def _net(self) -> Any:
        from flowkit.synth.vocos import CONFIG_FILE, WEIGHTS_FILE, check_directory

        directory = self._directory()
        check_directory(directory)
        if self.device.startswith("cuda"):
            import torch

            if not torch.cuda.is_available():
                raise ConfigError(f"vocoder.vocos.device = {self.device!r}, but CUDA is not available here; use 'cpu'")
        stamp = tuple((directory / f).stat().st_mtime for f in (CONFIG_FILE, WEIGHTS_FILE))
        return _loaded(str(directory.resolve()), self.device, stamp).net

    def decode(self, latents: Sequence[np.ndarray], encoder: Mapping[str, Any]) -> tuple[list[np.ndarray], int]:
        """Several clips at once: ``[n_i d]`` each -> ``([s_i] float32 each, Hz)``, ``s_i = (n_i - 1) * hop``.

        Raises:
            ConfigError: latents of another encoder (see `check_vocoder`), or of the wrong width.
            CheckpointError: the directory cannot be loaded (see `flowkit.synth.vocos.load_vocos`).
        """
        import torch

        check_vocoder(self, encoder)
        net = self._net()
        arrays = [np.asarray(x, dtype=np.float32) for x in latents]
        for x in arrays:
            if x.ndim != 2 or x.shape[1] != net.cfg.n_mels:
                raise ConfigError(f"vocoder.vocos: latents of shape {tuple(x.shape)} "
                                  f"are not [frames, {net.cfg.n_mels}]")
        out = [np.zeros(0, dtype=np.float32)] * len(arrays)
        rows = [i for i, x in enumerate(arrays) if x.shape[0] >= 2]  # one frame makes no audio
        if rows:
            n = max(arrays[i].shape[0] for i in rows)
            features = np.zeros((len(rows), net.cfg.n_mels, n), dtype=np.float32)
            for k, i in enumerate(rows):
                features[k, :, : arrays[i].shape[0]] = arrays[i].T
            device = next(net.parameters()).device
            audio = net.decode(torch.from_numpy(features).to(device), [arrays[i].shape[0] for i in rows]).cpu().numpy()
            for k, i in enumerate(rows):
                out[i] = audio[k, : net.samples(arrays[i].shape[0])].copy()
        return out, net.cfg.sample_rate

    def __call__(self, latents: np.ndarray, encoder: Mapping[str, Any]) -> tuple[np.ndarray, int]:
        """Latents ``[n d]`` (de-normalised vocos_mel) -> ``(audio [(n - 1) * hop] float32, Hz)``.

        Raises:
            ConfigError, CheckpointError: as `decode`.
        """
        (audio,), sr = self.decode([latents], encoder)
        return audio, sr


def choose_vocoder(name: str | None = None, path: str | Path | None = None, *,
                   run_vocoder: Mapping[str, Any] | None = None) -> Any:
    """The vocoder to decode with.

    Args:
        name: ``--vocoder``: a registered vocoder name ("griffin_lim", "vocos", a plugin's);
            None with a ``path`` means "vocos".
        path: ``--vocoder-path``: the directory of a vocoder that takes one (vocos).
        run_vocoder: the run's ``Trainer.vocoder`` record from checkpoint meta, used when
            neither ``name`` nor ``path`` is given.

    Returns:
        ``name`` built with ``path``; else the run's vocoder; else ``vocoder.griffin_lim()``.

    Raises:
        RegistryError: an unknown name (with the closest registered ones).
        ConfigError: a path for a vocoder that takes none, or a run vocoder that is not
            registered here.
    """
    from flowkit import registry

    if name is None and path is not None:
        name = "vocos"
    if name is not None:
        component = registry.get("vocoder", name)
        if path is None:
            return component.obj()
        if "path" not in [p[0] for p in component.parameters()]:
            raise ConfigError(f"--vocoder-path {path}: vocoder.{name} takes no path; drop --vocoder-path")
        return component.obj(path=str(path))
    if run_vocoder and run_vocoder.get("name"):
        return registry.build("vocoder", str(run_vocoder["name"]), **dict(run_vocoder.get("params") or {}))
    if run_vocoder:
        raise ConfigError(
            f"the run's Trainer.vocoder ({run_vocoder.get('label')}) is not a registered vocoder; choose one "
            "with --vocoder NAME"
        )
    return GriffinLim()


def checked_vocoder(encoder: Mapping[str, Any], *, source: str, given: Any = None,
                    run_vocoder: Mapping[str, Any] | None = None) -> tuple[Any, str]:
    """The vocoder for latents of ``encoder`` (a store's or checkpoint's encoder record) and
    its caption label: ``given`` when not None, else `choose_vocoder` of the run's record;
    checked with `flowkit.data.encoder_records.check_vocoder` before any work is done.

    Returns:
        ``(vocoder, label)``; ``label`` is its name and settings (`vocoder_label`).

    Raises:
        ConfigError: a vocoder that cannot invert these latents (the line names ``source``),
            or as `choose_vocoder` raises.
    """
    from flowkit.data.encoder_records import check_vocoder, vocoder_label

    chosen = given if given is not None else choose_vocoder(run_vocoder=run_vocoder)
    check_vocoder(chosen, encoder, source=source)
    return chosen, vocoder_label(chosen)
