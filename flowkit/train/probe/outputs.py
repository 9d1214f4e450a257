"""The folders the report lists for the latest and the best probe: ``probe/latest``, ``probe/best``.

Each is laid out as a ``flowkit eval`` folder: ``results.jsonl`` (one `flowkit.judges.records`
record per probe sentence, its first noise draw), ``summary.json`` (``step``, the probe's
``values`` as logged, the ``totals`` of its records and its ``judges``) and
``wavs/<segment_id>.wav``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["write_probe_outputs"]


def write_probe_outputs(folder: Path, step: int, values: dict[str, Any], runner: Any) -> None:
    """Replace ``folder`` with the last probe of ``runner`` (a `ProbeRunner`) at ``step``.

    The new folder is written beside the old one and swapped in by renames, so a kill leaves
    one complete version.
    """
    import json
    import shutil

    from flowkit.judges.records import RESULTS, SUMMARY, WAVS, totals
    from flowkit.synth.wav import wav_bytes

    folder = Path(folder)
    tmp = folder.with_name(folder.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / WAVS).mkdir(parents=True)
    records = [dict(r) for r in runner.last_records]
    for record, (audio, sr) in zip(records, runner.last_audio, strict=True):
        record["audio"] = f"{WAVS}/{record['utt']}.wav"
        (tmp / record["audio"]).write_bytes(wav_bytes(audio, sr))
    lines = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in records)
    (tmp / RESULTS).write_text(lines, encoding="utf-8")
    summary = {"step": step, "values": {k: v for k, v in values.items() if k not in ("probe_s", "judges")},
               "totals": totals(records), "judges": values.get("judges")}
    (tmp / SUMMARY).write_text(json.dumps(summary, indent=1, ensure_ascii=False), encoding="utf-8")
    old = folder.with_name(folder.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if folder.exists():
        folder.rename(old)
    tmp.rename(folder)
    shutil.rmtree(old, ignore_errors=True)
