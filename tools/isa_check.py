"""Measure the numerical fixtures under several CPU code paths and thread counts.

The reference fixtures were written on one CPU; a test that compares against them must hold
on any x86 CPU. This tool runs the same three comparisons - flowkit's ``encoder.vocos_mel``
against F5-TTS's MelSpec, flowkit's F5 arch against F5-TTS's DiT velocity (small sizes),
flowkit's Vocos against the reference Vocos decode - in a fresh process per setting and
prints what each measure gives against the bar that the tests use (``tests/numerics.py``).

Settings (each in its own process, since ATen and MKL read them at start):
  native-2t   the machine's own best ATen kernels, 2 threads
  native-1t   the same, 1 thread
  default-1t  ATEN_CPU_CAPABILITY=default: ATen's portable (non-vectorised-ISA) kernels
  avx2-2t     ATEN_CPU_CAPABILITY=avx2
  mkl-avx2    MKL_ENABLE_INSTRUCTIONS=AVX2 (MKL's AVX2 code path instead of AVX-512)

    python tools/isa_check.py                  # every setting, a table
    python tools/isa_check.py --json native-2t # one setting's measures as JSON (used by tests)

Exit 1 when any measure is above its bar.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TESTS = REPO / "tests"

SETTINGS: dict[str, dict[str, str]] = {
    "native-2t": {"OMP_NUM_THREADS": "2"},
    "native-1t": {"OMP_NUM_THREADS": "1"},
    "default-1t": {"OMP_NUM_THREADS": "1", "ATEN_CPU_CAPABILITY": "default"},
    "avx2-2t": {"OMP_NUM_THREADS": "2", "ATEN_CPU_CAPABILITY": "avx2"},
    "mkl-avx2": {"OMP_NUM_THREADS": "2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"},
}


def measure() -> dict[str, float | str]:
    """This process's measures: the worst case over each fixture's items."""
    for p in (TESTS, TESTS / "interop", TESTS / "synth"):
        sys.path.insert(0, str(p))
    import numpy as np
    import torch
    from numerics import log_mel_differences

    from flowkit.data.encoders import VocosMel

    out: dict[str, float | str] = {
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "threads": torch.get_num_threads(),
    }
    # 1. log-mel against F5-TTS's MelSpec (six real clips)
    data = np.load(TESTS / "fixtures" / "f5" / "vocos_mel.npz")
    meta = json.loads(str(data["meta"]))
    worst = {"linear_peak_relative": 0.0, "log_near_peak": 0.0, "log_max_abs": 0.0}
    for i in range(len(meta["clips"])):
        d = log_mel_differences(VocosMel().encode(data[f"wave_{i}"]), data[f"mel_{i}"])
        worst = {k: max(worst[k], d[k]) for k in worst}
    out.update({f"mel_{k}": v for k, v in worst.items()})

    # 2. F5-TTS DiT velocity, small sizes, every drop combination, padded and not
    import importlib.util

    spec = importlib.util.spec_from_file_location("f5_parity", TESTS / "interop" / "test_f5_parity.py")
    parity = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(parity)
    velocity = 0.0
    for name in ("small_v1", "small_base"):
        data, model = parity._build(name)
        f5 = parity.F5Velocity(model).eval()
        x, cond, text = (torch.from_numpy(data[f"in_{k}"]) for k in ("x", "cond", "text"))
        time, mask = torch.from_numpy(data["in_time"]), torch.from_numpy(data["in_mask"])
        with torch.no_grad():
            for masked in (0, 1):
                for a, t in ((0, 0), (1, 0), (0, 1), (1, 1)):
                    got = f5(x, cond, text, time, mask=mask if masked else None,
                             drop_audio_cond=bool(a), drop_text=bool(t))
                    keep = mask if masked else torch.ones_like(mask)
                    diff = (got - torch.from_numpy(data[f"out_mask{masked}_a{a}_t{t}"])).abs()[keep]
                    velocity = max(velocity, float(diff.max()))
    out["velocity_max_abs"] = velocity

    # 3. Vocos decode against the reference's audio (the published config, random weights)
    import tempfile

    from vocos_helpers import fixture, write_release

    from flowkit.synth.vocos import load_vocos

    with tempfile.TemporaryDirectory() as tmp:
        loaded = load_vocos(write_release(Path(tmp) / "vocos"))
    fx = fixture("published")
    lengths = [int(v) for v in fx["lengths"]]
    with torch.no_grad():
        audio = loaded.net.decode(torch.from_numpy(fx["features"]), lengths).numpy()
    ends = np.cumsum(fx["audio_lengths"])
    vocos = 0.0
    for i, want in enumerate(np.split(fx["audio"], ends[:-1])):
        vocos = max(vocos, float(np.abs(audio[i, : len(want)] - want).max()))
    out["vocos_max_abs"] = vocos
    return out


def bars() -> dict[str, float]:
    sys.path.insert(0, str(TESTS))
    import numerics

    return {
        "mel_linear_peak_relative": numerics.LINEAR_PEAK_RELATIVE,
        "mel_log_near_peak": numerics.LOG_NEAR_PEAK,
        "velocity_max_abs": numerics.VELOCITY_MAX_ABS,
        "vocos_max_abs": numerics.VOCOS_AUDIO_MAX_ABS,
    }


def run_setting(name: str) -> dict[str, float | str]:
    """Measures of one setting, in a fresh process with the setting's environment."""
    env = {**os.environ, **SETTINGS[name]}
    for key in ("ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS"):
        if key not in SETTINGS[name]:
            env.pop(key, None)
    proc = subprocess.run([sys.executable, __file__, "--json", name], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise SystemExit(f"isa_check: setting {name} failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", metavar="SETTING", choices=sorted(SETTINGS), help="measure in this process, print JSON")
    ap.add_argument("settings", nargs="*", help=f"settings to run (default: all of {', '.join(SETTINGS)})")
    args = ap.parse_args()
    if args.json:
        print(json.dumps(measure()))
        return 0
    names = args.settings or list(SETTINGS)
    limits = bars()
    failed = False
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), "unknown CPU")
    print(f"CPU: {cpu}; load average {os.getloadavg()[0]:.2f}")
    print(f"{'setting':<11} {'ATen':<8} thr " + " ".join(f"{k:>25}" for k in limits) + f" {'mel_log_max_abs':>16}")
    for name in names:
        m = run_setting(name)
        cells = []
        for k, bar in limits.items():
            ok = float(m[k]) <= bar
            failed |= not ok
            cells.append(f"{float(m[k]):>10.2e} / {bar:.0e} {'ok ' if ok else 'BAD'}")
        print(f"{name:<11} {m['cpu_capability']:<8} {m['threads']:>3} " + " ".join(f"{c:>25}" for c in cells)
              + f" {float(m['mel_log_max_abs']):>16.3g}")
    print("(mel_log_max_abs is the absolute log difference at the floor: shown, not a bar)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
