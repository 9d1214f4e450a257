"""The eval folder: where it goes, the files it holds, and what a resume must share.

Resume: ``results.jsonl`` is append-only, one line per finished utterance, written after
its WAV (temp file, rename); a torn last line is dropped on start and finished utterances
are skipped, so a killed eval run again with the same command ends with the same
``results.jsonl`` as one never interrupted. ``eval.json`` records what the results depend
on (checkpoint, test list digest, seed, NFE, CFG, batch, judges, vocoder); another value
is refused with the field named. ``--limit`` may change between runs.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from flowkit.errors import DataError, ResumeError
from flowkit.evaluation.testset import TestItem, testset_name

__all__ = ["IDENTITY", "IDENTITY_KEYS", "REJECTIONS", "check_identity", "default_out",
           "hold_out", "read_results", "recorded_kernels", "result_record"]

REJECTIONS = "rejections.jsonl"
IDENTITY = "eval.json"
# What a resumed eval must share with the results it continues (``limit`` may change).
IDENTITY_KEYS = ("checkpoint", "step", "weights", "testset", "testset_sha256", "language", "seed", "nfe", "cfg",
                 "batch", "ceilings", "vocoder", "judges")


def default_out(checkpoint_or_run: str | Path, testset: str | Path, step: int) -> Path | None:
    """``RUN/evals/<testset-name>-step<step>/`` for a run directory (or a checkpoint inside
    one), ``RUN/evals/<testset-name>-<last3>-step<step>/`` for an average in
    ``RUN/averaged/<last3>/``; None for a checkpoint outside a run (``--out`` is then required)."""
    path = Path(checkpoint_or_run).resolve()
    for run in (path, path.parent.parent):
        if (run / "config.gin").is_file() and ((run / "checkpoints").is_dir() or (run / "best").is_dir()):
            return run / "evals" / f"{testset_name(testset)}-step{step}"
    run = path.parents[2] if len(path.parents) > 2 else path
    if path.parent.parent.name == "averaged" and (run / "config.gin").is_file():
        return run / "evals" / f"{testset_name(testset)}-{path.parent.name}-step{step}"
    return None


def read_results(path: Path, *, repair: bool = False) -> list[dict[str, Any]]:
    """The records of ``results.jsonl`` (empty when it does not exist).

    A last line without its newline was torn by a kill: it is left out, and with
    ``repair`` cut from the file so that appending continues on a line boundary.

    Raises:
        DataError: a line before the last one is not JSON (the file was edited by hand).
    """
    if not path.is_file():
        return []
    data = path.read_bytes()
    end = data.rfind(b"\n") + 1
    if end < len(data) and repair:
        with open(path, "r+b") as f:
            f.truncate(end)
            f.flush()
            os.fsync(f.fileno())
    records = []
    for number, line in enumerate(data[:end].splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except ValueError as exc:
            raise DataError(f"{path}:{number} is not JSON ({exc}); delete the line (its utterance is redone) or the "
                            "file (all are redone)") from None
    return records


def _same(key: str, old: Any, new: Any) -> bool:
    """Whether a recorded identity value matches this eval's. A judge matches on the fields
    both records hold (``name``, ``model``, ``version``, and ``decoding`` where both say it),
    so a record that names fewer of a judge's fields still continues."""
    if key != "judges" or not isinstance(old, dict) or not isinstance(new, dict) or set(old) != set(new):
        return old == new
    for kind, a in old.items():
        b = new[kind]
        if not (isinstance(a, dict) and isinstance(b, dict)):
            if a != b:
                return False
        elif any(a[k] != b[k] for k in set(a) & set(b)):
            return False
    return True


def _judges_change(old: dict[str, Any], new: dict[str, Any]) -> str:
    """The judges that differ, ``kind: then -> now``, with the ``--asr`` that continues."""
    def label(judge: Any) -> str:
        if not isinstance(judge, dict):
            return "none"
        return " ".join(str(judge.get(k)) for k in ("name", "model") if judge.get(k)) or "unnamed"

    was = old.get("judges") if isinstance(old.get("judges"), dict) else {}
    now = new.get("judges") if isinstance(new.get("judges"), dict) else {}
    parts = [f"{kind} {label(was.get(kind))}, now {label(now.get(kind))}" for kind in sorted(set(was) | set(now))
             if not _same("judges", {kind: was.get(kind)}, {kind: now.get(kind)})]
    asr = was.get("asr")
    changed = not _same("judges", {"asr": asr}, {"asr": now.get("asr")})
    if changed and isinstance(asr, dict) and str(asr.get("name")).startswith("asr."):
        parts.append(f"--asr {str(asr['name']).removeprefix('asr.')} continues it")
    return "; ".join(parts) or "their records differ"


def check_identity(out: Path, identity: dict[str, Any], *, record: bool = True) -> None:
    """Refuse to continue results made with other settings (the keys ``identity`` holds);
    with ``record``, write them on a fresh start."""
    from flowkit.io import atomic_write_json

    path = out / IDENTITY
    if path.is_file():
        try:
            old = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            old = None
        if isinstance(old, dict):
            for key in IDENTITY_KEYS:
                if key == "judges" and key in identity and not _same(key, old.get(key), identity.get(key)):
                    raise ResumeError(f"{out} holds an eval made with other judges: {_judges_change(old, identity)}; "
                                      f"give another --out, or delete {out} to start over")
                if key in identity and not _same(key, old.get(key), identity.get(key)):
                    raise ResumeError(
                        f"{out} holds an eval made with {key} = {old.get(key)!r}, not {identity.get(key)!r}; give "
                        f"another --out, or delete {out} to start over"
                    )
            return
    if record:
        atomic_write_json(path, identity)


def recorded_kernels(out: Path) -> tuple[bool, dict[str, str] | None]:
    """``(legacy, kernels)`` of the eval in ``out``: the sampling kernels its `IDENTITY` file
    records (``{"linear": ..., "onednn_min_rows": ...}``; None on a fresh start), and whether it is an eval made before
    kernels were recorded (it goes on with the kernels it started with: no sampling choice)."""
    try:
        old = json.loads((out / IDENTITY).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False, None
    if not isinstance(old, dict):
        return False, None
    kernels = old.get("cpu_kernels")
    return "cpu_kernels" not in old, kernels if isinstance(kernels, dict) else None


def hold_out(out: Path, held: contextlib.ExitStack, label: str) -> None:
    """Make ``out`` and hold it for this process: writes refused there become one
    `WriteError` (`flowkit.io.refused_writes`), and ``OUT/eval.lock`` is taken."""
    from flowkit.data.locks import StoreLock
    from flowkit.io import check_out_path, check_writable, refused_writes

    check_out_path(out, label=label, folder=True)
    check_writable(out, label=label)
    held.enter_context(refused_writes(label, out))
    out.mkdir(parents=True, exist_ok=True)
    held.enter_context(StoreLock.acquire(out / "eval", what=f"eval folder {out}", retry="or give another --out",
                                         command="eval"))


def result_record(item: TestItem, out: Path, audio_path: Path, gen: tuple[np.ndarray, int], frames: int,
                  scores: dict[str, Any], seed: int) -> dict[str, Any]:
    """The ``results.jsonl`` line of one finished utterance: the test line, its WAV, its scores."""
    seconds = gen[0].shape[0] / gen[1]
    return {
        "utt": item.utt, "line": item.line, "audio": os.path.relpath(audio_path, out), "text": item.text,
        "language": item.language, "prompt_text": item.prompt_text, "prompt_wav": str(item.prompt_wav),
        "target_wav": None if item.target_wav is None else str(item.target_wav),
        "frames": frames, "seconds": round(seconds, 4), "noise_seed": seed, **scores,
    }
