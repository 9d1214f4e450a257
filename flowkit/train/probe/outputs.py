"""The folders the report lists for the latest and the best probe: ``probe/latest``, ``probe/best``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["write_probe_outputs"]


def write_probe_outputs(folder: Path, step: int, values: dict[str, Any], runner: Any) -> None:
    """Replace ``folder`` with the last probe's sentences (``sentences.json``) and audio
    (``<segment_id>.wav``): what the report lists for the latest and the best probe.

    The new folder is written beside the old one and swapped in by renames, so a kill leaves
    one complete version.
    """
    import json
    import shutil

    from flowkit.synth.wav import wav_bytes

    folder = Path(folder)
    tmp = folder.with_name(folder.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    rows = runner.sentence_table()
    for row, (audio, sr) in zip(rows, runner.last_audio, strict=False):
        name = f"{row['segment_id']}.wav"
        (tmp / name).write_bytes(wav_bytes(audio, sr))
        row["audio"] = name
    doc = {"step": step, "values": {k: v for k, v in values.items() if k != "probe_s"}, "sentences": rows}
    (tmp / "sentences.json").write_text(json.dumps(doc, indent=1, ensure_ascii=False), encoding="utf-8")
    old = folder.with_name(folder.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if folder.exists():
        folder.rename(old)
    tmp.rename(folder)
    shutil.rmtree(old, ignore_errors=True)
