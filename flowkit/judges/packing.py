"""Several short clips through one Whisper window: the layout and who said which word.

Whisper's encoder reads a fixed 30 s window whatever the clip's length (Radford et al. 2022,
sec. 2.2), so a 2 s prompt costs as much as 30 s of speech, and on a CPU the encoder is most of
tiny.en's time on such a prompt. Judging a corpus of prompts against their transcripts,
`pack_windows` lays several clips in one window with ``gap_s`` of silence between them,
Whisper transcribes the window, and `split_by_text` gives each clip the words that the
word-level edit alignment of the window's words to the clips' transcripts (joined in window
order) places on it. The text decides the split, not when a word was heard: a word late
across the gap still lands on its own clip, no word timestamps are decoded, and 1 s gaps
serve (figures: docs/performance.md, "Curation"). A clip whose transcript is another
sentence's gets that sentence's edits whichever neighbour it sits beside; a caller that
acts on a clip's words checks the suspicious ones alone
(`flowkit.curation.criteria.transcript`).

A clip's words then depend on its neighbours in the window: the layout is a function of the
clips' order and lengths only, so the same clips in the same order give the same words.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["pack_windows", "packed_audio", "split_by_text"]


def pack_windows(seconds: Sequence[float], *, gap_s: float, window_s: float) -> list[list[int]]:
    """Clip indices per window, in order: each window holds consecutive clips whose lengths
    plus a ``gap_s`` between neighbours fit in ``window_s``; a clip longer than ``window_s``
    is a window of its own.

    Raises:
        ValueError: ``gap_s`` < 0 or ``window_s`` <= 0.
    """
    if gap_s < 0 or window_s <= 0:
        raise ValueError(f"pack_windows: gap_s = {gap_s} must be >= 0 and window_s = {window_s} > 0")
    windows: list[list[int]] = []
    length = 0.0
    for i, s in enumerate(seconds):
        if windows and windows[-1] and length + gap_s + float(s) <= window_s:
            windows[-1].append(i)
            length += gap_s + float(s)
        else:
            windows.append([i])
            length = float(s)
    return windows


def packed_audio(clips: Sequence[np.ndarray], sample_rate: int,
                 gap_s: float) -> tuple[np.ndarray, list[tuple[float, float]]]:
    """``(audio [samples], spans)``: ``clips`` (each ``[samples]`` float32) joined with
    ``gap_s`` of zeros between neighbours, and each clip's ``(start_s, end_s)`` in it."""
    gap = np.zeros(int(round(gap_s * sample_rate)), dtype=np.float32)
    parts: list[np.ndarray] = []
    spans = []
    position = 0
    for i, x in enumerate(clips):
        if i:
            parts.append(gap)
            position += gap.size
        spans.append((position / sample_rate, (position + x.size) / sample_rate))
        parts.append(np.asarray(x, dtype=np.float32))
        position += x.size
    return (np.concatenate(parts) if parts else np.zeros(0, np.float32)), spans


def split_by_text(hypothesis: str, references: Sequence[str], language: str = "en") -> list[str]:
    """Each clip's words of a window's ``hypothesis``: the words (normalised as scoring
    normalises them, `flowkit.judges.normalise`) aligned to the clips' own ``references``
    joined in window order, by the word-level edit alignment the WER counts (jiwer).

    A hypothesis word matched or substituted for a reference word goes to that word's clip;
    words inserted inside a clip go to it; words inserted between two clips are shared, the
    first half (rounded up) to the clip before. Languages written without spaces
    (`flowkit.judges.scoring.UNSEGMENTED_LANGUAGES`) are aligned by characters. With no
    reference word every word goes to the first clip; returns ``len(references)`` strings.
    """
    import jiwer

    from flowkit.judges.normalise import normalise_for_scoring
    from flowkit.judges.scoring import UNSEGMENTED_LANGUAGES

    lang = (language or "en").split("-")[0]
    by_character = lang in UNSEGMENTED_LANGUAGES

    def tokens(text: str) -> list[str]:
        text = normalise_for_scoring(text, language)
        return list(text.replace(" ", "")) if by_character else text.split()

    ref_words: list[str] = []
    owner: list[int] = []
    for k, reference in enumerate(references):
        words = tokens(reference)
        ref_words += words
        owner += [k] * len(words)
    hyp_words = tokens(hypothesis)
    out: list[list[str]] = [[] for _ in references]
    if not references:
        return []
    if not ref_words or not hyp_words:
        out[0] = hyp_words
    else:
        chunks = jiwer.process_words(" ".join(ref_words), " ".join(hyp_words)).alignments[0]
        for chunk in chunks:
            if chunk.type in ("equal", "substitute"):
                for h, r in zip(range(chunk.hyp_start_idx, chunk.hyp_end_idx),
                                range(chunk.ref_start_idx, chunk.ref_end_idx), strict=True):
                    out[owner[r]].append(hyp_words[h])
            elif chunk.type == "insert":
                words = hyp_words[chunk.hyp_start_idx:chunk.hyp_end_idx]
                at = chunk.ref_start_idx
                before = owner[at - 1] if at > 0 else owner[at]
                after = owner[at] if at < len(owner) else before
                half = (len(words) + 1) // 2 if after != before else len(words)
                out[before] += words[:half]
                out[after] += words[half:]
    joiner = "" if by_character else " "
    return [joiner.join(words) for words in out]
