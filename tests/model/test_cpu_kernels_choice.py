"""flowkit.model.cpu_kernels.choose_cpu_kernels: the CPU kernels measured at start, fixed by
the environment, or re-used from a resumed run's record, and each kernel in force computes
what its reference computes."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from flowkit.errors import ConfigError
from flowkit.model import cpu_kernels
from flowkit.model.cpu_kernels import (
    _ONEDNN_LINEAR,
    DEFAULT_KERNELS,
    KERNELS,
    MEASURE_MARGIN,
    MEASURE_MIN_WEIGHTS,
    ONEDNN_MIN_ROWS,
    SAMPLING_MEASURE_ROWS,
    SAMPLING_MIN_ROWS,
    GroupedConv1d,
    KernelChoice,
    Linear,
    choose_cpu_kernels,
    current_kernels,
    linear,
    sampling_kernels,
    use_kernels,
)

needs_onednn = pytest.mark.skipif(_ONEDNN_LINEAR is None, reason="oneDNN's linear kernel is x86-64 only")


@pytest.fixture(autouse=True)
def _kernels_restored(monkeypatch):
    """Each test leaves the process's kernels, measurement cache and environment as it found them."""
    before = current_kernels()
    monkeypatch.setattr(cpu_kernels, "_measured", {})
    monkeypatch.setattr(cpu_kernels, "_onednn_min_rows", ONEDNN_MIN_ROWS)
    for name in cpu_kernels.KERNEL_ENV.values():
        monkeypatch.delenv(name, raising=False)
    yield
    use_kernels(**before)


class _Big(nn.Module):
    """Just over `MEASURE_MIN_WEIGHTS` linear weights (two shapes) and one grouped convolution."""

    def __init__(self) -> None:
        super().__init__()
        self.a = Linear(1000, 1000)
        self.b = Linear(1000, 16)
        self.conv = GroupedConv1d(32, 32, 7, padding=3, groups=4)


class _Tiny(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = Linear(64, 64)


def _count_timings(monkeypatch) -> list[list[str]]:
    """Each timing's sorted candidate names, in order; the timings run once (reps 1)."""
    calls: list[list[str]] = []
    real = cpu_kernels._median_ms

    def counted(runs, reps):
        calls.append(sorted(runs))
        return real(runs, 1)

    monkeypatch.setattr(cpu_kernels, "_median_ms", counted)
    return calls


def test_a_large_model_is_measured_once_per_process_and_the_faster_kernel_is_in_force(monkeypatch):
    assert sum(m.in_features * m.out_features for m in _Big().modules() if isinstance(m, Linear)) >= MEASURE_MIN_WEIGHTS
    calls = _count_timings(monkeypatch)
    choice = choose_cpu_kernels(_Big(), rows=64)
    expected = {"grouped_conv"} | ({"linear"} if _ONEDNN_LINEAR is not None else set())
    assert set(choice.ms) == expected
    for family, times in choice.ms.items():
        assert set(times) == set(KERNELS[family]) and all(v > 0 for v in times.values())
        fastest, default = min(times, key=times.get), DEFAULT_KERNELS[family]
        tie = fastest != default and times[fastest] > (1 - MEASURE_MARGIN) * times[default]
        assert choice.kernels[family] == (default if tie else fastest)
        assert choice.how[family].startswith("measured")
    assert current_kernels() == choice.kernels
    measured = len(calls)
    assert measured == (3 if _ONEDNN_LINEAR is not None else 1)  # two linear shapes, one convolution
    again = choose_cpu_kernels(_Big(), rows=64)  # same shapes: the process's cache, no timing
    assert len(calls) == measured and again.kernels == choice.kernels


def test_a_small_model_keeps_the_defaults_unmeasured(monkeypatch):
    monkeypatch.setattr(cpu_kernels, "_median_ms", lambda *a: pytest.fail("a small model is not timed"))
    use_kernels(linear="mkl", grouped_conv="onednn")
    choice = choose_cpu_kernels(_Tiny())
    assert choice.kernels == DEFAULT_KERNELS and current_kernels() == DEFAULT_KERNELS and choice.ms == {}
    assert choice.how["linear"].startswith("default: under")
    assert choice.how["grouped_conv"] == "default: no such layer"
    assert choose_cpu_kernels(_Big(), measure=False).how["linear"] == "default: not measured"


def test_the_environment_fixes_a_kernel_and_a_bad_value_is_one_config_error(monkeypatch):
    monkeypatch.setattr(cpu_kernels, "_median_ms", lambda *a: pytest.fail("a fixed kernel is not timed"))
    monkeypatch.setenv("FLOWKIT_CPU_LINEAR", "mkl")
    monkeypatch.setenv("FLOWKIT_CPU_GROUPED_CONV", "ONEDNN")
    choice = choose_cpu_kernels(_Big())
    assert choice.kernels == {"linear": "mkl", "grouped_conv": "onednn"}
    assert choice.how == {"linear": "FLOWKIT_CPU_LINEAR = mkl", "grouped_conv": "FLOWKIT_CPU_GROUPED_CONV = onednn"}
    monkeypatch.setenv("FLOWKIT_CPU_LINEAR", "blas")
    with pytest.raises(ConfigError, match=r"FLOWKIT_CPU_LINEAR = 'blas' is not known; use auto, mkl or onednn"):
        choose_cpu_kernels(_Big())


def test_a_resumed_run_keeps_its_recorded_kernels_whatever_the_environment_says(monkeypatch):
    monkeypatch.setattr(cpu_kernels, "_median_ms", lambda *a: pytest.fail("a resumed run is not timed"))
    first = KernelChoice({"linear": "mkl", "grouped_conv": "onednn"}, {"linear": "measured", "grouped_conv": "measured"},
                         {"linear": {"mkl": 1.0, "onednn": 1.2}})
    monkeypatch.setenv("FLOWKIT_CPU_LINEAR", "onednn")
    resumed = choose_cpu_kernels(_Big(), resumed=True, recorded=first.record())
    assert resumed.kernels == first.kernels and current_kernels() == first.kernels
    assert resumed.how["linear"] == "recorded; FLOWKIT_CPU_LINEAR = onednn ignored, a resumed run keeps its kernels"
    assert resumed.how["grouped_conv"] == "recorded"
    # a checkpoint from before kernels were chosen trained with the defaults
    old = choose_cpu_kernels(_Big(), resumed=True, recorded=None)
    assert old.kernels == DEFAULT_KERNELS and old.how["grouped_conv"] == "default: the checkpoint records none"


def test_the_line_names_each_kernel_how_it_was_chosen_and_the_times():
    choice = KernelChoice({"linear": "mkl", "grouped_conv": "torch"}, {"linear": "measured", "grouped_conv": "recorded"},
                          {"linear": {"mkl": 1.0, "onednn": 1.123}})
    assert choice.line() == ("cpu kernels: linear=mkl (measured: mkl 1.00 ms, onednn 1.12 ms), "
                             "grouped conv=torch (recorded)")


def test_use_kernels_refuses_an_unknown_kernel():
    with pytest.raises(ValueError, match="linear='cublas' is not known"):
        use_kernels(linear="cublas")


# Equality of each kernel in force with its reference. The oneDNN and MKL products sum the
# same float32 terms in another order (blocking and threads): each output is a sum of k <= 256
# products of O(1) values, whose rounding differs by a few ulps of the sum, so rtol 1e-5 with
# atol 1e-5 (gradients: sums over up to 1,200 rows, atol 1e-4) holds on any x86 CPU, thread
# count and BLAS. The torch and oneDNN grouped convolutions likewise (31-tap sums of 16 channels).


@pytest.mark.parametrize("kernel", ["mkl", pytest.param("onednn", marks=needs_onednn)])
def test_linear_in_force_equals_f_linear_forward_and_backward(kernel):
    torch.manual_seed(0)
    use_kernels(linear=kernel)
    x0, w0, b0 = torch.randn(4, 300, 256), torch.randn(96, 256) / 16, torch.randn(96)
    dy = torch.randn(4, 300, 96)
    results = []
    for fn in (linear, F.linear):
        x, w, b = (t.clone().requires_grad_(True) for t in (x0, w0, b0))
        y = fn(x, w, b)
        y.backward(dy)
        results.append([y.detach(), x.grad, w.grad, b.grad])
    if kernel == "mkl":  # the very same call
        for mine, ref in zip(*results, strict=True):
            assert torch.equal(mine, ref)
    else:
        for (mine, ref), atol in zip(zip(*results, strict=True), (1e-5, 1e-5, 1e-4, 1e-4), strict=True):
            torch.testing.assert_close(mine, ref, rtol=1e-5, atol=atol)


@pytest.mark.parametrize("frames_major", [False, True])
@pytest.mark.parametrize("kernel", ["torch", "onednn", "channels_last"])
def test_grouped_conv_in_force_equals_nn_conv1d_forward_and_backward(kernel, frames_major):
    """Outputs and the input, weight and bias gradients, for a channels-first input and for the
    frames-major view ``h.transpose(1, 2)`` the model passes. The other kernels sum the same
    31 x 4-term float32 products in another order: rtol / atol 1e-4 (measured <= 4e-5 on
    gradients of magnitude ~10)."""
    torch.manual_seed(0)
    use_kernels(grouped_conv=kernel)
    ref = nn.Conv1d(64, 64, 31, padding=15, groups=16)
    conv = GroupedConv1d(64, 64, 31, padding=15, groups=16)
    conv.load_state_dict(ref.state_dict())
    base, dy = torch.randn(2, 64, 120), torch.randn(2, 64, 120)
    results = []
    for module in (conv, ref):
        x = (base.transpose(1, 2).contiguous() if frames_major else base.clone()).requires_grad_(True)
        y = module(x.transpose(1, 2) if frames_major else x)
        y.backward(dy)
        grad = x.grad.transpose(1, 2) if frames_major else x.grad
        results.append([y.detach(), grad, module.weight.grad, module.bias.grad])
    for mine, theirs in zip(*results, strict=True):
        if kernel == "onednn":  # nn.Conv1d's own path
            assert torch.equal(mine, theirs)
        else:
            torch.testing.assert_close(mine, theirs, rtol=1e-4, atol=1e-4)
    with torch.no_grad():  # the sampler's forward: channels-last where in force, else nn.Conv1d's
        sampled, plain = conv.forward_without_grad(base.transpose(1, 2).contiguous().transpose(1, 2)), ref(base)
    if kernel == "channels_last":
        torch.testing.assert_close(sampled, plain, rtol=1e-5, atol=1e-5)
    else:
        assert torch.equal(sampled, plain)


@pytest.mark.parametrize(("onednn_ms", "torch_ms", "channels_last_ms", "expected"), [
    (8.0, 10.0, 12.0, "onednn"),         # 20 % less time: the measured kernel replaces the default
    (9.5, 10.0, 12.0, "torch"),          # 5 % less: a tie, the default stays (the load could decide it)
    (12.0, 10.0, 12.0, "torch"),         # the default is faster
    (8.0, 10.0, 4.0, "channels_last"),   # the fastest of the three wins
    (12.0, 10.0, 9.5, "torch"),          # a tie with the default again
])
def test_a_measured_kernel_replaces_the_default_only_beyond_the_margin(
    monkeypatch, onednn_ms, torch_ms, channels_last_ms, expected,
):
    assert DEFAULT_KERNELS["grouped_conv"] == "torch"
    conv_ms = {"onednn": onednn_ms, "torch": torch_ms, "channels_last": channels_last_ms}
    monkeypatch.setattr(cpu_kernels, "_median_ms", lambda runs, reps: conv_ms
                        if set(runs) == set(KERNELS["grouped_conv"]) else dict.fromkeys(runs, 1.0))
    choice = choose_cpu_kernels(_Big(), rows=64)
    assert choice.kernels["grouped_conv"] == expected
    assert ("kept" in choice.how["grouped_conv"]) == (expected == "torch" and min(conv_ms.values()) < torch_ms)


def test_sampling_times_forward_passes_and_restores_the_training_kernels(monkeypatch):
    """Inside: the forward-only measurement's faster linear kernel, oneDNN from SAMPLING_MIN_ROWS
    rows, and the faster of the sampler's two convolution forwards (channels-first oneDNN,
    channels-last oneDNN); after, the training kernels and threshold, also when the body raises
    (a probe inside a training run must not change the run's bits)."""
    timed = _count_timings(monkeypatch)
    use_kernels(linear="onednn", grouped_conv="torch")
    with pytest.raises(RuntimeError, match="inside"), sampling_kernels(_Big(), reps=1) as choice:
        ms = choice.ms.get("linear", {})
        won = choice.kernels["linear"] == "onednn" and bool(ms) and ms["onednn"] <= (1 - MEASURE_MARGIN) * ms["mkl"]
        assert cpu_kernels._onednn_min_rows == choice.onednn_min_rows == (SAMPLING_MIN_ROWS if won else ONEDNN_MIN_ROWS)
        assert set(choice.kernels) == {"linear", "grouped_conv"}
        assert choice.kernels["grouped_conv"] in ("onednn", "channels_last")
        assert set(choice.ms["grouped_conv"]) == {"onednn", "channels_last"}  # torch's forward is not a candidate
        assert ["channels_last", "onednn"] in timed  # the one convolution shape, forward only
        if _ONEDNN_LINEAR is not None:
            assert choice.how["linear"].startswith("measured") and set(choice.ms["linear"]) == {"mkl", "onednn"}
            assert timed.count(["mkl", "onednn"]) == 2  # the two linear shapes
        assert all(key[2] == SAMPLING_MEASURE_ROWS and key[-1] is False for key in cpu_kernels._measured)
        assert current_kernels() == choice.kernels
        raise RuntimeError("inside")
    assert current_kernels() == {"linear": "onednn", "grouped_conv": "torch"}
    assert cpu_kernels._onednn_min_rows == ONEDNN_MIN_ROWS


def test_a_recorded_sampling_kernel_is_used_unmeasured_and_an_unknown_one_refused(monkeypatch):
    monkeypatch.setattr(cpu_kernels, "_median_ms", lambda *a: pytest.fail("a recorded kernel is not timed"))
    monkeypatch.setenv("FLOWKIT_CPU_LINEAR", "onednn")  # a recorded choice wins over the environment
    with sampling_kernels(_Big(), recorded={"linear": "mkl"}) as choice:  # an eval.json of before the conv choice
        assert choice.kernels == {"linear": "mkl", "grouped_conv": "onednn"}
        assert choice.how == {"linear": "recorded", "grouped_conv": "recorded"}
        assert choice.onednn_min_rows == ONEDNN_MIN_ROWS  # a record without rows: training's
        assert current_kernels() == {"linear": "mkl", "grouped_conv": "onednn"}
    with sampling_kernels(_Big(), recorded={"linear": "mkl", "grouped_conv": "channels_last"}):
        assert current_kernels()["grouped_conv"] == "channels_last"
    monkeypatch.setenv("FLOWKIT_CPU_GROUPED_CONV", "channels_last")
    with sampling_kernels(_Big()) as choice:  # no record: the environment fixes it
        assert choice.kernels == {"linear": "onednn", "grouped_conv": "channels_last"}
        assert choice.how["linear"] == "FLOWKIT_CPU_LINEAR = onednn"
    with pytest.raises(ValueError, match="linear='blas' is not known"), sampling_kernels(_Big(), recorded={"linear": "blas"}):
        pass
    assert cpu_kernels._onednn_min_rows == ONEDNN_MIN_ROWS


@needs_onednn
def test_a_sampling_product_between_the_thresholds_takes_onednn_and_equals_f_linear():
    """200 rows: F.linear in training, oneDNN inside sampling_kernels with oneDNN in force;
    equal to F.linear to rtol 1e-5 / atol 1e-5 (the same 256-term float32 sums in another
    order, as the equality tests above)."""
    torch.manual_seed(1)
    x, w, b = torch.randn(200, 256), torch.randn(96, 256) / 16, torch.randn(96)
    use_kernels(linear="onednn")
    assert SAMPLING_MIN_ROWS <= 200 < ONEDNN_MIN_ROWS
    calls = []
    real = cpu_kernels._onednn_mm
    with torch.no_grad():
        cpu_kernels._onednn_mm = lambda *a: calls.append(1) or real(*a)
        try:
            trained = linear(x, w, b)
            with sampling_kernels(_Big(), recorded={"linear": "onednn", "onednn_min_rows": SAMPLING_MIN_ROWS}):
                sampled = linear(x, w, b)
        finally:
            cpu_kernels._onednn_mm = real
    assert len(calls) == 1  # only the product inside
    assert torch.equal(trained, F.linear(x, w, b))
    torch.testing.assert_close(sampled, F.linear(x, w, b), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("onednn_ms", "rows"), [(8.0, SAMPLING_MIN_ROWS), (9.5, ONEDNN_MIN_ROWS)])
def test_sampling_lowers_the_onednn_threshold_only_where_onednn_wins_beyond_the_margin(monkeypatch, onednn_ms, rows):
    """A tie keeps oneDNN in force (the default) but leaves products under ONEDNN_MIN_ROWS on
    MKL, as in training: measured on a Zen 3 EPYC, a tie moved batch 1's products to oneDNN
    and made its sampling 9 % slower."""
    monkeypatch.setattr(cpu_kernels, "_median_ms", lambda runs, reps: {"mkl": 10.0, "onednn": onednn_ms}
                        if "mkl" in runs else dict.fromkeys(runs, 1.0))
    monkeypatch.setattr(cpu_kernels, "_ONEDNN_LINEAR", cpu_kernels._ONEDNN_LINEAR or object())
    with sampling_kernels(_Big()) as choice:
        assert choice.kernels == {"linear": "onednn", "grouped_conv": "onednn"} and cpu_kernels._onednn_min_rows == rows == choice.onednn_min_rows
        assert ("oneDNN from" in choice.line()) and str(rows) in choice.line()
