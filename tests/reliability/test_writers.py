"""Every command that writes survives a read-only file system and a full disk.

`prepare --out`, `prepare --append`, `report --out`, `export-f5 --out`, `import-f5 --out`
and `synthesize --out` each get a real tmpfs mount: remounted read-only, or filled to
16 KiB free so that the early check passes and the write itself fails half-way
(ENOSPC; torch's archive writer raises a RuntimeError there). Each must print one
``error:`` line naming the path and the fix, exit with `WriteError.exit_code`, and leave
nothing half-made (no empty export folder, no ``.partial`` store, no hidden temporary
file; an appended store still opens with its old segments). Mounting needs root and a
kernel that allows it (CI runs as root); elsewhere these tests skip and say why.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from reliability_helpers import REPO

from flowkit.errors import ConfigError, WriteError

sys.path.insert(0, str(REPO / "tests" / "interop"))
from f5_files import write_f5_safetensors  # noqa: E402

FREE_KIB = 16  # left on the "full" disk: smaller than the outputs below, larger than 0


def _mount(*args: str) -> None:
    done = subprocess.run(["mount", *args], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip() or done.returncode}); CI runs these as root")


@pytest.fixture
def disk(tmp_path: Path):
    """``disk(kind, setup=None, free_kib=FREE_KIB)``: a fresh tmpfs after ``setup(root)`` ran
    on it, then remounted read-only (kind "read_only") or filled to ``free_kib`` free (kind "full")."""
    if os.geteuid() != 0:
        pytest.skip("a read-only or full tmpfs needs root to mount (CI runs these as root)")
    mounts: list[Path] = []

    def make(kind: str, setup: Callable[[Path], None] | None = None, free_kib: int = FREE_KIB) -> Path:
        root = tmp_path / f"disk{len(mounts)}"
        root.mkdir()
        _mount("-t", "tmpfs", "-o", "size=32m", "tmpfs", str(root))
        mounts.append(root)
        if setup is not None:
            setup(root)
        if kind == "read_only":
            _mount("-o", "remount,ro", str(root))
        else:
            st = os.statvfs(root)
            with open(root / "filler", "wb") as f:
                f.write(b"\0" * (st.f_bfree * st.f_frsize - free_kib * 1024))
        return root

    yield make
    for root in mounts:
        subprocess.run(["umount", "-l", str(root)], capture_output=True)


def _listing(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def _one_error_line(argv: list[str], capfd: pytest.CaptureFixture, code: int, *fragments: str) -> str:
    from typer.testing import CliRunner

    from flowkit.cli.app import app

    capfd.readouterr()
    result = CliRunner().invoke(app, [str(a) for a in argv])
    err = capfd.readouterr().err + result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == code, err
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith("warning: ")]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


def _refused(kind: str) -> tuple[str, ...]:
    return (("cannot write", "read-only", "writable") if kind == "read_only"
            else ("cannot write", "disk is full", "free space"))


# ---- inputs ------------------------------------------------------------------------------


def _corpus(root: Path, prefix: str, n: int = 3) -> Path:
    """An LJSpeech-style folder of ``n`` one-second clips (noise under a tone)."""
    rng = np.random.default_rng(len(prefix))
    (root / "wavs").mkdir(parents=True)
    lines = []
    for i in range(n):
        t = np.arange(16000) / 16000
        audio = 0.1 * np.sin(2 * np.pi * 180 * t) + 0.02 * rng.standard_normal(t.size)
        sf.write(str(root / "wavs" / f"{prefix}{i}.wav"), audio.astype(np.float32), 16000)
        lines.append(f"{prefix}{i}|hello there number {i}|ann|en")
    (root / "metadata.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run imported from a small random-weight F5 checkpoint (synthesize, report, export)."""
    from flowkit.interop.f5_run import import_f5

    root = tmp_path_factory.mktemp("f5")
    import_f5(write_f5_safetensors(root / "F5TTS_v1_small.safetensors"), root / "run")
    return root / "run"


@pytest.fixture(scope="module")
def f5_file(imported: Path) -> Path:
    return imported.parent / "F5TTS_v1_small.safetensors"


def _prepare(inputs: Path, out: Path) -> None:
    from flowkit.data.prepare import prepare_store

    prepare_store([inputs], out, workers=1, progress=False)


# ---- one test per writing command ----------------------------------------------------------

KINDS = ["read_only", "full"]


@pytest.mark.parametrize("kind", KINDS)
def test_prepare_out(kind: str, disk, tmp_path: Path, capfd: pytest.CaptureFixture) -> None:
    corpus = _corpus(tmp_path / "corpus", "a")
    root = disk(kind)
    before = _listing(root)
    out = root / "new.zarr"
    _one_error_line(["prepare", corpus, "--out", out, "--workers", "1", "--quiet"], capfd, WriteError.exit_code,
                    str(root), *_refused(kind))
    assert _listing(root) == before  # no new.zarr, no new.zarr.partial


@pytest.mark.parametrize("kind", KINDS)
def test_prepare_append(kind: str, disk, tmp_path: Path, capfd: pytest.CaptureFixture) -> None:
    from flowkit.data.store import StoreReader

    _prepare(_corpus(tmp_path / "first", "a"), tmp_path / "store.zarr")
    more = _corpus(tmp_path / "more", "b")
    root = disk(kind, lambda r: shutil.copytree(tmp_path / "store.zarr", r / "store.zarr"))
    _one_error_line(["prepare", more, "--out", root / "store.zarr", "--append", "--workers", "1", "--quiet"],
                    capfd, WriteError.exit_code, str(root / "store.zarr"), *_refused(kind))
    reader = StoreReader.open(root / "store.zarr")  # still whole, with its first 3 segments only
    assert reader.n_segments == 3
    reader.close()


@pytest.mark.parametrize("kind", KINDS)
def test_report_out(kind: str, disk, imported: Path, capfd: pytest.CaptureFixture) -> None:
    root = disk(kind, free_kib=4)  # a report of a run without metrics is small: one 4 KiB page is left
    before = _listing(root)
    _one_error_line(["report", imported, "--out", root / "report"], capfd, WriteError.exit_code,
                    str(root), *_refused(kind))
    assert _listing(root) == before  # the report folder it began is gone


def test_sweep_and_eval_out_on_a_read_only_disk(disk, imported: Path, tmp_path: Path,
                                                capfd: pytest.CaptureFixture) -> None:
    """sweep and eval check --out as train does: one line, exit 6, before any point runs or
    the model loads (a full disk mid-way: tests/sweep/test_sweep_outcomes.py, tests/eval)."""
    root = disk("read_only")
    before = _listing(root)
    _one_error_line(["sweep", REPO / "gin" / "debug.gin", "--grid", "Trainer.lr=[1e-3, 2e-3]", "--out", root / "sw"],
                    capfd, WriteError.exit_code, str(root), *_refused("read_only"))
    _one_error_line(["eval", imported, "--testset", tmp_path / "meta.lst", "--out", root / "ev"], capfd,
                    WriteError.exit_code, str(root), *_refused("read_only"))
    assert _listing(root) == before


@pytest.mark.parametrize("kind", KINDS)
def test_export_f5_out(kind: str, disk, imported: Path, capfd: pytest.CaptureFixture) -> None:
    root = disk(kind)
    before = _listing(root)
    _one_error_line(["export-f5", imported, "--out", root / "export"], capfd, WriteError.exit_code,
                    str(root), *_refused(kind))
    assert _listing(root) == before  # no empty export folder, no temporary file


@pytest.mark.parametrize("kind", KINDS)
def test_import_f5_out(kind: str, disk, f5_file: Path, capfd: pytest.CaptureFixture) -> None:
    root = disk(kind)
    before = _listing(root)
    _one_error_line(["import-f5", f5_file, "--out", root / "run"], capfd, WriteError.exit_code,
                    str(root), *_refused(kind))
    assert _listing(root) == before  # no run, no hidden .run.import-PID


@pytest.mark.parametrize("kind", KINDS)
def test_synthesize_out(kind: str, disk, imported: Path, capfd: pytest.CaptureFixture) -> None:
    root = disk(kind)
    before = _listing(root)
    _one_error_line(["synthesize", imported, "--text", "hello", "--seconds", "1", "--steps", "1",
                     "--out", root / "a.wav"], capfd, WriteError.exit_code, str(root), *_refused(kind))
    assert _listing(root) == before  # no a.wav, no .a.wav.*.tmp


def test_a_folder_without_write_permission_is_refused_before_any_work(imported: Path, tmp_path: Path) -> None:
    """EACCES is checked up front. Root may write anywhere, so the command runs as root
    without the capabilities that override file permissions (util-linux's setpriv)."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv (util-linux) to drop CAP_DAC_OVERRIDE")
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    argv = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", sys.executable, "-m", "flowkit",
            "export-f5", str(imported), "--out", str(locked / "export")]
    done = subprocess.run(argv, capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "COLUMNS": "400", "NO_COLOR": "1"})
    if "setpriv:" in done.stderr:
        pytest.skip(f"setpriv cannot drop capabilities here: {done.stderr.strip()}")
    assert done.returncode == WriteError.exit_code, done.stderr
    assert done.stderr.startswith("error: ") and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "permission denied" in done.stderr and str(locked) in done.stderr
    assert not list(locked.iterdir())


# ---- an --out that is not what the command writes ------------------------------------------


@pytest.mark.parametrize("name", ["speech", "folder"])
def test_synthesize_out_needs_an_audio_file_name(name: str, imported: Path, tmp_path: Path,
                                                 capfd: pytest.CaptureFixture) -> None:
    """``--out speech`` (no extension) or ``--out FOLDER``: one line asking for a .wav path,
    before the model is loaded; nothing is written."""
    out = tmp_path / name
    if name == "folder":
        out.mkdir()
    line = _one_error_line(["synthesize", imported, "--text", "hello", "--seconds", "0.5", "--steps", "1",
                            "--out", out], capfd, ConfigError.exit_code, str(out), ".wav")
    assert ("is a folder" in line) == (name == "folder"), line
    assert sorted(p.name for p in tmp_path.iterdir()) == ([name] if name == "folder" else [])


def test_export_f5_into_a_folder_with_other_files_is_refused(imported: Path, tmp_path: Path,
                                                             capfd: pytest.CaptureFixture) -> None:
    out = tmp_path / "busy"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    _one_error_line(["export-f5", imported, "--out", out], capfd, ConfigError.exit_code, str(out),
                    "is not empty", "new folder")
    assert [p.name for p in out.iterdir()] == ["notes.txt"]


@pytest.mark.parametrize("kind", KINDS)
def test_train_out(kind: str, disk, capfd: pytest.CaptureFixture) -> None:
    """`flowkit train --out` on a read-only or full disk: one line before the data load,
    no run directory begun."""
    from typer.testing import CliRunner

    from flowkit.cli.app import app

    root = disk(kind)
    before = _listing(root)
    capfd.readouterr()
    result = CliRunner().invoke(app, ["train", "gin/quickstart.gin", "gin/debug.gin", "--steps", "1",
                                      "--out", str(root / "run")])
    err = capfd.readouterr().err + result.output
    assert result.exit_code == WriteError.exit_code and "Traceback" not in err, err
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and all(f in errors[0] for f in (str(root), *_refused(kind))), err
    assert _listing(root) == before  # the run directory it began is gone
