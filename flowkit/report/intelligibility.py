"""The report's intelligibility section: does the model say the words, and does it use its text?

Reads what the training probe wrote (`flowkit.train.probe`): ``probe`` and
``probe_ceiling`` records of ``metrics.jsonl``, and the sentences' records with their audio
under ``probe/latest`` and ``probe/best`` (laid out as ``flowkit eval`` folders). Shows the
probe WER over steps with the two ceilings (ground truth raw, and through the run's
vocoder), the text gain over steps (``text_gain`` of the evaluation, ``probe_text_gain`` of
the probe), a sentence in words saying whether the model uses its text yet, and the probe
sentences — reference, hypothesis, its WER, SIM and DNSMOS, audio — of the best (lowest
WER) and of the latest probe. Where the probe had a speaker and a quality judge, the
speaker similarity to the prompt (``probe_sim``) and DNSMOS OVRL (``probe_dnsmos``) over
steps with the same two ceilings. A line names the judges (name, model, package version)
the records say scored them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from flowkit.report.document import Audio, Figure, Note, SampleBlock, Table
from flowkit.report.plots import Curve, curves_png
from flowkit.report.rundir import RunDir

__all__ = ["ceiling_curves", "heard_anything", "intelligibility_blocks", "judges_sentence", "text_use_sentence"]

#: the probe's judged measures besides WER: (key, label, axis, figure name)
JUDGED = (("sim", "speaker similarity to the prompt", "cosine similarity", "probe_sim"),
          ("dnsmos", "DNSMOS OVRL", "predicted MOS (1-5)", "probe_dnsmos"))


def _ceiling(run: RunDir, key: str) -> float | None:
    values = [r.get(key) for r in run.records if r.get("kind") == "probe_ceiling"]
    values = [v for v in values if isinstance(v, (int, float))]
    return float(values[-1]) if values else None


def judges_sentence(run: RunDir) -> str | None:
    """In words: which judges scored the probe (the newest probe or ceiling record's ``judges``)."""
    records = [r for r in run.records
               if r.get("kind") in ("probe", "probe_ceiling") and isinstance(r.get("judges"), dict)]
    if not records:
        return None
    parts = []
    for kind, what in (("asr", "words heard by"), ("speaker", "speaker similarity by"), ("quality", "quality by")):
        judge = records[-1]["judges"].get(kind)
        if isinstance(judge, dict):
            parts.append(f"{what} {judge.get('name')} ({judge.get('model')}, {judge.get('version')})")
    line = ("Judges: " + "; ".join(parts) + ".") if parts else ""
    heard = [(r.get("step"), _asr_name(r["judges"].get("asr"))) for r in records if r.get("kind") == "probe"]
    for (_, before), (step, after) in zip(heard, heard[1:], strict=False):
        if before != after:
            line += (f" The recogniser changed at step {step} ({before or 'none'} -> {after or 'none'}): probe WERs "
                     "before and after are not comparable, nor are they with ceilings another recogniser measured.")
    return line.strip() or None


def _asr_name(judge: Any) -> str | None:
    """``name model`` of a recorded recogniser, or None (off)."""
    if not isinstance(judge, dict):
        return None
    return " ".join(str(judge.get(k)) for k in ("name", "model") if judge.get(k))


def heard_anything(wer: float) -> bool:
    """Whether a probe heard words: a WER below 1.0 (an empty or all-wrong transcript is 1.0 or more)."""
    return wer < 1.0


def text_use_sentence(run: RunDir) -> str | None:
    """In words: does the model use its text? The newest text gain (evaluation or probe) says
    whether dropping the text costs loss; only the probe says whether words come out: a model
    that speaks noise can show a positive gain (an untrained F5 import measured +0.026), so
    without a probe that heard words the verdict is "cannot tell" or "not yet"."""
    found = []
    for kind, key, what in (("eval", "text_gain", "validation"), ("probe", "probe_text_gain", "probe sentences")):
        steps, values = run.series(kind, key)
        if steps:
            found.append((steps[-1], values[-1], what, key))
    if not found:
        return None
    step, gain, what, key = max(found)
    if gain <= 0:
        return (f"The model does not use its text yet: at step {step} its EMA loss without text is not above the "
                f"loss with text ({key} = {gain:.4g} on the {what}). Until this gain turns positive the samples "
                "carry voice but no words.")
    gained = f"at step {step} dropping the text raises its EMA loss by {gain:.4g} ({key}, {what})"
    probe_steps, wer = run.series("probe", "probe_wer")
    if not probe_steps:
        return (f"Cannot tell whether the model says its words: {gained}, but a positive text gain alone is also "
                "measured on models that speak noise; only a probe that hears the words shows it "
                "(Trainer.probe = @Probe()), or listen to the samples.")
    heard = [(w, s) for s, w in zip(probe_steps, wer, strict=True) if heard_anything(w)]
    if not heard:
        return (f"The model does not say its words yet: {gained}, but no probe heard words (WER >= 1.0 at all "
                f"{len(probe_steps)} probes, the latest at step {probe_steps[-1]}).")
    best, at = min(heard)
    return f"The model uses its text: {gained}, and the probe hears its words (WER {best:.3f} at step {at})."


def ceiling_curves(run: RunDir, metric: str, span: list[int]) -> list[Curve]:
    """The two ceilings of probe ``metric`` (wer, sim, dnsmos) as flat lines over ``span``,
    the recorded one solid and the vocoded one dashed on top of it, so equal ceilings both
    show (the dash gaps reveal the line below); each label carries its value."""
    curves = []
    raw = _ceiling(run, f"probe_truth_raw_{metric}")
    vocoded = _ceiling(run, f"probe_truth_vocoded_{metric}")
    if raw is not None:
        curves.append(Curve(f"ground truth, recorded ({raw:.3f})", span, [raw, raw]))
    if vocoded is not None:
        same = " = recorded" if raw is not None and round(raw, 3) == round(vocoded, 3) else ""
        curves.append(Curve(f"ground truth through the vocoder ({vocoded:.3f}{same})", span, [vocoded, vocoded],
                            dashed=True))
    return curves


def _probe_folder(folder: Path) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
    """``(summary, records)`` of a probe folder (``summary.json`` and ``results.jsonl``,
    `flowkit.train.probe.outputs`), or of one that keeps its sentences in ``sentences.json``
    (``segment_id``/``reference`` for ``utt``/``text``); None when neither reads."""
    try:
        summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
        lines = (folder / "results.jsonl").read_text(encoding="utf-8").splitlines()
        return summary, [json.loads(line) for line in lines if line.strip()]
    except (OSError, ValueError):
        pass
    try:
        doc = json.loads((folder / "sentences.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    rows = [{**row, "utt": row.get("segment_id", ""), "text": row.get("reference", "")}
            for row in doc.get("sentences", []) if isinstance(row, dict)]
    return doc, rows


def _sentences(folder: Path, label: str, prefix: str) -> list[Any]:
    found = _probe_folder(folder)
    if found is None or not isinstance(found[0], dict):
        return []
    doc, sentences = found
    values = doc.get("values") if isinstance(doc.get("values"), dict) else {}
    wer = values.get("probe_wer")
    # a sentence is heard when its hypothesis holds a word: "." alone (a recogniser's answer to noise) is not
    hyps = [str(x.get("hypothesis") or "") for x in sentences]
    hyps = [h if any(c.isalnum() for c in h) else "" for h in hyps]
    if label == "Best" and ((isinstance(wer, (int, float)) and not heard_anything(wer)) or not any(hyps)):
        # the first probe is always kept as the best one: it is no best while nothing was heard
        shown = f"{wer:.3f}" if isinstance(wer, (int, float)) else "unknown"
        return [Note(f"Best probe: no probe heard words yet (the best kept, at step {doc.get('step')}, has WER "
                     f"{shown} and {sum(1 for h in hyps if h)} of {len(hyps)} sentences heard).")]
    title = (f"{label} probe (step {doc.get('step')}, WER {wer:.3f})" if isinstance(wer, (int, float))
             else f"{label} probe")
    rows, blocks = [], []
    judged = [key for key in ("wer", "sim", "dnsmos") if any(isinstance(s.get(key), (int, float)) for s in sentences)]
    for k, s in enumerate(sentences):
        unheard = "(no recogniser)" if "asr" in s and s.get("asr") is None else "(nothing heard)"
        rows.append([s.get("utt", ""), s.get("text", ""), s.get("hypothesis") or unheard,
                     *(f"{s[key]:.3f}" if isinstance(s.get(key), (int, float)) else "-" for key in judged)])
        audio = folder / str(s.get("audio", ""))
        if s.get("audio") and audio.is_file():
            blocks.append(SampleBlock(
                title=f"{label}: {s.get('utt')}",
                caption=f'reference "{s.get("text")}" — heard "{s.get("hypothesis") or ""}" '
                        f'(prompt {s.get("prompt") or "none"}, step {doc.get("step")})',
                figures=[],
                audios=[(f"generated, step {doc.get('step')}",
                         Audio(audio.read_bytes(), f"{prefix}probe-{label.lower()}-{k + 1}.wav"))],
            ))
    header = ["segment", "reference", "hypothesis",
              *({"wer": "WER", "sim": "SIM to prompt", "dnsmos": "DNSMOS OVRL"}[k] for k in judged)]
    return [Note(title), Table(header, rows), *blocks]


def intelligibility_blocks(run: RunDir, prefix: str = "") -> list[Any]:
    """The blocks of the intelligibility section ([] when the run has neither probe nor text gain)."""
    blocks: list[Any] = []
    steps, wer = run.series("probe", "probe_wer")
    if steps:
        span = [steps[0], max(steps[-1], steps[0] + 1)]
        curves = [Curve("probe WER (EMA)", steps, wer), *ceiling_curves(run, "wer", span)]
        png = curves_png("probe WER and its ceilings", "WER", curves)
        blocks.append(Figure("probe WER over steps, with the ground-truth ceilings", png, f"{prefix}probe_wer.png"))
        vocoded = _ceiling(run, "probe_truth_vocoded_wer")
        heard = [w for w in wer if heard_anything(w)]
        line = f"Probe WER: latest {wer[-1]:.3f} (step {steps[-1]}), "
        if heard:
            best = min(heard)
            line += f"best {best:.3f} (step {steps[wer.index(best)]})"
        else:
            line += f"no probe heard words yet (WER >= 1.0 at all {len(wer)} probes)"
        if vocoded:
            ratio = f" (best / ceiling = {min(heard) / vocoded:.2f}x)" if heard else ""
            line += f"; ground truth through the vocoder {vocoded:.3f}{ratio}"
        raw = _ceiling(run, "probe_truth_raw_wer")
        if raw is not None:
            line += f"; recorded ground truth {raw:.3f}"
        blocks.append(Note(line + "."))
    for key, label, axis, name in JUDGED:
        steps_j, values = run.series("probe", f"probe_{key}")
        if not steps_j:
            continue
        span = [steps_j[0], max(steps_j[-1], steps_j[0] + 1)]
        curves = [Curve(f"probe {label} (EMA)", steps_j, values), *ceiling_curves(run, key, span)]
        ceilings = []
        for which, what in (("vocoded", "ground truth through the vocoder"), ("raw", "ground truth, recorded")):
            value = _ceiling(run, f"probe_truth_{which}_{key}")
            if value is not None:
                ceilings.append(f"{what} {value:.3f}")
        png = curves_png(f"probe {label} and its ceilings", axis, curves)
        blocks.append(Figure(f"probe {label} over steps, with the ground-truth ceilings", png, f"{prefix}{name}.png"))
        blocks.append(Note(f"Probe {label}: latest {values[-1]:.3f} (step {steps_j[-1]}), best {max(values):.3f} "
                           f"(step {steps_j[values.index(max(values))]})"
                           + (f"; {'; '.join(ceilings)}" if ceilings else "") + "."))
    judges = judges_sentence(run)
    if judges:
        blocks.append(Note(judges))
    gain_curves = [Curve(label, *run.series(kind, key)) for kind, key, label in (
        ("eval", "text_gain", "text_gain (validation)"),
        ("probe", "probe_text_gain", "probe_text_gain (probe sentences)"))]
    if any(c.steps for c in gain_curves):
        png = curves_png("text gain: EMA loss without text minus with text", "loss difference", gain_curves)
        blocks.append(Figure("text gain over steps (above zero: the model uses its text)", png,
                             f"{prefix}text_gain.png"))
    sentence = text_use_sentence(run)
    if sentence:
        blocks.append(Note(sentence))
    for sub, label in (("best", "Best"), ("latest", "Latest")):
        blocks.extend(_sentences(run.path / "probe" / sub, label, prefix))
    return blocks
