"""``eval.md`` and ``eval.html`` of an eval folder, in the run report's style.

The page is a `flowkit.report.document.Document` rendered by the report's own renderers
(`flowkit.report.render_md`, `flowkit.report.render_html`): settings and judges, the
totals beside the ceilings, every utterance's scores, the rejected lines, and players for
the first ``samples`` utterances (generated, prompt, target recording). ``eval.md`` links
the audio where it lies (the generated WAVs in ``wavs/``, prompts and targets by a
relative path); ``eval.html`` embeds it and opens offline on its own.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from flowkit.report.document import Audio, Document, Facts, Note, SampleBlock, Section, Table

__all__ = ["build_document", "totals_rows", "write_reports"]

FILES_DIR = "wavs"  # eval.md's links are relative to it (render_markdown's files_dir)


def _f(value: Any, digits: int = 3) -> str:
    return "-" if not isinstance(value, (int, float)) else f"{value:.{digits}f}"


TOTALS_HEADER = ("audio", "items", "WER", "CER", "SIM (prompt)", "SIM (target)", "DNSMOS OVRL", "SIG", "BAK")


def totals_rows(totals: dict[str, Any]) -> list[list[str]]:
    """One table row per kind of clip (generated, the recordings, the recordings vocoded)."""
    labels = (("generated", "generated"), ("generated_on_ceiling_items", "generated (items with a recording)"),
              ("truth", "recordings (ceiling)"), ("vocoded", "recordings through the vocoder (ceiling)"))
    rows = []
    for key, label in labels:
        t = totals.get(key)
        if t:
            rows.append([label, str(t.get("items", "")), _f(t.get("wer")), _f(t.get("cer")), _f(t.get("sim")),
                         _f(t.get("sim_target")), _f(t.get("dnsmos"), 2), _f(t.get("dnsmos_sig"), 2),
                         _f(t.get("dnsmos_bak"), 2)])
    return rows


def _judge_line(judge: dict[str, str] | None) -> str:
    if not judge:
        return "not installed (pip install 'flowkit[eval]')"
    extra = ", ".join(x for x in (judge.get("model"), judge.get("version")) if x)
    return judge.get("name", "?") + (f" ({extra})" if extra else "")


def _audio(path: Path, name: str) -> Audio | None:
    try:
        return Audio(path.read_bytes(), name)
    except OSError:
        return None


def build_document(out: Path, summary: dict[str, Any], records: Sequence[dict[str, Any]],
                   rejections: Sequence[Any], *, samples: int = 20) -> Document:
    """The eval page of folder ``out`` (see the module docstring)."""
    gen = summary["totals"].get("generated", {})
    facts = [
        ("test list", f"{summary['testset']} ({summary['format']}): {summary['items']} evaluated, "
                      f"{summary['rejected']} rejected"),
        ("model", str(summary["model"])),
        ("vocoder", str(summary["vocoder"])),
        ("seed", str(summary["settings"]["seed"])),
        ("duration ratio (generated / target seconds, mean)", _f(gen.get("duration_ratio"))),
    ]
    if summary.get("utterances_per_minute"):
        facts.append(("throughput (this call)", f"{summary['utterances_per_minute']:.1f} utterances per minute"))
    judges = summary.get("judges", {})
    judge_facts = [(f"{kind} judge", _judge_line(judges.get(kind))) for kind in ("asr", "speaker", "quality")]
    totals_block: Any = Table(TOTALS_HEADER, totals_rows(summary["totals"]))
    rows = [[r["utt"], r["text"], r.get("hypothesis") or "", _f(r.get("wer")), _f(r.get("cer")), _f(r.get("sim")),
             _f(r.get("dnsmos"), 2), _f(r.get("duration_ratio"), 2), f"[{r['utt']}.wav]({r['audio']})"]
            for r in records]
    header = ("utt", "text", "hypothesis", "WER", "CER", "SIM", "DNSMOS", "dur. ratio", "audio")
    # sortable: the worst lines (highest WER, lowest SIM) are one click away in eval.html
    utterances: Any = Table(header, rows, sortable=True) if rows else Note("No utterance evaluated yet.")
    sections = [
        Section("Summary", [Facts(facts)]),
        Section("Judges", [Facts(judge_facts), *[Note(n) for n in summary.get("notes", [])]]),
        Section("Totals", [totals_block, Note("WER and CER are corpus-level (edits over reference words/characters, "
                                              "both sides normalised); SIM and DNSMOS are means. Ceilings: the "
                                              "target recordings judged the same way, raw and through the vocoder.")]),
        Section("Utterances", [utterances]),
    ]
    if rejections:
        rejected = [[str(r.line), r.utt, r.reason, r.detail] for r in rejections]
        sections.append(Section("Rejected lines", [Table(("line", "utt", "reason", "detail"), rejected)]))
    blocks: list[Any] = []
    wav_dir = out / FILES_DIR
    for r in list(records)[:samples]:
        audios = []
        generated = _audio(out / r["audio"], os.path.relpath(out / r["audio"], wav_dir))
        if generated is not None:
            audios.append(("generated", generated))
        for label, key in (("prompt", "prompt_wav"), ("target recording", "target_wav")):
            if r.get(key):
                found = _audio(Path(r[key]), os.path.relpath(Path(r[key]).resolve(), wav_dir.resolve()))
                if found is not None:
                    audios.append((label, found))
        caption = (f'"{r["text"]}" - heard: "{r.get("hypothesis") or ""}"; WER {_f(r.get("wer"))}, '
                   f'SIM {_f(r.get("sim"))}, DNSMOS {_f(r.get("dnsmos"), 2)}; prompt: "{r["prompt_text"]}"')
        blocks.append(SampleBlock(r["utt"], caption, [], audios))
    if blocks:
        sections.append(Section(f"Samples (first {len(blocks)})", blocks))
    return Document(f"Eval: {Path(summary['testset']).name} - {summary['model']}", sections)


def write_reports(out: Path, summary: dict[str, Any], records: Sequence[dict[str, Any]], rejections: Sequence[Any],
                  *, samples: int = 20) -> tuple[Path, Path]:
    """Write ``eval.md`` and ``eval.html`` into ``out``; returns their paths."""
    from flowkit.io import atomic_write_text
    from flowkit.report.render_html import render_html
    from flowkit.report.render_md import render_markdown

    doc = build_document(out, summary, records, rejections, samples=samples)
    md, html = out / "eval.md", out / "eval.html"
    atomic_write_text(md, render_markdown(doc, FILES_DIR))
    atomic_write_text(html, render_html(doc))
    return md, html
