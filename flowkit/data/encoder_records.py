"""Encoder records: what made a store's latents, and whether a vocoder can turn them back.

An encoder record is ``{"name": <encoder>, "params": {...}}`` as `flowkit prepare` writes it
into a store's attributes and training copies it into every checkpoint's meta. A vocoder
declares the records it inverts with ``accepts() -> Sequence[EncoderSpec]`` (the encoder's
name and the parameters that matter: sample rate, hop, bins, mel scale), and
`check_vocoder` refuses any other latents in one line before any work is done: latents of
one mel definition decoded by a vocoder trained on another give noise, silently (F5-TTS
#872: v1 checkpoints decoded through BigVGAN). This module sits low (data) so that
training can check its ``Trainer.vocoder`` at start without importing synthesis.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from flowkit.errors import ConfigError

__all__ = ["MEL_SCALES", "EncoderSpec", "check_vocoder", "describe_record", "record_params", "vocoder_label",
           "vocoder_record"]

#: The mel scale of each built-in encoder's features (a record may also state its own).
MEL_SCALES = {"log_mel": "slaney", "vocos_mel": "htk"}
_SHOWN = (("sample_rate", "{} Hz"), ("hop_length", "hop {}"), ("n_mels", "{} bins"), ("mel_scale", "{} mel"))


def record_params(record: Mapping[str, Any]) -> dict[str, Any]:
    """The record's parameters with ``mel_scale`` filled in for the built-in encoders."""
    params = dict(record.get("params") or {})
    name = record.get("name")
    if "mel_scale" not in params and name in MEL_SCALES:
        params["mel_scale"] = MEL_SCALES[name]
    if params.get("fmax") is None and "sample_rate" in params:
        params["fmax"] = params["sample_rate"] / 2
    return params


def _text(name: Any, params: Mapping[str, Any]) -> str:
    shown = [fmt.format(params[k] if k != "mel_scale" else str(params[k]).upper().replace("SLANEY", "Slaney"))
             for k, fmt in _SHOWN if params.get(k) is not None]
    return f"encoder.{name}" + (f" ({', '.join(shown)})" if shown else "")


def describe_record(record: Mapping[str, Any]) -> str:
    """``encoder.log_mel (16000 Hz, hop 160, 80 bins, Slaney mel)`` for an encoder record."""
    return _text(record.get("name"), record_params(record))


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, int | float) and isinstance(b, int | float) and not isinstance(a, bool):
        return abs(float(a) - float(b)) <= 1e-9 * max(1.0, abs(float(a)))
    return a == b


@attrs.frozen
class EncoderSpec:
    """Latents a vocoder inverts: made by ``encoder.<name>`` with each of ``params`` equal.

    Keys of ``params`` are the encoder's parameter names plus ``mel_scale`` ("slaney",
    "htk"); a parameter not named may take any value.
    """

    name: str
    params: Mapping[str, Any] = attrs.field(factory=dict, converter=dict)

    def mismatch(self, record: Mapping[str, Any]) -> str | None:
        """None when ``record`` fits, else the first difference (``hop_length 160, not 256``)."""
        if record.get("name") != self.name:
            return f"encoder.{record.get('name')}, not encoder.{self.name}"
        given = record_params(record)
        for key, want in self.params.items():
            if key not in given or not _same(given[key], want):
                return f"{key} {given.get(key, 'unset')}, not {want}"
        return None

    def describe(self) -> str:
        """``encoder.vocos_mel (24000 Hz, hop 256, 100 bins, HTK mel)``."""
        return _text(self.name, self.params)


def vocoder_label(vocoder: Any) -> str:
    """How outputs name the vocoder (its ``label``, else its class name)."""
    return str(getattr(vocoder, "label", None) or type(vocoder).__name__)


def check_vocoder(vocoder: Any, record: Mapping[str, Any], *, source: str = "the latents") -> None:
    """Refuse, in one line, latents ``vocoder`` was not made for.

    Args:
        vocoder: a vocoder with ``accepts() -> Sequence[EncoderSpec]``.
        record: the encoder record of the latents (``{"name", "params"}``).
        source: what holds the latents, for the message (a store, a checkpoint).

    Raises:
        ConfigError: ``vocoder`` declares no accepted encoders, or none fits ``record``.
    """
    accepts = getattr(vocoder, "accepts", None)
    if accepts is None:
        raise ConfigError(
            f"{vocoder_label(vocoder)} does not declare the encoders it inverts (an accepts() method "
            "returning flowkit.synth.vocoders.EncoderSpec s); add one to the plugin"
        )
    specs = list(accepts())
    reasons = [spec.mismatch(record) for spec in specs]
    if any(r is None for r in reasons):
        return
    wanted = " or ".join(spec.describe() for spec in specs)
    # name the differing parameter when the encoder is the right one at other settings
    detail = next((f" ({r})" for s, r in zip(specs, reasons, strict=True) if s.name == record.get("name")), "")
    raise ConfigError(
        f"{vocoder_label(vocoder)} inverts {wanted}; {source} come from {describe_record(record)}{detail}: "
        "choose a vocoder made for them (--vocoder or Trainer.vocoder; "
        "vocoder.griffin_lim inverts log_mel and vocos_mel latents without weights)"
    )


def vocoder_record(vocoder: Any) -> dict[str, Any] | None:
    """``{"name", "params"}`` of a registered attrs vocoder (for checkpoint meta); None for None.

    A ``path`` parameter is made absolute, so the record still points at it from another
    working directory. A vocoder that is not a registered attrs class records its label only.
    """
    if vocoder is None:
        return None
    from pathlib import Path

    from flowkit import registry

    name = next((c.name for c in registry.components("vocoder")
                 if isinstance(c.obj, type) and isinstance(vocoder, c.obj)), None)
    if name is None or not attrs.has(type(vocoder)):
        return {"name": None, "label": vocoder_label(vocoder), "params": {}}
    params = attrs.asdict(vocoder)
    if params.get("path"):
        params["path"] = str(Path(params["path"]).expanduser().resolve())
    return {"name": name, "params": params}
