"""The sampler's batched path (both CFG passes in one forward, the x- and t-free work done once
per call) against the plain path (tests/synth/reference_sampler.py: two full forward passes of
`DiT.forward` per evaluation of the field).

Tolerance. Both paths run the same float32 arithmetic in a different grouping: the input
projection is split into the sample's columns and the prompt's + text's (two products summed
instead of one), the batch of a product holds 2b items instead of b (MKL and oneDNN block a
GEMM by its row count, so the rounding of a row depends on the others), and the position
convolutions go through oneDNN instead of torch's own kernel. Each is ~1e-7 relative per
product; CFG at strength 2 (``3 v_c - 2 v_u``) and the ODE's steps carry and amplify it. So the
bar is on the generated latents relative to their scale (the largest magnitude of the
reference output): ``REL = 1e-5``, about 80 float32 ulps; measured <= 3.3e-7 on an Intel Xeon
(one thread): 30x headroom for other x86 CPUs and thread counts. Bit
equality is not expected. A wrong pass order, a missing text or prompt drop, or a wrong
packing moves the result by 1e-2 to 1, far above the bar (see
``test_a_wrong_unconditional_pass_is_caught``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "model"))
from model_fixtures import LATENT_DIM, N_LANGUAGES, SPACE, VOCAB, build  # noqa: E402

from flowkit.flow.schedules import CosineVPred, FlowMatching
from flowkit.flow.solvers import Euler, Midpoint
from flowkit.model.dit import DiT, SamplingConditions
from flowkit.synth import sample
from flowkit.synth.sample import Utterance, inference_conditions

sys.path.insert(0, str(Path(__file__).resolve().parent))
from reference_sampler import reference_synthesize  # noqa: E402

REL = 1e-5  # see the module docstring


@pytest.fixture(autouse=True)
def _one_thread():
    """Tiny models run fastest on one thread (two spin-wait on a loaded CPU); restored after."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _model(**kw) -> DiT:
    return build(seed=0, **kw)


def _utterances(batch: int) -> list[Utterance]:
    """``batch`` utterances of different lengths (so b > 1 is padded), with and without prompts."""
    g = torch.Generator().manual_seed(7)
    out = []
    for i in range(batch):
        words = [torch.randint(3, VOCAB, (int(torch.randint(1, 5, (1,), generator=g)),), generator=g).tolist()
                 for _ in range(2 + i)]
        text = [c for k, w in enumerate(words) for c in ([SPACE] if k else []) + w]
        prompt = torch.randn(6 + 3 * i, LATENT_DIM, generator=g) if i != 1 else None
        out.append(Utterance(
            text=text, prompt=prompt, prompt_text=[5, 6, SPACE, 7] if prompt is not None else (),
            target_frames=11 + 4 * i, language=i % (N_LANGUAGES + 1), emotion=i % 3,
            intensity=0.5 if i % 3 else None, rate=i % 4, loudness=(i + 1) % 4,
        ))
    return out


def _both(model: DiT, cond, **kw) -> tuple[torch.Tensor, torch.Tensor]:
    args = dict(schedule=FlowMatching(), solver=Euler(), steps=8, cfg_strength=2.0, on_step=None,
                generator=None, noise=torch.randn((cond.batch_size, cond.num_frames, LATENT_DIM),
                                                  generator=torch.Generator().manual_seed(3)))
    args.update(kw)
    with torch.no_grad():
        fast = sample.synthesize(model, cond, **args)
        ref = reference_synthesize(model, cond, **args)
    return fast, ref


def _relative(fast: torch.Tensor, ref: torch.Tensor) -> float:
    return float((fast - ref).abs().max() / ref.abs().max())


@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("sway", [None, -1.0])
@pytest.mark.parametrize("cfg", [0.0, 2.0])
@pytest.mark.parametrize(("text_path", "arch"),
                         [("unaligned", "flowkit"), ("aligned", "flowkit"), ("unaligned", "f5_v1")])
def test_the_batched_sampler_equals_the_reference(text_path: str, arch: str, cfg: float, sway, batch: int) -> None:
    model = _model(text_path=text_path, arch=arch, conditions=arch == "flowkit")
    cond = inference_conditions(model, _utterances(batch), separator_ids={SPACE})
    assert (batch == 1) == bool(cond.frame_mask.all())  # b > 1: padded, so the packed path runs
    fast, ref = _both(model, cond, cfg_strength=cfg, solver=Euler(sway=sway))
    assert _relative(fast, ref) <= REL, _relative(fast, ref)
    assert torch.equal(fast[~cond.target_mask], ref[~cond.target_mask])  # prompt copied, padding zero


@pytest.mark.parametrize("arch", ["flowkit", "f5_base"])
def test_other_schedules_solvers_and_options(arch: str) -> None:
    """Cosine v-prediction, the midpoint solver, F5-TTS's base arch (first head rotated only),
    the long skip and a model without global conditions."""
    model = _model(arch=arch, long_skip=True, conditions=arch == "flowkit")
    cond = inference_conditions(model, _utterances(3), separator_ids={SPACE})
    fast, ref = _both(model, cond, schedule=CosineVPred(), solver=Midpoint(sway=-1.0), steps=4)
    assert _relative(fast, ref) <= REL, _relative(fast, ref)


def test_one_forward_per_evaluation_and_the_text_encoded_once_per_pass() -> None:
    model = _model(text_path="aligned")
    cond = inference_conditions(model, _utterances(3), separator_ids={SPACE})
    calls = {"forward": 0, "text": 0, "duration": 0}
    for name, module in (("forward", model), ("text", model.text), ("duration", model.duration)):
        module.register_forward_hook(lambda m, a, o, name=name: calls.__setitem__(name, calls[name] + 1))
    sample.synthesize(model, cond, schedule=FlowMatching(), solver=Midpoint(), steps=5, cfg_strength=2.0,
                      generator=torch.Generator().manual_seed(0))
    # midpoint: 2 evaluations a step, each one batched forward of both CFG passes; the text
    # encoder and the duration head run once per pass (conditional, unconditional), not per step
    assert calls == {"forward": 10, "text": 2, "duration": 2}


def test_the_prepared_forward_is_both_passes_stacked() -> None:
    """The entry point itself: ``[2b n d]`` = the conditional then the unconditional pass."""
    model = _model(arch="f5_v1", conditions=False)
    cond = inference_conditions(model, _utterances(3), separator_ids={SPACE})
    b, n = cond.frame_mask.shape
    x = torch.randn((b, n, LATENT_DIM), generator=torch.Generator().manual_seed(5))
    t = torch.full((b,), 0.3)
    uncond = cond.replace(drop_text=torch.ones(b, dtype=torch.bool), drop_prompt=torch.ones(b, dtype=torch.bool))
    with torch.no_grad():
        prepared = model.prepare_sampling(cond, guidance=True)
        assert isinstance(prepared, SamplingConditions) and prepared.passes == 2
        out = model(x, t, prepared).output
        expected = torch.cat([model(x, t, cond, phase="even").output, model(x, t, uncond, phase="even").output])
    assert out.shape == (2 * b, n, LATENT_DIM)
    assert _relative(out, expected) <= REL
    assert torch.count_nonzero(out[torch.cat([~cond.frame_mask] * 2)]) == 0  # padding zero, as forward's


def test_a_wrong_unconditional_pass_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparison can fail: an unconditional pass that keeps the prompt (a plausible slip)
    is 1e-2 or more away, three orders of magnitude above the bar."""
    model = _model()
    cond = inference_conditions(model, _utterances(3), separator_ids={SPACE})
    real = DiT.prepare_sampling

    def keeps_prompt(self, c, *, guidance, phase="even"):
        prepared = real(self, c, guidance=False, phase=phase)
        if not guidance:
            return prepared
        dropped_text = real(self, c.replace(drop_text=torch.ones_like(c.drop_text)), guidance=False, phase=phase)
        import attrs

        return attrs.evolve(prepared, passes=2, base=torch.cat([prepared.base, dropped_text.base]),
                            valid_rows=None if prepared.valid is None else prepared.valid.repeat(2, 1),
                            **_two_rows(self, c, phase))

    def _two_rows(self, c, phase):
        both = real(self, c, guidance=True, phase=phase)
        return {"pack_src": both.pack_src, "unpack_rows": both.unpack_rows, "unpack_dst": both.unpack_dst}

    monkeypatch.setattr(DiT, "prepare_sampling", keeps_prompt)
    fast, ref = _both(model, cond)
    assert _relative(fast, ref) > 1e3 * REL


def test_on_step_sees_every_evaluation_as_the_reference_does() -> None:
    model = _model()
    cond = inference_conditions(model, _utterances(2), separator_ids={SPACE})
    seen: dict[bool, list[float]] = {True: [], False: []}
    args = dict(schedule=FlowMatching(), solver=Midpoint(sway=-1.0), steps=3, cfg_strength=2.0,
                noise=torch.randn((cond.batch_size, cond.num_frames, LATENT_DIM),
                                  generator=torch.Generator().manual_seed(0)))
    with torch.no_grad():
        sample.synthesize(model, cond, on_step=seen[False].append, **args)
        reference_synthesize(model, cond, on_step=seen[True].append, **args)
    assert len(seen[False]) == 6 and seen[False] == seen[True] and seen[False][0] == 0.0
