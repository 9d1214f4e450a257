"""The modern-English held-out list of tools/speak_cpu.sh: tools/modern_english.txt said with the
prompts of a teacher corpus's heldout.lst, in the Seed-TTS meta.lst format (no target recording).

    python tools/modern_list.py CORPUS/heldout.lst CORPUS/manifest.jsonl OUT/modern.lst

Prompt paths are written relative to OUT's folder's corpus as heldout.lst has them, made absolute
here so the list works from anywhere. A sentence that the training manifest also holds (compared
as flowkit's scorer normalises text) is refused: the list must be disjoint from training.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

SENTENCES = Path(__file__).with_name("modern_english.txt")


def sentences() -> list[str]:
    lines = SENTENCES.read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("heldout", type=Path, help="the teacher corpus's heldout.lst (its prompts are reused)")
    parser.add_argument("manifest", type=Path, help="the training manifest.jsonl (checked disjoint)")
    parser.add_argument("out", type=Path, help="the list to write")
    args = parser.parse_args(argv)
    from flowkit.judges.normalise import normalise_for_scoring

    prompts = []
    for line in args.heldout.read_text(encoding="utf-8").splitlines():
        fields = line.split("|")
        if len(fields) >= 3:
            prompts.append((fields[1], str((args.heldout.parent / fields[2]).resolve())))
    if not prompts:
        print(f"error: {args.heldout} has no meta.lst lines to take prompts from", file=sys.stderr)
        return 2
    train = {normalise_for_scoring(json.loads(line)["text"], "en")
             for line in args.manifest.read_text(encoding="utf-8").splitlines() if line.strip()}
    lines = []
    for k, text in enumerate(sentences()):
        if normalise_for_scoring(text, "en") in train:
            print(f"error: modern sentence {k + 1} is in the training manifest: {text!r}", file=sys.stderr)
            return 2
        prompt_text, prompt_wav = prompts[k % len(prompts)]
        lines.append("|".join([f"modern-{k:04d}", prompt_text, prompt_wav, text]))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{args.out}: {len(lines)} modern sentences, prompts from {args.heldout}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
