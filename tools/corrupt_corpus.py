"""Make a corrupted copy of a real corpus, with the truth, and score a curation against it.

``make``: reads an LJSpeech-style folder (``metadata.csv`` ``id|text|speaker|language`` +
``wavs/``) and writes ``OUT/metadata.csv``, ``OUT/wavs/`` and ``OUT/truth.jsonl``. The
source is only read: untouched clips are symbolic links to its files. Chosen from the
seed, disjoint:

- ``swap``: a share of clips (default 10 %) whose transcripts are exchanged in pairs,
  each pair within one language (a misaligned corpus exchanges lines of one script);
- ``noise``: a share (default 5 %) with white Gaussian noise added at ``--snr`` dB
  (default 0) against the clip's active speech level (its 10 ms frames above -50 dBFS),
  the mix scaled down, never clipped, where it would exceed full scale;
- ``relabel``: a share (default 3 %) given another speaker of the corpus as label.

Clips the source itself marks as silence (ids with ``_silence``) are kept as they are and
counted apart (``source_silence``): they are the corpus's own defect, not a corruption.

``score``: reads ``truth.jsonl`` and a curation's ``decisions.jsonl`` and prints the
confusion table per corruption kind (found = dropped) and which criterion found each.

Usage:
    python tools/corrupt_corpus.py make ../shared/data/asterisk-5voice --out /tmp/corrupt [--seed 0]
    flowkit curate /tmp/corrupt --out /tmp/corrupt-curation
    python tools/corrupt_corpus.py score /tmp/corrupt /tmp/corrupt-curation [--markdown]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

KINDS = ("swap", "noise", "relabel")


def _read_metadata(folder: Path) -> list[list[str]]:
    rows = []
    for line in (folder / "metadata.csv").read_text(encoding="utf-8").splitlines():
        if line.strip():
            rows.append(line.split("|"))
    return rows


def _audio_file(folder: Path, sid: str) -> Path:
    for suffix in (".flac", ".wav"):
        if (folder / "wavs" / f"{sid}{suffix}").is_file():
            return folder / "wavs" / f"{sid}{suffix}"
    raise SystemExit(f"error: {folder}/wavs has no audio file for {sid}")


def add_noise(audio: np.ndarray, sample_rate: int, snr_db: float, rng: np.random.Generator) -> np.ndarray:
    """``audio [samples]`` plus white Gaussian noise ``snr_db`` below its active speech level
    (10 ms frames above -50 dBFS); scaled down to peak 0.99 where the mix would exceed it."""
    hop = sample_rate // 100
    n = max(1, audio.size // hop)
    power = np.mean(audio[: n * hop].astype(np.float64).reshape(n, hop) ** 2, axis=1)
    active = power[10 * np.log10(power + 1e-12) + 3.0103 > -50.0]
    speech_power = float(np.mean(active)) if active.size else float(np.mean(power))
    noise = rng.standard_normal(audio.size)
    noise *= np.sqrt(speech_power / 10 ** (snr_db / 10) / np.mean(noise ** 2))
    mix = audio.astype(np.float64) + noise
    peak = float(np.max(np.abs(mix)))
    return (mix * (0.99 / peak if peak > 0.99 else 1.0)).astype(np.float32)


def make(source: Path, out: Path, seed: int, shares: dict[str, float], snr_db: float) -> None:
    import soundfile as sf

    rows = _read_metadata(source)
    if any(len(r) < 4 for r in rows):
        raise SystemExit(f"error: {source}/metadata.csv: every line needs id|text|speaker|language")
    if out.exists() and any(out.iterdir()):
        raise SystemExit(f"error: --out {out} exists and is not empty; give a new folder")
    (out / "wavs").mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    silence = {r[0] for r in rows if "_silence" in r[0]}
    pool = [i for i, r in enumerate(rows) if r[0] not in silence]
    order = list(rng.permutation(pool))
    counts = {k: int(round(shares[k] * len(rows))) for k in KINDS}
    counts["swap"] -= counts["swap"] % 2
    kind_of: dict[int, str] = {}
    # swaps: pairs within a language, texts that differ
    by_language: dict[str, list[int]] = defaultdict(list)
    for i in order:
        by_language[rows[i][3]].append(i)
    swapped: list[tuple[int, int]] = []
    languages = sorted(by_language)
    while len(swapped) * 2 < counts["swap"]:
        lang = languages[int(rng.integers(len(languages)))]
        free = [i for i in by_language[lang] if i not in kind_of]
        if len(free) < 2:
            continue
        a = free[0]
        b = next((j for j in free[1:] if rows[j][1].strip().lower() != rows[a][1].strip().lower()), None)
        if b is None:
            continue
        kind_of[a] = kind_of[b] = "swap"
        swapped.append((a, b))
    rest = [i for i in order if i not in kind_of]
    for i in rest[: counts["noise"]]:
        kind_of[i] = "noise"
    for i in rest[counts["noise"]: counts["noise"] + counts["relabel"]]:
        kind_of[i] = "relabel"
    texts = {i: rows[i][1] for i in range(len(rows))}
    truth: dict[int, dict] = {}
    for a, b in swapped:
        texts[a], texts[b] = rows[b][1], rows[a][1]
        truth[a] = {"detail": f"text of {rows[b][0]}"}
        truth[b] = {"detail": f"text of {rows[a][0]}"}
    speakers = sorted({r[2] for r in rows})
    labels = {i: rows[i][2] for i in range(len(rows))}
    for i, kind in kind_of.items():
        if kind == "relabel":
            others = [s for s in speakers if s != rows[i][2]]
            labels[i] = others[int(rng.integers(len(others)))]
            truth[i] = {"detail": f"labelled {labels[i]}, spoken by {rows[i][2]}"}
    lines, records = [], []
    for i, r in enumerate(rows):
        src = _audio_file(source, r[0])
        dst = out / "wavs" / src.name
        kind = kind_of.get(i, "source_silence" if r[0] in silence else "none")
        if kind == "noise":
            audio, sr = sf.read(str(src), dtype="float32", always_2d=True)
            noisy = add_noise(audio.mean(axis=1), sr, snr_db, np.random.default_rng([seed, i]))
            dst = dst.with_suffix(".flac")
            sf.write(str(dst), noisy, sr, format="FLAC", subtype="PCM_16")
            truth[i] = {"detail": f"white noise at {snr_db:g} dB SNR"}
        else:
            os.symlink(os.path.relpath(src.resolve(), dst.parent), dst)
        lines.append("|".join([r[0], texts[i], labels[i], *r[3:]]))
        records.append({"segment_id": r[0], "corruption": kind, **truth.get(i, {})})
    (out / "metadata.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (out / "truth.jsonl").write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in records),
                                     encoding="utf-8")
    made = Counter(x["corruption"] for x in records)
    print(f"wrote {out}: {len(rows)} clips; " + ", ".join(f"{k} {made[k]}" for k in (*KINDS, "source_silence", "none")))


def score(corrupted: Path, curation: Path, markdown: bool) -> dict:
    truth = {json.loads(x)["segment_id"]: json.loads(x) for x in
             (corrupted / "truth.jsonl").read_text(encoding="utf-8").splitlines() if x.strip()}
    decisions = {json.loads(x)["segment_id"]: json.loads(x) for x in
                 (curation / "decisions.jsonl").read_text(encoding="utf-8").splitlines() if x.strip()}
    missing = sorted(set(truth) - set(decisions))
    if missing:
        raise SystemExit(f"error: {curation}/decisions.jsonl lacks {len(missing)} clips of the truth "
                         f"(e.g. {missing[0]}); let the curation finish")
    table: dict[str, dict] = {}
    for sid, t in truth.items():
        kind = t["corruption"]
        row = table.setdefault(kind, {"clips": 0, "dropped": 0, "by": Counter()})
        row["clips"] += 1
        d = decisions[sid]
        if not d["keep"]:
            row["dropped"] += 1
            for reason in d["reasons"]:
                row["by"][reason.split(":", 1)[0]] += 1
    corrupted_kinds = [k for k in KINDS if k in table]
    found = sum(table[k]["dropped"] for k in corrupted_kinds)
    total = sum(table[k]["clips"] for k in corrupted_kinds)
    summary = {"table": {k: {**v, "by": dict(v["by"])} for k, v in table.items()},
               "corrupted_found": found / total if total else None,
               "clean_dropped": table["none"]["dropped"] / table["none"]["clips"] if "none" in table else None}
    sep = "|" if markdown else " "
    print(sep.join(["kind", "clips", "dropped", "share", "found by (criterion: clips)"]))
    if markdown:
        print("|".join(["---"] * 5))
    for kind in (*KINDS, "source_silence", "none"):
        if kind in table:
            v = table[kind]
            by = ", ".join(f"{c} {n}" for c, n in v["by"].most_common())
            print(sep.join([kind, str(v["clips"]), str(v["dropped"]), f"{v['dropped'] / v['clips']:.1%}", by or "-"]))
    languages = {line.split("|")[0]: line.split("|")[3] for line in
                 (corrupted / "metadata.csv").read_text(encoding="utf-8").splitlines() if line.count("|") >= 3}
    for kind in corrupted_kinds:
        per: dict[str, list[int]] = {}
        for sid, t in truth.items():
            if t["corruption"] == kind:
                row = per.setdefault(languages.get(sid, "?"), [0, 0])
                row[0] += 1
                row[1] += not decisions[sid]["keep"]
        print(f"{kind} by language: " + ", ".join(f"{lang} {d}/{n}" for lang, (n, d) in sorted(per.items())))
    print(f"corrupted clips found: {found}/{total} = {summary['corrupted_found']:.1%}; clean clips dropped: "
          f"{table['none']['dropped']}/{table['none']['clips']} = {summary['clean_dropped']:.1%}")
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("make", help="write the corrupted copy and truth.jsonl")
    m.add_argument("source", type=Path)
    m.add_argument("--out", type=Path, required=True)
    m.add_argument("--seed", type=int, default=0)
    m.add_argument("--swap", type=float, default=0.10, help="share of clips whose transcripts are swapped in pairs")
    m.add_argument("--noise", type=float, default=0.05, help="share of clips with noise added")
    m.add_argument("--relabel", type=float, default=0.03, help="share of clips labelled with another speaker")
    m.add_argument("--snr", type=float, default=0.0, help="SNR of the added noise, dB")
    s = sub.add_parser("score", help="the confusion table of a curation of the copy")
    s.add_argument("corrupted", type=Path)
    s.add_argument("curation", type=Path)
    s.add_argument("--markdown", action="store_true")
    args = parser.parse_args(argv)
    if args.command == "make":
        shares = {"swap": args.swap, "noise": args.noise, "relabel": args.relabel}
        bad = [f"--{k} {v}" for k, v in shares.items() if not 0.0 <= v <= 1.0]
        if bad or sum(shares.values()) > 1.0:
            parser.error(f"shares must lie in [0, 1] and add up to at most 1 ({', '.join(bad) or 'sum > 1'})")
        if not (args.source / "metadata.csv").is_file():
            parser.error(f"{args.source}: no metadata.csv there; give an LJSpeech-style folder")
        make(args.source, args.out, args.seed, shares, args.snr)
    else:
        score(args.corrupted, args.curation, args.markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
