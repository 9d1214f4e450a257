"""`evaluate_seeds`: one eval per noise seed, then every figure with its 95 % interval.

``OUT/seed-<s>/`` holds a whole `flowkit.evaluation.run.evaluate` folder per seed (each
resumable on its own, so a killed ``--seeds`` run continues where it stopped); the
recordings' ceilings do not depend on the noise seed and are judged in the first seed's
folder only;
``OUT/seeds.json`` holds, per kind of clip (generated, and the ceilings where judged), each
figure's point estimate and bootstrap interval over utterances and seeds
(``"figures"``, `flowkit.judges.uncertainty`), the tables they were drawn from
(``"tables"``: per kind and figure the utterance ids, the seeds and the ``[u s]`` numerator
and denominator, `flowkit.judges.uncertainty.SeedTable`; a cell not scored is null), with
the protocol the figures depend on: judges (models and versions), NFE, CFG, the solver with
its sway, the vocoder, the seed list and the test list's SHA-256. Two such files are
compared by `flowkit.judges.uncertainty.compare`: a paired test on the tables.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from flowkit.errors import ConfigError
from flowkit.judges.uncertainty import SeedTable, bootstrap, table

__all__ = ["FIGURES", "SEEDS_FILE", "SeedsOutcome", "evaluate_seeds", "seed_figures", "seed_tables"]

SEEDS_FILE = "seeds.json"
#: figure -> (results key, weight key): WER and CER are corpus rates (edits over reference
#: words or characters); the others are means over utterances
FIGURES: dict[str, tuple[str, str | None]] = {
    "wer": ("wer", "words"), "cer": ("cer", "chars"), "sim": ("sim", None), "dnsmos": ("dnsmos", None),
}


@attrs.frozen
class SeedsOutcome:
    """What ``--seeds`` wrote: the folder, the seeds, and ``seeds.json``'s content."""

    out: Path
    seeds: tuple[int, ...]
    summary: dict[str, Any]


def _block(records: Sequence[dict[str, Any]], kind: str) -> dict[str, Any]:
    """The clips of ``kind`` ("generated", "truth", "vocoded") of one seed's records."""
    if kind == "generated":
        return {"records": list(records)}
    return {"records": [{"utt": r["utt"], **r[kind]} for r in records if r.get(kind)]}


def seed_tables(records_by_seed: Sequence[Sequence[dict[str, Any]]],
                seeds: Sequence[int]) -> dict[str, dict[str, SeedTable]]:
    """``{kind: {figure: SeedTable}}`` from each seed's ``results.jsonl`` records (seed
    ``seeds[k]``'s at k): the utterances that every seed holds; the ceilings ("truth",
    "vocoded") from the seeds that judged them; a figure no record scores is left out."""
    import numpy as np

    out: dict[str, dict[str, SeedTable]] = {}
    for kind in ("generated", "truth", "vocoded"):
        blocks = [(s, _block(records, kind)["records"]) for s, records in zip(seeds, records_by_seed, strict=True)]
        if kind != "generated":
            blocks = [(s, b) for s, b in blocks if b]
        if not blocks or not all(b for _, b in blocks):
            continue
        tables = {}
        for name, (key, weight) in FIGURES.items():
            num, den, utts = table([b for _, b in blocks], key, weight)
            if not utts or not np.isfinite(num).any():
                continue
            tables[name] = SeedTable(tuple(utts), tuple(s for s, _ in blocks), num, den)
        if tables:
            out[kind] = tables
    return out


def seed_figures(tables: dict[str, dict[str, SeedTable]], *, seed: int = 0) -> dict[str, Any]:
    """``{kind: {figure: Interval.to_dict()}}``: `bootstrap` of each of `seed_tables`' tables."""
    return {kind: {name: bootstrap(t.numerator, t.denominator, seed=seed).to_dict() for name, t in figures.items()}
            for kind, figures in tables.items()}


def evaluate_seeds(checkpoint: str | Path, testset: str | Path, out: str | Path | None, seeds: Sequence[int], *,
                   settings: Any, **kwargs: Any) -> SeedsOutcome:
    """Run `flowkit.evaluation.run.evaluate` once per seed of ``seeds`` into ``out/seed-<s>/``
    and write ``out/seeds.json`` (module docstring). ``kwargs`` go to ``evaluate``.

    Raises:
        ConfigError: fewer than two seeds, a seed given twice, or no ``out``.
        As `flowkit.evaluation.run.evaluate` raises.
    """
    from flowkit.evaluation.folder import IDENTITY, read_results
    from flowkit.evaluation.run import evaluate
    from flowkit.io import atomic_write_json

    seeds = tuple(int(s) for s in seeds)
    if len(seeds) < 2 or len(set(seeds)) != len(seeds):
        raise ConfigError(f"--seeds: give two or more different seeds, not {list(seeds)}")
    if out is None:
        raise ConfigError("--seeds writes one eval folder per seed under --out DIR; give --out")
    out = Path(out)
    outcomes = [evaluate(checkpoint, testset, out / f"seed-{s}", **kwargs,
                         settings=attrs.evolve(settings, seed=s, ceilings=settings.ceilings and k == 0))
                for k, s in enumerate(seeds)]
    records = [read_results(o.out / "results.jsonl") for o in outcomes]
    identity = json.loads((outcomes[0].out / IDENTITY).read_text(encoding="utf-8"))
    first = outcomes[0].summary
    tables = seed_tables(records, seeds)
    summary = {
        "figures": seed_figures(tables),
        "tables": {kind: {name: t.to_json() for name, t in figures.items()} for kind, figures in tables.items()},
        "protocol": {
            "seeds": list(seeds), "testset": identity.get("testset"), "testset_sha256": identity.get("testset_sha256"),
            "nfe": identity.get("nfe"), "cfg": identity.get("cfg"), "model": first.get("model"),
            "checkpoint": identity.get("checkpoint"), "step": identity.get("step"), "weights": identity.get("weights"),
            "vocoder": identity.get("vocoder"), "judges": identity.get("judges"), "language": identity.get("language"),
            "items": min(len(r) for r in records), "interval": "95 % percentile bootstrap over utterances and seeds",
        },
        "per_seed": {str(s): o.summary.get("totals", {}).get("generated")
                     for s, o in zip(seeds, outcomes, strict=True)},
    }
    atomic_write_json(out / SEEDS_FILE, summary)
    return SeedsOutcome(out, seeds, summary)

