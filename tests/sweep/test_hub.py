"""hf:// references: resolved through huggingface_hub against a cache laid out as it lays
one out (no hub is reachable here): the cache first, HF_HUB_OFFLINE=1 honoured, a missing
file offline is one line with the cache directory and the fetch command; online mode with
huggingface_hub's download function replaced by one that writes the cache."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from flowkit import hub
from flowkit.errors import CheckpointError, ConfigError

huggingface_hub = pytest.importorskip("huggingface_hub")

REPO = Path(__file__).resolve().parents[2]
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def lay_out(home: Path, repo_id: str, files: dict[str, bytes], commit: str = COMMIT, ref: str = "main") -> Path:
    """A cached repository as huggingface_hub writes it: blobs, a snapshot of links, refs/<ref>."""
    root = home / "hub" / f"models--{repo_id.replace('/', '--')}"
    snapshot = root / "snapshots" / commit
    for name, data in files.items():
        blob = root / "blobs" / f"{abs(hash((name, data))):x}"
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(data)
        link = snapshot / name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(Path("../" * (name.count("/") + 2)) / "blobs" / blob.name)
    (root / "refs").mkdir(parents=True, exist_ok=True)
    (root / "refs" / ref).write_text(commit)
    return snapshot


@pytest.fixture
def hf_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "hf"
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    return home


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every call that would contact the hub fails the test; cache reads go to the real code."""
    calls: list[str] = []
    real_file, real_snap = huggingface_hub.hf_hub_download, huggingface_hub.snapshot_download

    def file(*args, local_files_only=False, **kwargs):
        if local_files_only:
            return real_file(*args, local_files_only=True, **kwargs)
        calls.append(f"hf_hub_download {args}")
        raise AssertionError("the hub was contacted")

    def snap(*args, local_files_only=False, **kwargs):
        if local_files_only:
            return real_snap(*args, local_files_only=True, **kwargs)
        calls.append(f"snapshot_download {args}")
        raise AssertionError("the hub was contacted")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", file)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", snap)
    return calls


def test_references_parse_with_and_without_revision() -> None:
    assert hub.parse("hf://SWivid/F5-TTS/F5TTS_v1_Base/model_1250000.safetensors") == hub.HubRef(
        "SWivid/F5-TTS", "F5TTS_v1_Base/model_1250000.safetensors", None)
    assert hub.parse("hf://o/r/a/b.pt@v1.2") == hub.HubRef("o/r", "a/b.pt", "v1.2")
    assert hub.parse("hf://o/r@abc123/a/b.pt") == hub.HubRef("o/r", "a/b.pt", "abc123")
    assert hub.parse("hf://charactr/vocos-mel-24khz") == hub.HubRef("charactr/vocos-mel-24khz", "", None)
    assert hub.parse(Path("hf://o/r/x.pt")) == hub.HubRef("o/r", "x.pt", None)  # a path option folds '//'
    assert not hub.is_hub("runs/e12") and hub.resolve("runs/e12") == Path("runs/e12")
    for bad in ("hf://onlyowner", "hf://o/r@a/x@b", "hf://o/r/../x"):
        with pytest.raises(ConfigError, match="hf://"):
            hub.parse(bad)


def test_a_cached_file_and_folder_resolve_without_the_hub(hf_home: Path, no_network: list[str]) -> None:
    snapshot = lay_out(hf_home, "owner/model", {"sub/weights.pt": b"w", "config.yaml": b"c", "pytorch_model.bin": b"p"})
    got = hub.resolve("hf://owner/model/sub/weights.pt")
    assert got == snapshot / "sub" / "weights.pt" and got.read_bytes() == b"w"
    assert hub.resolve("hf://owner/model", kind="dir") == snapshot
    assert hub.resolve(f"hf://owner/model/config.yaml@{COMMIT}").read_bytes() == b"c"
    assert no_network == []


def test_offline_a_missing_file_is_one_line_with_the_cache_and_the_command(
        hf_home: Path, no_network: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    lay_out(hf_home, "owner/model", {"config.yaml": b"c"})
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(CheckpointError) as info:
        hub.resolve("hf://owner/model/sub/weights.pt@v2")
    message = str(info.value)
    assert "\n" not in message and str(hf_home / "hub") in message and "HF_HUB_OFFLINE=1" in message
    tool = "hf download" if (REPO / ".venv" / "bin" / "hf").exists() or hub.fetch_command(
        hub.parse("hf://a/b/c.pt")).startswith("hf ") else "huggingface-cli download"
    assert f"`{tool} owner/model sub/weights.pt --revision v2`" in message
    with pytest.raises(CheckpointError, match="not found"):
        hub.resolve("hf://other/repo", kind="dir")
    assert no_network == []  # offline: nothing was asked of the hub


def test_online_the_cache_comes_first_then_the_download(hf_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = huggingface_hub.hf_hub_download
    downloads: list[tuple[str, str, str | None]] = []

    def download(repo_id, filename, *, revision=None, cache_dir=None, local_files_only=False, **kw):
        if local_files_only:
            return real(repo_id, filename, revision=revision, cache_dir=cache_dir, local_files_only=True, **kw)
        downloads.append((repo_id, filename, revision))
        assert Path(cache_dir) == hf_home / "hub"  # the cache of this environment's HF_HOME
        return str(lay_out(hf_home, repo_id, {filename: b"fetched"}) / filename)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", download)
    first = hub.resolve("hf://owner/model/model_1200.safetensors")
    again = hub.resolve("hf://owner/model/model_1200.safetensors")
    assert first == again and first.read_bytes() == b"fetched"
    assert downloads == [("owner/model", "model_1200.safetensors", None)]  # fetched once, then cached


def test_vocos_path_in_gin_and_import_f5_take_hf_references(hf_home: Path, no_network: list[str],
                                                             tmp_path: Path) -> None:
    from flowkit.synth.vocoders import Vocos

    snapshot = lay_out(hf_home, "charactr/vocos-mel-24khz", {"config.yaml": b"x", "pytorch_model.bin": b"y"})
    assert Vocos(path="hf://charactr/vocos-mel-24khz")._directory() == snapshot

    sys.path.insert(0, str(REPO / "tests" / "interop"))
    from f5_files import write_f5_safetensors

    (tmp_path / "src" / "F5TTS_v1_Base").mkdir(parents=True)
    local = write_f5_safetensors(tmp_path / "src" / "F5TTS_v1_Base" / "model_1200.safetensors")
    lay_out(hf_home, "SWivid/F5-TTS", {"F5TTS_v1_Base/model_1200.safetensors": local.read_bytes(),
                                       "F5TTS_v1_Base/vocab.txt": (local.parent / "vocab.txt").read_bytes()})
    from flowkit.interop.f5_run import import_f5

    written = import_f5("hf://SWivid/F5-TTS/F5TTS_v1_Base/model_1200.safetensors", tmp_path / "run")
    from flowkit.checkpoints.files import load_checkpoint

    meta = load_checkpoint(written).meta
    assert meta["imported_from"]["config"] == "F5TTS_v1_Base"  # told from the cached folder's name
    assert no_network == []


def test_init_from_takes_a_run_folder_of_a_repository(hf_home: Path, no_network: list[str], tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    snapshot = lay_out(hf_home, "me/runs", {"f5-base/checkpoints/step-00000000/meta.json": b"{}",
                                            "f5-base/config.gin": b""})
    assert hub.resolve("hf://me/runs/f5-base", kind="dir") == snapshot / "f5-base"
    # flowkit train --init-from hf://...: resolved before anything else (a typer Path option folds '//')
    from flowkit.train.run import train

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(CheckpointError, match=r"hf://me/runs/e12: not found .* in the Hugging Face cache "
                                              r".*hf download me/runs --include 'e12/\*'"):
        train([REPO / "gin" / "debug.gin"], (), out=tmp_path / "run", init_from=Path("hf://me/runs/e12"), device="cpu")
    assert not (tmp_path / "run").exists() and no_network == []


def test_synthesize_eval_and_report_take_hf_references(hf_home: Path, no_network: list[str], tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch,
                                                       capfd: pytest.CaptureFixture) -> None:
    """Every path argument that takes a checkpoint or run resolves hf:// as import-f5 and
    --init-from do (flowkit.hub.resolve): a run kept in a hub repository, read from the cache."""
    from typer.testing import CliRunner

    from flowkit.checkpoints.files import resolve_checkpoint
    from flowkit.cli.app import app

    sys.path.insert(0, str(REPO / "tests"))
    from tiny_checkpoint import save_tiny_checkpoint

    made = tmp_path / "made"
    save_tiny_checkpoint(made, ["hello there"])
    files = {f"run/{p.relative_to(made)}": p.read_bytes() for p in made.rglob("*") if p.is_file()}
    snapshot = lay_out(hf_home, "me/runs", files)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert resolve_checkpoint("hf://me/runs/run") == snapshot / "run" / "checkpoints" / "step-00000003"

    def cli(*argv: object) -> tuple[int, str]:
        capfd.readouterr()
        result = CliRunner().invoke(app, [str(a) for a in argv])
        assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
        return result.exit_code, capfd.readouterr().err + result.output

    wav = tmp_path / "hello.wav"
    code, said = cli("synthesize", "hf://me/runs/run", "--text", "hello", "--seconds", "0.3", "--steps", "1",
                     "--out", wav)
    assert code == 0 and wav.is_file(), said
    code, said = cli("report", "hf://me/runs/run", "--out", tmp_path / "report")
    assert code == 0 and (tmp_path / "report" / "report.html").is_file(), said
    code, said = cli("eval", "hf://me/runs/run", "--testset", tmp_path / "meta.lst")
    assert (code == ConfigError.exit_code
            and "hf://me/runs/run is a checkpoint on the Hugging Face Hub; give --out" in said)
    code, said = cli("synthesize", "hf://me/runs/gone", "--text", "hello", "--out", wav)
    assert code == CheckpointError.exit_code and "hf://me/runs/gone: not found" in said and "hf:/me" not in said
    assert no_network == []
