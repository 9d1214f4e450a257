"""Write the Vocos parity fixtures once, from the reference code (never in CI).

    /work/sideenv/bin/python tools/vocos_fixtures.py --vocos-src /work/ext/vocos

``--vocos-src`` is a checkout of charactr-platform/vocos (the fixtures in the repository
come from commit 86db50a025ecaddf864366d5dbfc83554ceedc60); the interpreter needs torch,
torchaudio, PyYAML, numpy and soundfile (the side environment of docs/f5-tts.md). The
reference's EnCodec feature extractor is not used: its ``encodec`` import is given an
empty module.

For each configuration (the published charactr/vocos-mel-24khz one and a reduced one) the
tool builds the reference ``Vocos`` from its config.yaml, fills every tensor of its state
dict from `seeded_state` (numpy only, so ``tests/synth/test_vocos.py`` draws the same
weights without the reference), decodes log-mel features with ``Vocos.decode`` one item
at a time, and writes ``tests/synth/fixtures/vocos_<name>.npz``: the config text, the seed,
the state dict's names and shapes (the published layout), a checksum of the weights, the
features, their lengths and the reference audio. The first item is the reference's own
mel of a real clip; the others are random log-mel frames; lengths are odd and unequal.
"""

from __future__ import annotations

import argparse
import json
import sys
import types
import zlib
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "tests" / "synth" / "fixtures"
CLIP = REPO.parent / "shared" / "data" / "asterisk-5voice" / "wavs" / "allison_en_pm-invalid-option.flac"

# charactr/vocos-mel-24khz config.yaml as published on the Hugging Face hub (2023-08-09).
PUBLISHED = """\
feature_extractor:
  class_path: vocos.feature_extractors.MelSpectrogramFeatures
  init_args:
    sample_rate: 24000
    n_fft: 1024
    hop_length: 256
    n_mels: 100
    padding: center

backbone:
  class_path: vocos.models.VocosBackbone
  init_args:
    input_channels: 100
    dim: 512
    intermediate_dim: 1536
    num_layers: 8

head:
  class_path: vocos.heads.ISTFTHead
  init_args:
    dim: 512
    n_fft: 1024
    hop_length: 256
    padding: center
"""

# The same architecture at another rate and size (every size read from the file).
REDUCED = """\
feature_extractor:
  class_path: vocos.feature_extractors.MelSpectrogramFeatures
  init_args:
    sample_rate: 16000
    n_fft: 512
    hop_length: 128
    n_mels: 80
    padding: center

backbone:
  class_path: vocos.models.VocosBackbone
  init_args:
    input_channels: 80
    dim: 48
    intermediate_dim: 144
    num_layers: 3
    layer_scale_init_value: 0.25

head:
  class_path: vocos.heads.ISTFTHead
  init_args:
    dim: 48
    n_fft: 512
    hop_length: 128
    padding: center
"""

CONFIGS = {"published": (PUBLISHED, 1616, (23, 15, 7)), "reduced": (REDUCED, 7, (19, 11))}


def seeded_state(shapes: dict[str, list[int]], seed: int) -> dict[str, np.ndarray]:
    """Deterministic float32 values for every tensor of a Vocos state dict (numpy only).

    Each key draws from its own PCG64 stream seeded by ``(seed, crc32(key))``, so the values
    do not depend on key order. Windows are periodic Hann windows; layer-norm scales sit
    near 1, layer-scale vectors in [0.05, 0.5]; the head's projection is wide enough that
    some magnitudes reach the reference's ceiling of 100 and phases wrap; everything else
    is uniform around 0 at about the reference's initial scale.
    """
    state = {}
    for key, shape in shapes.items():
        rng = np.random.Generator(np.random.PCG64([seed, zlib.crc32(key.encode("utf-8"))]))
        if key.endswith("window"):
            n = shape[0]
            value = 0.5 - 0.5 * np.cos(2.0 * np.pi * np.arange(n) / n)
        elif key.endswith("gamma"):
            value = rng.uniform(0.05, 0.5, shape)
        elif "norm" in key and key.endswith("weight"):
            value = 1.0 + rng.uniform(-0.2, 0.2, shape)
        elif key == "head.out.weight":
            value = rng.uniform(-0.17, 0.17, shape)
        elif key.endswith("bias"):
            value = rng.uniform(-0.05, 0.05, shape)
        else:
            value = rng.uniform(-0.05, 0.05, shape)
        state[key] = np.asarray(value, dtype=np.float32).reshape(shape)
    return state


def checksum(state: dict[str, np.ndarray]) -> float:
    """Sum of absolute values over the state (float64): catches a drift in `seeded_state`."""
    return float(sum(np.abs(v.astype(np.float64)).sum() for v in state.values()))


def _reference(vocos_src: Path):
    sys.path.insert(0, str(vocos_src))
    stub = types.ModuleType("encodec")
    stub.EncodecModel = None  # only vocos' EncodecFeatures uses it; the mel model does not
    sys.modules.setdefault("encodec", stub)
    from vocos import Vocos  # noqa: PLC0415

    return Vocos


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocos-src", type=Path, required=True, help="checkout of charactr-platform/vocos")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()

    import soundfile as sf
    import torch

    Vocos = _reference(args.vocos_src)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, (text, seed, lengths) in CONFIGS.items():
        cfg_path = args.out / f"vocos_{name}.yaml"
        cfg_path.write_text(text, encoding="utf-8")
        model = Vocos.from_hparams(str(cfg_path)).eval()
        cfg_path.unlink()
        shapes = {k: list(v.shape) for k, v in model.state_dict().items()}
        state = seeded_state(shapes, seed)
        model.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()}, strict=True)

        fe = model.feature_extractor.mel_spec
        sr, hop, n_mels = fe.sample_rate, fe.hop_length, fe.n_mels
        audio, clip_sr = sf.read(str(CLIP), dtype="float32")
        import librosa

        audio = librosa.resample(audio, orig_sr=clip_sr, target_sr=sr)
        start = len(audio) // 3
        real = model.feature_extractor(torch.from_numpy(audio[start : start + (lengths[0] - 1) * hop]).float()[None])
        assert real.shape[-1] == lengths[0], real.shape
        rng = np.random.default_rng(seed)
        features = np.zeros((len(lengths), n_mels, max(lengths)), dtype=np.float32)
        features[0, :, : lengths[0]] = real[0].numpy()
        for i, n in enumerate(lengths[1:], start=1):
            features[i, :, :n] = rng.normal(-4.0, 2.5, (n_mels, n)).astype(np.float32)
        outputs = []
        for i, n in enumerate(lengths):
            out = model.decode(torch.from_numpy(features[i : i + 1, :, :n]))
            outputs.append(out[0].numpy().astype(np.float32))
        np.savez_compressed(
            args.out / f"vocos_{name}.npz",
            config_yaml=np.array(text),
            seed=np.array(seed),
            shapes=np.array(json.dumps(shapes)),
            checksum=np.array(checksum(state)),
            features=features,
            lengths=np.array(lengths, dtype=np.int64),
            audio=np.concatenate(outputs),
            audio_lengths=np.array([len(o) for o in outputs], dtype=np.int64),
            reference=np.array("charactr-platform/vocos@86db50a025ecaddf864366d5dbfc83554ceedc60 Vocos.decode, "
                               f"torch {torch.__version__}"),
        )
        peak = max(float(np.abs(o).max()) for o in outputs)
        print(f"{name}: {len(shapes)} tensors, lengths {lengths}, audio peak {peak:.3f} -> "
              f"{args.out / f'vocos_{name}.npz'}")


if __name__ == "__main__":
    main()
