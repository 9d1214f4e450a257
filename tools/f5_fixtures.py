"""Write the F5-TTS reference fixtures that flowkit's interop tests compare against.

Run ONCE, by hand, in a side environment that has F5-TTS's own dependencies (torch with
a matching torchaudio, x-transformers, librosa, soundfile, soxr, rjieba, pypinyin) and
a checkout of F5-TTS's source; never in CI, never from the package::

    /work/sideenv/bin/python tools/f5_fixtures.py --f5-src /work/ext/F5-TTS/src mel
    /work/sideenv/bin/python tools/f5_fixtures.py --f5-src /work/ext/F5-TTS/src dit
    /work/sideenv/bin/python tools/f5_fixtures.py --f5-src /work/ext/F5-TTS/src tokenizer
    /work/sideenv/bin/python tools/f5_fixtures.py --f5-src /work/ext/F5-TTS/src check-export \
        --export DIR/model.safetensors

(``check-export`` takes the file that ``tests/interop/test_f5_import_export.py`` builds:
a seeded F5 checkpoint imported and exported again by flowkit.)

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
sys.path.insert(0, str(REPO / "tests" / "interop"))  # f5_weights: the seeded weights both sides build
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


#: (name, F5 config, DiT keyword arguments, vocabulary size, seed). "small" is dim 256 /
#: depth 4 (F5TTS_v1_Small's width), "base" the released F5TTS_v1_Base / F5TTS_Base sizes;
#: text_mask_padding / pe_attn_head as in F5's configs/F5TTS_v1_Base.yaml and F5TTS_Base.yaml.
DIT_CASES = (
    ("small_v1", "F5TTS_v1_Base", dict(dim=256, depth=4, heads=4, ff_mult=2, text_dim=128, conv_layers=2,
                                       text_mask_padding=True, pe_attn_head=None), 40, 11),
    ("small_base", "F5TTS_Base", dict(dim=256, depth=4, heads=4, ff_mult=2, text_dim=128, conv_layers=2,
                                      text_mask_padding=False, pe_attn_head=1), 40, 12),
    ("base_v1", "F5TTS_v1_Base", dict(dim=1024, depth=22, heads=16, ff_mult=2, text_dim=512, conv_layers=4,
                                      text_mask_padding=True, pe_attn_head=None), 2545, 13),
    ("base_base", "F5TTS_Base", dict(dim=1024, depth=22, heads=16, ff_mult=2, text_dim=512, conv_layers=4,
                                     text_mask_padding=False, pe_attn_head=1), 2545, 14),
)
DROPS = ((False, False), (True, False), (False, True), (True, True))


def write_dit() -> None:
    """F5's DiT velocity with seeded random weights: both configs, small and base sizes,
    with and without a mask, each CFG drop flag (inputs, key shapes and outputs stored)."""
    import torch
    from f5_tts.model.backbones.dit import DiT
    from f5_weights import random_f5_state, random_inputs

    torch.set_num_threads(2)
    for name, config, kwargs, vocab, seed in DIT_CASES:
        torch.manual_seed(0)
        model = DiT(**kwargs, text_num_embeds=vocab, mel_dim=100).eval()
        shapes = {k: list(v.shape) for k, v in model.state_dict().items()}
        state = random_f5_state(shapes, seed)
        model.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()})
        inputs = random_inputs(seed, batch=2, frames=48 if name.startswith("small") else 24, text_len=20, vocab=vocab)
        t = {k: torch.from_numpy(v) for k, v in inputs.items()}
        arrays = {f"in_{k}": v for k, v in inputs.items()}
        with torch.no_grad():
            for masked in (False, True):
                for drop_audio, drop_text in DROPS:
                    out = model(x=t["x"], cond=t["cond"], text=t["text"], time=t["time"],
                                mask=t["mask"] if masked else None, drop_audio_cond=drop_audio, drop_text=drop_text)
                    arrays[f"out_mask{int(masked)}_a{int(drop_audio)}_t{int(drop_text)}"] = out.numpy()
        checksum = float(sum(float(np.abs(v).sum()) for v in state.values()))
        meta = {"f5_commit": F5_COMMIT, "config": config, "dit_kwargs": kwargs, "text_num_embeds": vocab,
                "seed": seed, "shapes": shapes, "weights_abs_sum": checksum,
                "f5_call": "f5_tts.model.backbones.dit.DiT(...).eval()"
                           "(x, cond, text, time, mask, drop_audio_cond, drop_text)"}
        target = OUT / f"dit_{name}.npz"
        np.savez_compressed(target, meta=np.array(json.dumps(meta)), **arrays)
        print(f"wrote {target} ({target.stat().st_size} bytes)")


#: Texts for the tokenizer fixture: Chinese (polyphones, tone sandhi), mixed Chinese and
#: Latin, folded punctuation, accents, Cyrillic, a character F5's vocabulary lacks.
TEXTS = (
    "你好，世界！",
    "我们一起去银行，行不行？",
    "F5-TTS 是一个 flow matching 模型。",
    "He said \u201chello\u201d; then left.",
    "Très bien, à bientôt.",
    "Привет, мир",
    "数字 123 和 ABC",
    "\u2603 snowman",
    "",
)


def write_tokenizer() -> None:
    """F5's ``convert_char_to_pinyin`` + ``list_str_to_idx`` with its released vocab.txt."""
    from f5_tts.model.utils import convert_char_to_pinyin, get_tokenizer, list_str_to_idx

    vocab_path = Path(sys.modules["f5_tts"].__path__[0]) / "infer" / "examples" / "vocab.txt"
    vocab_map, size = get_tokenizer(str(vocab_path), "custom")
    tokens = convert_char_to_pinyin(list(TEXTS))
    ids = [list_str_to_idx([t], vocab_map).tolist()[0] if t else [] for t in tokens]
    batch = list_str_to_idx(tokens[:3], vocab_map).tolist()  # -1 padding
    vocab_lines = vocab_path.read_text(encoding="utf-8").split("\n")[:-1]
    record = {"f5_commit": F5_COMMIT, "vocab_file": "src/f5_tts/infer/examples/vocab.txt", "vocab_size": size,
              "texts": list(TEXTS), "tokens": tokens, "ids": ids, "batch_of_first_three": batch,
              "vocab": vocab_lines}
    target = OUT / "tokenizer.json"
    target.write_text(json.dumps(record, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {target} ({target.stat().st_size} bytes)")


def _stub_modules(names: dict[str, dict[str, object]]) -> None:
    """Empty stand-ins for imports F5's inference module makes but load_checkpoint never uses
    (plotting, audio editing, ASR pipeline, vocoder download, ODE package)."""
    for name, attributes in names.items():
        module = types.ModuleType(name)
        module.__path__ = []  # lets "import a.b" find a stub "a"
        for attr, value in attributes.items():
            setattr(module, attr, value)
        sys.modules.setdefault(name, module)


def check_export(path: Path) -> None:
    """Load a flowkit export with F5's own ``load_checkpoint`` into its CFM + DiT and
    compare the velocity with the small_v1 parity fixture; record the file's sha256."""

    import torch

    def unused(*args, **kwargs):
        raise RuntimeError("stub: not used by load_checkpoint")

    _stub_modules({
        "matplotlib": {"use": lambda *a, **k: None}, "matplotlib.pylab": {},
        "pydub": {"AudioSegment": unused, "silence": None},
        "transformers": {"pipeline": unused}, "vocos": {"Vocos": unused}, "torchdiffeq": {"odeint": unused},
    })
    sys.modules["matplotlib"].pylab = sys.modules["matplotlib.pylab"]
    from f5_tts.model.backbones.dit import DiT
    from f5_tts.model.cfm import CFM

    sys.modules["f5_tts.model"].CFM = CFM
    from f5_tts.infer import utils_infer

    name, config, kwargs, vocab_size, seed = DIT_CASES[0]
    vocab_map, size = utils_infer.get_tokenizer(str(path.parent / "vocab.txt"), "custom")
    model = CFM(transformer=DiT(**kwargs, text_num_embeds=size, mel_dim=100),
                mel_spec_kwargs=dict(n_fft=1024, hop_length=256, win_length=1024, n_mel_channels=100,
                                     target_sample_rate=24000, mel_spec_type="vocos"), vocab_char_map=vocab_map)
    model = utils_infer.load_checkpoint(model, str(path), "cpu", dtype=torch.float32, use_ema=True).eval()
    data = np.load(OUT / f"dit_{name}.npz")
    t = {k: torch.from_numpy(data[f"in_{k}"]) for k in ("x", "cond", "text", "time", "mask")}
    with torch.no_grad():
        out = model.transformer(x=t["x"], cond=t["cond"], text=t["text"], time=t["time"])
    diff = float((out - torch.from_numpy(data["out_mask0_a0_t0"])).abs().max())
    record = {"f5_commit": F5_COMMIT, "f5_load_checkpoint": "ok", "f5_call":
              "infer.utils_infer.load_checkpoint(CFM(DiT(small_v1)), path, 'cpu', dtype=torch.float32, use_ema=True)",
              "file": "flowkit export-f5 of import-f5 of tests/interop/f5_files.write_f5_safetensors('small_v1')",
              "sha256": hashlib.sha256(path.read_bytes()).hexdigest(), "vocab_size": size,
              "max_abs_velocity_difference": diff}
    (OUT / "export_check.json").write_text(json.dumps(record, indent=2) + "\n")
    print(f"F5's load_checkpoint accepted {path}; velocity max abs difference {diff:.3g}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--f5-src", type=Path, required=True, help="F5-TTS's src/ folder (holds f5_tts/)")
    parser.add_argument("what", choices=["mel", "dit", "tokenizer", "check-export"], nargs="+")
    parser.add_argument("--export", type=Path, help="check-export: the model.safetensors flowkit export-f5 wrote")
    args = parser.parse_args()
    _bypass_package_inits(args.f5_src.resolve())
    OUT.mkdir(parents=True, exist_ok=True)
    for what in args.what:
        if what == "check-export":
            check_export(args.export.resolve())
        else:
            {"mel": write_mel, "dit": write_dit, "tokenizer": write_tokenizer}[what]()


if __name__ == "__main__":
    main()
