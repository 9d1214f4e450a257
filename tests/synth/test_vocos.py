"""vocoder.vocos: parity with the reference Vocos.decode, loading a release directory, refusals."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from numerics import VOCOS_AUDIO_MAX_ABS
from vocos_helpers import fixture, seeded_state, write_release

from flowkit.errors import CheckpointError
from flowkit.synth.vocos import VocosConfig, load_vocos, read_config

TOLERANCE = VOCOS_AUDIO_MAX_ABS  # max abs difference to the reference, float32 (tests/numerics.py)


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_release(tmp_path_factory.mktemp("vocos") / "vocos-mel-24khz")


def _reference_items(fx: dict) -> list[np.ndarray]:
    ends = np.cumsum(fx["audio_lengths"])
    return np.split(fx["audio"], ends[:-1])


@pytest.mark.parametrize("name", ["published", "reduced"])
def test_batched_decode_equals_reference(name: str, tmp_path: Path, published: Path) -> None:
    """A batch of unequal, odd lengths decodes as the reference decodes each item alone."""
    release = published if name == "published" else write_release(tmp_path / name, name)
    fx = fixture(name)
    loaded = load_vocos(release)
    lengths = [int(v) for v in fx["lengths"]]
    assert len(set(lengths)) == len(lengths) and all(n % 2 == 1 for n in lengths)
    audio = loaded.net.decode(torch.from_numpy(fx["features"]), lengths)
    assert audio.shape == (len(lengths), loaded.net.samples(max(lengths)))
    for i, (n, want) in enumerate(zip(lengths, _reference_items(fx), strict=True)):
        got = audio[i].numpy()
        assert loaded.net.samples(n) == len(want)
        diff = float(np.abs(got[: len(want)] - want).max())
        assert diff <= TOLERANCE, f"{name} item {i} ({n} frames): max abs difference {diff:.2e}"
        assert not got[len(want):].any(), "audio after an item's end must be zero"
        assert float(np.abs(want).max()) > 0.05  # the check compares real signal, not silence
    # one item alone, without lengths, gives the same audio
    alone = loaded.net.decode(torch.from_numpy(fx["features"][1:2, :, : lengths[1]]))
    assert float((alone[0] - audio[1, : alone.shape[1]]).abs().max()) <= 1e-5


def test_published_layout_and_config() -> None:
    """The reference state dict's names are the module's plus the feature extractor's buffers."""
    from flowkit.synth.vocos import VocosNet

    fx = fixture("published")
    cfg = read_config_text(fx["config_yaml"])
    assert cfg == VocosConfig()  # the published file is the defaults of VocosConfig
    own = set(VocosNet(cfg).state_dict())
    published = set(fx["shapes"])
    assert own <= published and published - own == {
        "feature_extractor.mel_spec.spectrogram.window", "feature_extractor.mel_spec.mel_scale.fb"}
    assert fx["shapes"]["head.out.weight"] == [1026, 512]
    assert sum(np.prod(s) for k, s in fx["shapes"].items() if k in own) == sum(
        p.numel() for p in VocosNet(cfg).parameters()) + 1024  # + the ISTFT window buffer


def read_config_text(text: str, tmp: Path | None = None) -> VocosConfig:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "config.yaml"
        path.write_text(text, encoding="utf-8")
        return read_config(path)


def test_missing_files_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match=r"Vocos directory .*nowhere does not exist"):
        load_vocos(tmp_path / "nowhere")
    release = write_release(tmp_path / "r", "reduced")
    (release / "pytorch_model.bin").unlink()
    with pytest.raises(CheckpointError, match=r"r/pytorch_model\.bin: no such file"):
        load_vocos(release)
    (release / "config.yaml").unlink()
    with pytest.raises(CheckpointError, match=r"r/config\.yaml: no such file"):
        load_vocos(release)


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("vocos.models.VocosBackbone", "vocos.models.VocosResNetBackbone",
         r"config\.yaml: backbone\.class_path = 'vocos\.models\.VocosResNetBackbone' is another Vocos architecture"),
        ("vocos.heads.ISTFTHead", "vocos.heads.IMDCTSymExpHead",
         r"head\.class_path = 'vocos\.heads\.IMDCTSymExpHead' is another"),
        ("vocos.feature_extractors.MelSpectrogramFeatures", "vocos.feature_extractors.EncodecFeatures",
         r"feature_extractor\.class_path = 'vocos\.feature_extractors\.EncodecFeatures'"),
        ("    num_layers: 3\n", "    num_layers: 3\n    adanorm_num_embeddings: 4\n",
         r"adanorm_num_embeddings = 4 is the bandwidth-conditioned \(EnCodec\) Vocos"),
        ("    n_mels: 80\n    padding: center\n", "    n_mels: 80\n    padding: same\n",
         r"feature_extractor\.init_args\.padding = 'same'"),
        ("    dim: 48\n    n_fft", "    dim: 64\n    n_fft",
         r"head\.init_args\.dim = 64 does not match backbone\.init_args\.dim = 48"),
        ("    num_layers: 3\n", "    num_layers: 3\n    kernel_size: 5\n",
         r"backbone\.init_args\.kernel_size is not an argument of vocos\.models\.VocosBackbone"),
        ("    num_layers: 3\n", "    num_layers: three\n",
         r"backbone\.init_args\.num_layers = 'three' must be a positive integer"),
    ],
)
def test_another_architecture_is_one_line(tmp_path: Path, old: str, new: str, message: str) -> None:
    text = fixture("reduced")["config_yaml"]
    assert old in text
    release = write_release(tmp_path / "r", "reduced", config_text=text.replace(old, new, 1))
    with pytest.raises(CheckpointError, match=message) as err:
        load_vocos(release)
    assert "\n" not in str(err.value)


def test_weights_that_do_not_fit_name_file_and_key(tmp_path: Path) -> None:
    state = seeded_state("reduced")
    bad = dict(state)
    bad["backbone.convnext.3.gamma"] = bad["backbone.convnext.0.gamma"]
    with pytest.raises(CheckpointError, match=r"pytorch_model\.bin: key 'backbone\.convnext\.3\.gamma' is not in"):
        load_vocos(write_release(tmp_path / "extra", "reduced", state=bad))
    bad = {k: v for k, v in state.items() if k != "head.out.bias"}
    with pytest.raises(CheckpointError, match=r"pytorch_model\.bin: lacks key 'head\.out\.bias'"):
        load_vocos(write_release(tmp_path / "missing", "reduced", state=bad))
    bad = dict(state)
    bad["backbone.embed.weight"] = np.zeros((48, 100, 7), dtype=np.float32)
    with pytest.raises(CheckpointError,
                       match=r"key 'backbone\.embed\.weight' has shape \[48, 100, 7\]; .* needs \[48, 80, 7\]"):
        load_vocos(write_release(tmp_path / "shape", "reduced", state=bad))
    # the published weights against the reduced config: another model
    with pytest.raises(CheckpointError,
                       match=r"pytorch_model\.bin: key 'backbone\.convnext\.3\.dwconv\.bias' is not in"):
        load_vocos(write_release(tmp_path / "other", "published", config_text=fixture("reduced")["config_yaml"]))
    damaged = write_release(tmp_path / "damaged", "reduced")
    (damaged / "pytorch_model.bin").write_bytes(b"not a zip file")
    with pytest.raises(CheckpointError, match=r"pytorch_model\.bin: cannot be read as a PyTorch state dict"):
        load_vocos(damaged)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_decode_equals_reference(published: Path) -> None:
    fx = fixture("published")
    loaded = load_vocos(published, device="cuda")
    lengths = [int(v) for v in fx["lengths"]]
    audio = loaded.net.decode(torch.from_numpy(fx["features"]).cuda(), lengths).cpu().numpy()
    for i, want in enumerate(_reference_items(fx)):
        assert float(np.abs(audio[i, : len(want)] - want).max()) <= TOLERANCE
