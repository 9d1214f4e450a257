"""The comparison table of tools/adapt_voice.sh: each arm's eval on the held-out list (WER,
CER, SIM to the prompt, DNSMOS), its trainable parameters and checkpoint size, and the
recordings' ceilings (the held-out targets judged as the generated audio is).

    python tools/adapt_table.py OUT BASE      # OUT/evals/<arm>/summary.json, OUT/<arm>/
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ARMS = ("base", "full", "full-avg", "lora", "lora-avg")


def _fmt(value: object, digits: int = 3) -> str:
    return f"{value:.{digits}f}" if isinstance(value, (int, float)) else "-"


def _newest_checkpoint(run: Path) -> Path | None:
    for folder in (run / "checkpoints", run):
        found = sorted(folder.glob("step-*")) if folder.is_dir() else []
        if found:
            return found[-1]
    return None


def _size_and_params(out: Path, arm: str, base: Path) -> tuple[str, str]:
    """(checkpoint MB, trainable parameters) of an arm's newest checkpoint."""
    if arm == "base":
        run = base
    elif arm.endswith("-avg"):
        found = sorted((out / arm[:-4] / "averaged").glob("last*/step-*"))
        run = found[-1] if found else out / "missing"
    else:
        run = out / arm
    path = _newest_checkpoint(run) if not (run / "meta.json").is_file() else run
    if path is None:
        return "-", "-"
    meta = json.loads((path / "meta.json").read_text(encoding="utf-8"))
    size = (path / "state.pt").stat().st_size / 1e6
    record = meta.get("adapter") or meta.get("merged_adapter")  # an average of merged adapters: the adapter's
    if record:
        trained = (f"{record['trainable_parameters']:,} "
                   f"({record['trainable_parameters'] / record['base_parameters']:.1%})")
    else:
        import torch

        state = torch.load(path / "state.pt", map_location="cpu", weights_only=True)
        total = sum(v.numel() for v in state["model"].values() if hasattr(v, "numel") and v.is_floating_point())
        trained = f"{total:,} (all)"
    return f"{size:.1f}", trained


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    out, base = Path(argv[0]), Path(argv[1])
    rows, ceiling, judge = [], None, ""
    for arm in ARMS:
        summary = out / "evals" / arm / "summary.json"
        if not summary.is_file():
            continue
        doc = json.loads(summary.read_text(encoding="utf-8"))
        totals = doc["totals"]
        gen = totals.get("generated") or {}
        ceiling = ceiling or totals.get("truth")
        asr = (doc.get("judges") or {}).get("asr") or {}
        judge = judge or " ".join(str(asr[k]) for k in ("name", "model") if asr.get(k))
        size, params = _size_and_params(out, arm, base)
        rows.append((arm, _fmt(gen.get("wer")), _fmt(gen.get("cer")), _fmt(gen.get("sim")), _fmt(gen.get("dnsmos"), 2),
                     params, size))
    if ceiling:
        rows.append(("recordings (ceiling)", _fmt(ceiling.get("wer")), _fmt(ceiling.get("cer")),
                     _fmt(ceiling.get("sim")), _fmt(ceiling.get("dnsmos"), 2), "-", "-"))
    head = ("arm", "WER", "CER", "SIM", "DNSMOS", "trainable parameters", "checkpoint MB")
    split = out / "data" / "split.json"
    replay = json.loads(split.read_text(encoding="utf-8")).get("replay") if split.is_file() else None
    mix = f"; each arm's data: + {replay['clips']} of the base's {replay['of']} clips (replay)" if replay else ""
    print(f"\nheld-out list of {out / 'data' / 'heldout.lst'}; judge: {judge or '-'}{mix}")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for row in rows:
        print("| " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
