"""Shared fixtures: the bundled demo clips, the full real corpus (skipped when absent), a clean gin state."""

from __future__ import annotations

import os
from pathlib import Path

# pytest -n 2 runs two workers on two cores: one thread each (and in the subprocesses they
# start) avoids oversubscription, which made a tiny forward+backward 100x slower here.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
# The CPU kernels a run measures at start (flowkit.converters.cpu) could differ between the
# test processes that a bit-identity test compares (an uninterrupted run in one, a killed and
# resumed one in another): the suite trains on the defaults; the choice's own tests unset these.
os.environ.setdefault("FLOWKIT_CPU_LINEAR", "onednn")
os.environ.setdefault("FLOWKIT_CPU_GROUPED_CONV", "torch")

import pytest

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "data" / "asterisk-5voice"


@pytest.fixture
def corpus_dir() -> Path:
    """The full asterisk-5voice corpus next to the clone; skipped for a clone without it."""
    if not (CORPUS / "metadata.csv").is_file():
        pytest.skip(f"full corpus not found at {CORPUS} (only the bundled demo ships with the repo)")
    return CORPUS


@pytest.fixture
def demo_clips() -> Path:
    """The bundled real recordings (flowkit/demo/clips: metadata.csv + wavs/*.flac, 150 clips,
    4 speakers, 5 languages): present in every clone, never skipped."""
    from flowkit.data.demo import demo_clips_path

    return demo_clips_path()


@pytest.fixture
def hide_package(monkeypatch):
    """``hide_package("wandb", ...)``: from then on (in this test) importing any module of
    those packages raises ImportError, as on a machine without them."""
    import builtins

    real_import = builtins.__import__

    def hide(*packages: str) -> None:
        def guarded(name, *args, **kwargs):
            if any(name == p or name.startswith(p + ".") for p in packages):
                raise ImportError(f"No module named {name!r}")
            return real_import(name, *args, **kwargs)

        monkeypatch.setattr(builtins, "__import__", guarded)

    return hide


@pytest.fixture
def interrupt_after(monkeypatch):
    """``interrupt_after(module, n)``: ``module._append`` (the one function that writes a
    finished result line) raises KeyboardInterrupt right after its ``n``-th line is written,
    once; later calls (the continued run) write as usual. A kill at a known point, injected
    from the test rather than by a parameter of the product code."""

    def arm(module, n: int) -> None:
        real = module._append
        written = [0]

        def append(*args, **kwargs):
            real(*args, **kwargs)
            written[0] += 1
            if written[0] == n:
                raise KeyboardInterrupt

        monkeypatch.setattr(module, "_append", append)

    return arm


@pytest.fixture
def generated_utterances(monkeypatch) -> list:
    """The utterances `flowkit.synth.inference.generate` is given during the test, in order
    (it still generates)."""
    from flowkit.synth import inference

    seen: list = []
    real = inference.generate

    def spy(im, utterances, **kwargs):
        seen.extend(utterances)
        return real(im, utterances, **kwargs)

    monkeypatch.setattr(inference, "generate", spy)
    return seen


@pytest.fixture(autouse=True)
def _clean_gin():
    """gin is global state: each test starts and ends with an empty config."""
    import gin

    gin.clear_config()
    yield
    gin.clear_config()
