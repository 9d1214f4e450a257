"""flowkit.converters.cpu: the CPU kernels measured at start, fixed by the environment, or
re-used from a resumed run's record; the converter puts them in force layer by layer, and each
kernel computes what its reference computes."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from flowkit.converters import cpu
from flowkit.converters import cpu_kernels as layers
from flowkit.converters.cpu import (
    DEFAULT_KERNELS,
    KERNELS,
    MEASURE_MARGIN,
    MEASURE_MIN_WEIGHTS,
    ONEDNN_MIN_ROWS,
    SAMPLING_MEASURE_ROWS,
    SAMPLING_MIN_ROWS,
    KernelChoice,
    choose_cpu_kernels,
    convert_cpu_kernels,
    converted_kernels,
    sampling_kernels,
)
from flowkit.converters.cpu_kernels import CpuGroupedConv1d, CpuLinear, onednn_linear_kernel
from flowkit.errors import ConfigError

needs_onednn = pytest.mark.skipif(onednn_linear_kernel() is None, reason="oneDNN's linear kernel is x86-64 only")


@pytest.fixture(autouse=True)
def _fresh_measurements(monkeypatch):
    """Each test starts with an empty measurement memo and no kernel fixed by the environment."""
    monkeypatch.setattr(cpu, "_measured", {})
    for name in cpu.KERNEL_ENV.values():
        monkeypatch.delenv(name, raising=False)


class _Big(nn.Module):
    """Just over `MEASURE_MIN_WEIGHTS` linear weights (two shapes) and one grouped convolution."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(1000, 1000)
        self.b = nn.Linear(1000, 16)
        self.conv = nn.Conv1d(32, 32, 7, padding=3, groups=4)


class _Tiny(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(64, 64)


def _count_timings(monkeypatch) -> list[list[str]]:
    """Each timing's sorted candidate names, in order; the timings run once (reps 1)."""
    calls: list[list[str]] = []
    real = cpu._median_ms

    def counted(runs, reps):
        calls.append(sorted(runs))
        return real(runs, 1)

    monkeypatch.setattr(cpu, "_median_ms", counted)
    return calls


def test_a_large_model_is_measured_once_per_process_and_the_converter_puts_the_faster_kernel_in_force(monkeypatch):
    assert sum(m.in_features * m.out_features for m in _Big().modules()
               if isinstance(m, nn.Linear)) >= MEASURE_MIN_WEIGHTS
    calls = _count_timings(monkeypatch)
    model = _Big()
    choice = choose_cpu_kernels(model, rows=64)
    assert converted_kernels(model) == {}  # choosing changes nothing
    expected = {"grouped_conv"} | ({"linear"} if onednn_linear_kernel() is not None else set())
    assert set(choice.ms) == expected
    for family, times in choice.ms.items():
        assert set(times) == set(KERNELS[family]) and all(v > 0 for v in times.values())
        fastest, default = min(times, key=times.get), DEFAULT_KERNELS[family]
        tie = fastest != default and times[fastest] > (1 - MEASURE_MARGIN) * times[default]
        assert choice.kernels[family] == (default if tie else fastest)
        assert choice.how[family].startswith("measured")
    convert_cpu_kernels(model, choice.kernels)
    assert converted_kernels(model) == choice.kernels
    assert type(model.a) is CpuLinear and type(model.conv) is CpuGroupedConv1d
    measured = len(calls)
    assert measured == (3 if onednn_linear_kernel() is not None else 1)  # two linear shapes, one convolution
    again = choose_cpu_kernels(_Big(), rows=64)  # same shapes: the process's cache, no timing
    assert len(calls) == measured and again.kernels == choice.kernels


def test_a_small_model_keeps_the_defaults_unmeasured(monkeypatch):
    monkeypatch.setattr(cpu, "_median_ms", lambda *a: pytest.fail("a small model is not timed"))
    choice = choose_cpu_kernels(_Tiny())
    assert choice.kernels == DEFAULT_KERNELS and choice.ms == {}
    assert choice.how["linear"].startswith("default: under")
    assert choice.how["grouped_conv"] == "default: no such layer"
    assert choose_cpu_kernels(_Big(), measure=False).how["linear"] == "default: not measured"


def test_the_environment_fixes_a_kernel_and_a_bad_value_is_one_config_error(monkeypatch):
    monkeypatch.setattr(cpu, "_median_ms", lambda *a: pytest.fail("a fixed kernel is not timed"))
    monkeypatch.setenv("FLOWKIT_CPU_LINEAR", "mkl")
    monkeypatch.setenv("FLOWKIT_CPU_GROUPED_CONV", "ONEDNN")
    choice = choose_cpu_kernels(_Big())
    assert choice.kernels == {"linear": "mkl", "grouped_conv": "onednn"}
    assert choice.how == {"linear": "FLOWKIT_CPU_LINEAR = mkl", "grouped_conv": "FLOWKIT_CPU_GROUPED_CONV = onednn"}
    monkeypatch.setenv("FLOWKIT_CPU_LINEAR", "blas")
    with pytest.raises(ConfigError, match=r"FLOWKIT_CPU_LINEAR = 'blas' is not known; use auto, mkl or onednn"):
        choose_cpu_kernels(_Big())


def test_a_resumed_run_keeps_its_recorded_kernels_whatever_the_environment_says(monkeypatch):
    monkeypatch.setattr(cpu, "_median_ms", lambda *a: pytest.fail("a resumed run is not timed"))
    first = KernelChoice({"linear": "mkl", "grouped_conv": "onednn"},
                         {"linear": "measured", "grouped_conv": "measured"},
                         {"linear": {"mkl": 1.0, "onednn": 1.2}})
    monkeypatch.setenv("FLOWKIT_CPU_LINEAR", "onednn")
    resumed = choose_cpu_kernels(_Big(), resumed=True, recorded=first.record())
    assert resumed.kernels == first.kernels
    assert resumed.how["linear"] == "recorded; FLOWKIT_CPU_LINEAR = onednn ignored, a resumed run keeps its kernels"
    assert resumed.how["grouped_conv"] == "recorded"
    # a checkpoint from before kernels were chosen trained with the defaults
    old = choose_cpu_kernels(_Big(), resumed=True, recorded=None)
    assert old.kernels == DEFAULT_KERNELS and old.how["grouped_conv"] == "default: the checkpoint records none"


def test_the_line_names_each_kernel_how_it_was_chosen_and_the_times():
    choice = KernelChoice({"linear": "mkl", "grouped_conv": "torch"},
                          {"linear": "measured", "grouped_conv": "recorded"},
                          {"linear": {"mkl": 1.0, "onednn": 1.123}})
    assert choice.line() == ("cpu kernels: linear=mkl (measured: mkl 1.00 ms, onednn 1.12 ms), "
                             "grouped conv=torch (recorded)")


def test_the_converter_refuses_an_unknown_kernel():
    with pytest.raises(ValueError, match="linear='cublas' is not known"):
        convert_cpu_kernels(_Tiny(), {"linear": "cublas"})


# Equality of each kernel in force with its reference. The oneDNN and MKL products sum the
# same float32 terms in another order (blocking and threads): each output is a sum of k <= 256
# products of O(1) values, whose rounding differs by a few ulps of the sum, so rtol 1e-5 with
# atol 1e-5 (gradients: sums over up to 1,200 rows, atol 1e-4) holds on any x86 CPU, thread
# count and BLAS. The torch and oneDNN grouped convolutions likewise (31-tap sums of 16 channels).


@pytest.mark.parametrize("kernel", ["mkl", pytest.param("onednn", marks=needs_onednn)])
def test_linear_in_force_equals_f_linear_forward_and_backward(kernel):
    torch.manual_seed(0)
    x0, w0, b0 = torch.randn(4, 300, 256), torch.randn(96, 256) / 16, torch.randn(96)
    dy = torch.randn(4, 300, 96)
    lin = convert_cpu_kernels(nn.Linear(256, 96), {"linear": kernel})
    results = []
    for fn in (lambda x, w, b: torch.func.functional_call(lin, {"weight": w, "bias": b}, (x,)), F.linear):
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
    ref = nn.Conv1d(64, 64, 31, padding=15, groups=16)
    conv = nn.Conv1d(64, 64, 31, padding=15, groups=16)
    conv.load_state_dict(ref.state_dict())
    convert_cpu_kernels(conv, {"grouped_conv": kernel})
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
    with torch.no_grad():  # the forward without gradients: channels-last where in force, else nn.Conv1d's
        sampled, plain = conv(base.transpose(1, 2).contiguous().transpose(1, 2)), ref(base)
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
    monkeypatch.setattr(cpu, "_median_ms", lambda runs, reps: conv_ms
                        if set(runs) == set(KERNELS["grouped_conv"]) else dict.fromkeys(runs, 1.0))
    choice = choose_cpu_kernels(_Big(), rows=64)
    assert choice.kernels["grouped_conv"] == expected
    assert ("kept" in choice.how["grouped_conv"]) == (expected == "torch" and min(conv_ms.values()) < torch_ms)


def _layer_kernels(model: nn.Module) -> dict[str, object]:
    """What the sampler's forward passes run: the linear kernel and threshold, the convolutions'
    kernel without gradients (None where a layer is plain)."""
    lin, conv = model.a, model.conv
    return {"linear": getattr(lin, "kernel", None), "rows": getattr(lin, "onednn_min_rows", None),
            "grouped_conv": getattr(conv, "inference_kernel", None)}


def test_sampling_times_forward_passes_and_restores_the_training_kernels(monkeypatch):
    """Inside: the forward-only measurement's faster linear kernel, oneDNN from SAMPLING_MIN_ROWS
    rows, and the faster of the sampler's two convolution forwards (channels-first oneDNN,
    channels-last oneDNN); after, the training kernels and threshold, also when the body raises
    (a probe inside a training run must not change the run's bits)."""
    timed = _count_timings(monkeypatch)
    model = convert_cpu_kernels(_Big(), {"linear": "onednn", "grouped_conv": "torch"})
    before = _layer_kernels(model)
    with pytest.raises(RuntimeError, match="inside"), sampling_kernels(model, reps=1) as choice:
        ms = choice.ms.get("linear", {})
        won = choice.kernels["linear"] == "onednn" and bool(ms) and ms["onednn"] <= (1 - MEASURE_MARGIN) * ms["mkl"]
        assert choice.onednn_min_rows == (SAMPLING_MIN_ROWS if won else ONEDNN_MIN_ROWS)
        assert set(choice.kernels) == {"linear", "grouped_conv"}
        assert choice.kernels["grouped_conv"] in ("onednn", "channels_last")
        assert set(choice.ms["grouped_conv"]) == {"onednn", "channels_last"}  # torch's forward is not a candidate
        assert ["channels_last", "onednn"] in timed  # the one convolution shape, forward only
        if onednn_linear_kernel() is not None:
            assert choice.how["linear"].startswith("measured") and set(choice.ms["linear"]) == {"mkl", "onednn"}
            assert timed.count(["mkl", "onednn"]) == 2  # the two linear shapes
        assert all(key[2] == SAMPLING_MEASURE_ROWS and key[-1] is False for key in cpu._measured)
        assert _layer_kernels(model) == {"linear": choice.kernels["linear"], "rows": choice.onednn_min_rows,
                                         "grouped_conv": choice.kernels["grouped_conv"]}
        assert model.conv.kernel == "torch"  # the training kernel, untouched
        raise RuntimeError("inside")
    assert _layer_kernels(model) == before == {"linear": "onednn", "rows": ONEDNN_MIN_ROWS, "grouped_conv": "onednn"}


def test_sampling_converts_a_plain_model_and_leaves_it_plain(monkeypatch):
    monkeypatch.setattr(cpu, "_median_ms", lambda *a: pytest.fail("a recorded kernel is not timed"))
    model = _Big()
    with sampling_kernels(model, recorded={"linear": "mkl", "grouped_conv": "channels_last"}):
        assert type(model.a) is CpuLinear and type(model.conv) is CpuGroupedConv1d
        assert _layer_kernels(model)["grouped_conv"] == "channels_last"
    assert type(model.a) is nn.Linear and type(model.conv) is nn.Conv1d
    assert not any(k in vars(model.a) or k in vars(model.conv)
                   for k in ("kernel", "onednn_min_rows", "inference_kernel"))


def test_a_recorded_sampling_kernel_is_used_unmeasured_and_an_unknown_one_refused(monkeypatch):
    monkeypatch.setattr(cpu, "_median_ms", lambda *a: pytest.fail("a recorded kernel is not timed"))
    monkeypatch.setenv("FLOWKIT_CPU_LINEAR", "onednn")  # a recorded choice wins over the environment
    model = _Big()
    with sampling_kernels(model, recorded={"linear": "mkl"}) as choice:  # a record without the conv's kernel
        assert choice.kernels == {"linear": "mkl", "grouped_conv": "onednn"}
        assert choice.how == {"linear": "recorded", "grouped_conv": "recorded"}
        assert choice.onednn_min_rows == ONEDNN_MIN_ROWS  # a record without rows: training's
        assert _layer_kernels(model) == {"linear": "mkl", "rows": ONEDNN_MIN_ROWS, "grouped_conv": "onednn"}
    with sampling_kernels(model, recorded={"linear": "mkl", "grouped_conv": "channels_last"}):
        assert _layer_kernels(model)["grouped_conv"] == "channels_last"
    monkeypatch.setenv("FLOWKIT_CPU_GROUPED_CONV", "channels_last")
    with sampling_kernels(model) as choice:  # no record: the environment fixes it
        assert choice.kernels == {"linear": "onednn", "grouped_conv": "channels_last"}
        assert choice.how["linear"] == "FLOWKIT_CPU_LINEAR = onednn"
    with (pytest.raises(ValueError, match="linear='blas' is not known"),
          sampling_kernels(model, recorded={"linear": "blas"})):
        pass
    assert _layer_kernels(model) == {"linear": None, "rows": None, "grouped_conv": None}


@needs_onednn
def test_a_sampling_product_between_the_thresholds_takes_onednn_and_equals_f_linear(monkeypatch):
    """200 rows: F.linear in training, oneDNN inside sampling_kernels with oneDNN in force;
    equal to F.linear to rtol 1e-5 / atol 1e-5 (the same 256-term float32 sums in another
    order, as the equality tests above)."""
    torch.manual_seed(1)
    x = torch.randn(200, 256)
    lin = convert_cpu_kernels(nn.Linear(256, 96), {"linear": "onednn"})
    assert SAMPLING_MIN_ROWS <= 200 < ONEDNN_MIN_ROWS
    calls = []
    real = layers.onednn_mm
    monkeypatch.setattr(layers, "onednn_mm", lambda *a: calls.append(1) or real(*a))
    with torch.no_grad():
        trained = lin(x)
        with sampling_kernels(lin, recorded={"linear": "onednn", "onednn_min_rows": SAMPLING_MIN_ROWS}):
            sampled = lin(x)
    assert len(calls) == 1  # only the product inside
    reference = F.linear(x, lin.weight, lin.bias)
    assert torch.equal(trained, reference)
    torch.testing.assert_close(sampled, reference, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("onednn_ms", "rows"), [(8.0, SAMPLING_MIN_ROWS), (9.5, ONEDNN_MIN_ROWS)])
def test_sampling_lowers_the_onednn_threshold_only_where_onednn_wins_beyond_the_margin(monkeypatch, onednn_ms, rows):
    """A tie keeps oneDNN in force (the default) but leaves products under ONEDNN_MIN_ROWS on
    MKL, as in training (docs/performance.md: a tie that moved batch 1's products to oneDNN
    made sampling slower)."""
    monkeypatch.setattr(cpu, "_median_ms", lambda runs, reps: {"mkl": 10.0, "onednn": onednn_ms}
                        if "mkl" in runs else dict.fromkeys(runs, 1.0))
    monkeypatch.setattr(cpu, "onednn_linear_kernel", lambda: onednn_linear_kernel() or object())
    model = _Big()
    with sampling_kernels(model) as choice:
        assert choice.kernels == {"linear": "onednn", "grouped_conv": "onednn"}
        assert model.a.onednn_min_rows == rows == choice.onednn_min_rows
        assert ("oneDNN from" in choice.line()) and str(rows) in choice.line()
