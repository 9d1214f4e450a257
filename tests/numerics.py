"""How the numerical fixture tests compare float32 results with a reference, on any x86 CPU.

The reference fixtures (F5-TTS's MelSpec, F5-TTS's DiT velocity, Vocos audio) were written
once on one machine. The same float32 arithmetic on another CPU vendor, ISA path
(``ATEN_CPU_CAPABILITY``, ``MKL_ENABLE_INSTRUCTIONS``), thread count or BLAS rounds
differently, so every bar here is set from what float32 rounding can do, with the figures
``tools/isa_check.py`` measured beside it; a wrong window, basis, normalisation or weight
mapping moves the same numbers by 1e-2 to 1, far above each bar.

Log-mel features. A log value near the floor ``log(1e-5) = -11.51`` is the log of a
magnitude of ~1e-5 that rounding moves by tens of per cent (measured on an Intel Xeon:
0.44 in log units in mel bins 98-99 of a 16 kHz clip resampled to 24 kHz, where the AMD EPYC
that wrote the fixture gave < 1e-4). So log-mels are compared where they mean something:

- ``LINEAR_PEAK_RELATIVE``: in the linear (magnitude) domain, ``|exp(a) - exp(b)|`` divided by
  the frame's peak magnitude. float32 STFT + mel rounding is ~1e-7 per operation on a sum
  of ~1000 terms; measured 1.0e-6-6.6e-6 on an Intel Xeon at every ISA setting; bar 5e-5.
- ``LOG_NEAR_PEAK``: in the log domain for bins within ``NEAR_PEAK_DB`` (40 dB, i.e. at
  least 1 % of the frame's peak magnitude): the linear bar divided by 0.01 bounds the log
  error there by 5e-3; measured <= 5.6e-5.
"""

from __future__ import annotations

import numpy as np

LOG_FLOOR = float(np.log(1e-5))
LINEAR_PEAK_RELATIVE = 5e-5
NEAR_PEAK_DB = 40.0
LOG_NEAR_PEAK = 5e-3


def log_mel_differences(got: np.ndarray, expected: np.ndarray) -> dict[str, float]:
    """``got``, ``expected``: log-magnitude mels ``[frames, bins]`` -> the two measures above.

    Returns ``{"linear_peak_relative": ..., "log_near_peak": ..., "log_max_abs": ...}`` (the
    last one only for printing: it is what a near-floor bin does and is not a bar).
    """
    got = np.asarray(got, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    if got.shape != expected.shape:
        raise ValueError(f"shapes differ: {got.shape} vs {expected.shape}")
    peak = np.exp(expected).max(axis=-1, keepdims=True)
    linear = np.abs(np.exp(got) - np.exp(expected)) / peak
    near = expected >= np.log(peak) - NEAR_PEAK_DB / 20.0 * np.log(10.0)
    log_abs = np.abs(got - expected)
    return {
        "linear_peak_relative": float(linear.max()),
        "log_near_peak": float(log_abs[near].max()),
        "log_max_abs": float(log_abs.max()),
    }


def assert_log_mel_close(got: np.ndarray, expected: np.ndarray, label: str) -> dict[str, float]:
    """Assert both bars of the module docstring; returns the measures."""
    d = log_mel_differences(got, expected)
    assert d["linear_peak_relative"] <= LINEAR_PEAK_RELATIVE, f"{label}: {d}"
    assert d["log_near_peak"] <= LOG_NEAR_PEAK, f"{label}: {d}"
    return d


# F5-TTS DiT velocity (outputs of magnitude ~0.5 rms, up to ~2): float32 through 4-22 blocks.
# Measured 1.1e-6-1.9e-6 (small, 4 blocks) on an Intel Xeon under ATEN_CPU_CAPABILITY
# default / avx2 / avx512 and 1 or 2 threads; the bar is 50x that and 1e-4 of the output's
# range. A wrong weight mapping or attention mask gives > 1e-1.
VELOCITY_MAX_ABS = 1e-4

# Vocos decode (audio in [-1, 1]) through ConvNeXt blocks and an inverse STFT in float32:
# the same bar as the velocity; measured by tools/isa_check.py under each setting.
VOCOS_AUDIO_MAX_ABS = 1e-4
