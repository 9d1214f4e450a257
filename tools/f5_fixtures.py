"""Write the F5-TTS reference fixtures that flowkit's interop tests compare against.

Run ONCE, by hand, in a side environment that has F5-TTS's own dependencies (torch with
a matching torchaudio, x-transformers, librosa, soundfile, soxr, rjieba, pypinyin) and
a checkout of F5-TTS's source; never in CI, never from the package::

    /work/sideenv/bin/python tools/f5_fixtures.py --f5-src /work/ext/F5-TTS/src mel
    /work/sideenv/bin/python tools/f5_fixtures.py --f5-src /work/ext/F5-TTS/src dit
    /work/sideenv/bin/python tools/f5_fixtures.py --f5-src /work/ext/F5-TTS/src tokenizer

The fixtures were written from SWivid/F5-TTS at commit
2ae2c9bd9b64dab2cb069c4b97e5e7673c521e01. Only F5's model code is imported: its package
``__init__`` (trainer, datasets, accelerate, wandb) is bypassed by registering empty
package modules whose search path is F5's source folder, so nothing beyond the modules
named here runs. No weights are downloaded: every model is built with random weights
from a fixed seed. The outputs land in ``tests/fixtures/f5/`` and stay small (inputs,
seeds and outputs; the base-size weights are regenerated from their seed by the tests,
see ``flowkit.interop.f5_random``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import types
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "tests" / "fixtures" / "f5"
CORPUS = REPO.parent / "shared" / "data" / "asterisk-5voice"
F5_COMMIT = "2ae2c9bd9b64dab2cb069c4b97e5e7673c521e01"

#: Real clips of the shared corpus (16 kHz FLAC), one per speaker, plus a near-silent one
#: so the log floor is exercised.
MEL_CLIPS = (
    "allison_en_pm-invalid-option",
    "june_fr_agent-loginok",
    "carlo_it_pm-invalid-option",
    "maxim_ru_agent-pass",
    "allison_es_vm-goodbye",
    "maxim_ru_silence-1",
)

MEL_START, MEL_SAMPLES = 4800, 28800  # 0.2 s in, 1.2 s long, at 24 kHz


def _bypass_package_inits(f5_src: Path) -> None:
    """Make ``f5_tts`` and ``f5_tts.model`` importable without running their ``__init__``."""
    for name, folder in (("f5_tts", f5_src / "f5_tts"), ("f5_tts.model", f5_src / "f5_tts" / "model"),
                         ("f5_tts.model.backbones", f5_src / "f5_tts" / "model" / "backbones")):
        module = types.ModuleType(name)
        module.__path__ = [str(folder)]
        sys.modules[name] = module


def _clip_path(segment_id: str) -> Path:
    for suffix in (".flac", ".wav"):
        path = CORPUS / "wavs" / f"{segment_id}{suffix}"
        if path.exists():
            return path
    raise SystemExit(f"clip {segment_id} not found under {CORPUS / 'wavs'}")


def write_mel() -> None:
    """F5's ``MelSpec(mel_spec_type="vocos")`` of real clips, with the 24 kHz waveform it saw."""
    import soundfile as sf
    import soxr
    import torch
    from f5_tts.model.modules import MelSpec

    mel_spec = MelSpec(mel_spec_type="vocos")
    arrays: dict[str, np.ndarray] = {}
    for i, segment_id in enumerate(MEL_CLIPS):
        audio, sr = sf.read(str(_clip_path(segment_id)), dtype="float32")
        wave = soxr.resample(audio, sr, 24000, quality="HQ").astype(np.float32)
        wave = wave[MEL_START:MEL_START + MEL_SAMPLES]  # a 1.2 s excerpt keeps the fixture small
        with torch.no_grad():
            mel = mel_spec(torch.from_numpy(wave)[None])[0]  # [d n]
        arrays[f"wave_{i}"] = wave
        arrays[f"mel_{i}"] = mel.numpy().T.astype(np.float32)  # [n d], flowkit's layout
    meta = {"f5_commit": F5_COMMIT, "clips": list(MEL_CLIPS), "f5_call": 'MelSpec(mel_spec_type="vocos")',
            "resample": "soundfile decode, soxr HQ to 24000 Hz",
            "excerpt": [MEL_START, MEL_SAMPLES]}
    np.savez_compressed(OUT / "vocos_mel.npz", meta=np.array(json.dumps(meta)), **arrays)
    print(f"wrote {OUT / 'vocos_mel.npz'} ({(OUT / 'vocos_mel.npz').stat().st_size} bytes)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--f5-src", type=Path, required=True, help="F5-TTS's src/ folder (holds f5_tts/)")
    parser.add_argument("what", choices=["mel"], nargs="+")
    args = parser.parse_args()
    _bypass_package_inits(args.f5_src.resolve())
    OUT.mkdir(parents=True, exist_ok=True)
    for what in args.what:
        {"mel": write_mel}[what]()


if __name__ == "__main__":
    main()
