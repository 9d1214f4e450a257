"""Timings of a whole store from a trained aligner run, written as a new timings version.

For each segment: the aligner's log attention (without the training prior), monotonic
alignment search through it, each token's frames, and each word's frames (the tokens'
sums). A segment gets no timings, and a line in the store's ``rejections.jsonl`` with the
reason, when no honest alignment exists:

- ``align_text_too_long``: more tokens than frames (no path gives each token a frame);
- ``align_no_words``: no word of the text encodes to a token;
- ``align_stretched``: a token holds more than ``max_token_s`` seconds (a pause token more
  than ``max_pause_s``): the text does not fit the audio;
- ``align_squeezed``: more than ``max_single_frame_share`` of the word tokens hold a single
  frame: no phoneme lasts one frame, so the aligner does not know this speech (another
  recording domain or language than it was trained on) and crammed the tokens together;
- ``align_low_confidence``: the mean log attention along the path is far below the
  store's own (median - ``confidence_mads`` x MAD): another language, another text,
  silence or noise.

Shape legend: b batch, n frames, nt tokens.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import torch

from flowkit.align.corpus import AlignCorpus, collate, load_corpus
from flowkit.align.search import maximum_path
from flowkit.align.settings import LearnedAligner
from flowkit.align.tokens import pause_id
from flowkit.align.training import RUN_KIND, build_network
from flowkit.console import Progress
from flowkit.errors import CheckpointError, DataError

__all__ = ["AlignOutcome", "Settings", "align_store", "load_aligner", "phone_timings", "refusal"]


@attrs.frozen
class Settings:
    """When a segment's alignment is refused (see the module docstring)."""

    max_token_s: float = 1.0  # a phoneme or character held longer than this is a stretched alignment
    max_pause_s: float = 4.0  # a pause longer than this (leading or trailing silence included)
    # trained aligners give at most ~25 % one-frame tokens (stress marks); one that does not know the speech, over 50 %
    max_single_frame_share: float = 0.4
    confidence_mads: float = 6.0  # refused below the median confidence minus this many MADs
    batch_frames: int = 20_000  # padded frames per forward pass


@attrs.frozen
class SegmentAlignment:
    """One segment's result: word ``units`` (None when refused, with ``reason``), token
    edges ``[nt + 1]`` in frames, and the path's mean log attention (``confidence``)."""

    units: tuple[tuple[int, int, int, int], ...] | None
    edges: tuple[int, ...]
    confidence: float
    reason: str = ""


@attrs.frozen
class AlignOutcome:
    """What `align_store` did: the version written, its counts, and each segment's result."""

    name: str
    aligned: int
    refused: dict[str, int]
    results: dict[str, SegmentAlignment]
    corpus: AlignCorpus
    vocab: Any
    checkpoint: Path


def load_aligner(run: Path) -> tuple[torch.nn.Module, Any, dict[str, Any], Path]:
    """The network, vocabulary and meta of an aligner run's newest valid checkpoint (or of a checkpoint folder).

    Raises:
        CheckpointError: no valid checkpoint, or the run is not an aligner run.
    """
    from flowkit.checkpoints.files import find_latest, load_checkpoint
    from flowkit.text.vocabs import vocab_from_state_dict

    path = Path(run)
    if not path.exists():
        raise CheckpointError(f"--run {run}: no such aligner run (train one with `flowkit align train gin/align.gin "
                              "--data STORE --out RUN`)")
    if (path / "checkpoints").is_dir():
        latest, _ = find_latest(path / "checkpoints")
        if latest is None:
            raise CheckpointError(f"--run {run}: no valid checkpoint yet; rerun its `flowkit align train` command")
        path = latest
    ckpt = load_checkpoint(path)
    if ckpt.meta.get("kind") != RUN_KIND:
        raise CheckpointError(f"--run {run}: not an aligner run (a TTS run?); give the --out of `flowkit align train`")
    vocab = vocab_from_state_dict(ckpt.meta["vocab"])
    model = build_network(LearnedAligner(**ckpt.meta["aligner"]), vocab, int(ckpt.meta["latent_dim"]))
    try:
        model.load_state_dict(ckpt.state["model"])
    except RuntimeError as exc:  # weights of another network than its meta describes
        first = str(exc).splitlines()[1].strip() if len(str(exc).splitlines()) > 1 else str(exc)
        raise CheckpointError(f"{ckpt.path}: its weights do not fit the aligner its meta describes ({first}); "
                              "retrain the aligner with this flowkit") from None
    model.eval()
    return model, vocab, ckpt.meta, ckpt.path


def _batches(order: Sequence[int], n_frames: np.ndarray, budget: int) -> list[list[int]]:
    out: list[list[int]] = []
    current: list[int] = []
    for i in order:  # ascending length: a batch's padding is small
        if current and (len(current) + 1) * int(n_frames[i]) > budget:
            out.append(current)
            current = []
        current.append(i)
    if current:
        out.append(current)
    return out


def align_corpus(model: torch.nn.Module, corpus: AlignCorpus, vocab: Any, frame_rate: float,
                 settings: Settings = Settings(), progress: bool = True) -> dict[str, SegmentAlignment]:
    """Every segment's `SegmentAlignment` (refusals included), by segment id."""
    results: dict[str, SegmentAlignment] = {}
    n_frames, n_tokens = corpus.n_frames, corpus.n_tokens
    usable = corpus.alignable()
    for i in np.setdiff1d(np.arange(len(corpus.tokens)), usable).tolist():
        reason = "align_no_words" if not corpus.tokens[i].words else "align_text_too_long"
        results[corpus.segment_ids[i]] = SegmentAlignment(None, (), float("nan"), reason)
    pause = pause_id(vocab)
    order = usable[np.argsort(n_frames[usable], kind="stable")].tolist()
    found: dict[int, tuple[np.ndarray, float]] = {}
    with torch.no_grad(), Progress("align", len(order), unit="segments", plain_every=500, enabled=progress) as bar:
        for index in _batches(order, n_frames, settings.batch_frames):
            batch = collate(corpus, index)
            log_attn = model(batch.tokens, batch.token_mask, batch.latents, batch.frame_mask)
            path = maximum_path(log_attn, batch.n_tokens, batch.n_frames)  # [b nt n]
            score = (log_attn * path.transpose(1, 2)).sum((1, 2)) / batch.n_frames
            for k, i in enumerate(index):
                found[i] = (path[k, : n_tokens[i]].sum(-1).numpy(), float(score[k]))
            bar.update(len(index))
    confidences = np.array([c for _, c in found.values()])
    median = float(np.median(confidences)) if len(confidences) else 0.0
    mad = float(np.median(np.abs(confidences - median))) if len(confidences) else 0.0
    floor = median - settings.confidence_mads * max(mad, 1e-3)
    for i, (durations, confidence) in found.items():
        tokens = corpus.tokens[i]
        edges = tuple(int(e) for e in np.concatenate([[0], np.cumsum(durations)]))
        reason = refusal(durations, np.array(tokens.ids) == pause, frame_rate, settings)
        if not reason and confidence < floor:
            reason = "align_low_confidence"
        units = None if reason else tokens.word_frames(durations)
        results[corpus.segment_ids[i]] = SegmentAlignment(units, edges, confidence, reason)
    return results


def refusal(durations: np.ndarray, is_pause: np.ndarray, frame_rate: float, settings: Settings = Settings()) -> str:
    """Why a path of frames per token ``durations [nt]`` (``is_pause`` bool ``[nt]``;
    ``frame_rate`` in frames per second) is no honest alignment: ``"align_stretched"``,
    ``"align_squeezed"`` or ``""`` (see the module docstring)."""
    words = durations[~is_pause]
    if (float(words.max(initial=0)) / frame_rate > settings.max_token_s
            or float(durations[is_pause].max(initial=0)) / frame_rate > settings.max_pause_s):
        return "align_stretched"
    if words.size and float(np.mean(words <= 1)) > settings.max_single_frame_share:
        return "align_squeezed"
    return ""


def version_fingerprint(prepare_fingerprint: str, arrays: dict[str, np.ndarray]) -> str:
    """sha256 of the store's prepare fingerprint and the version's arrays (little-endian bytes)."""
    h = hashlib.sha256(bytes.fromhex(prepare_fingerprint))
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(name.encode() + a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes())
    return h.hexdigest()


def align_store(store: Path, run: Path, *, name: str = "learned", settings: Settings = Settings(),
                progress: bool = True) -> AlignOutcome:
    """Align every segment of ``store`` with the aligner ``run`` and write the timings as
    version ``name`` (made active); refusals go to the store's ``rejections.jsonl``.

    Raises:
        CheckpointError: ``run`` is not a trained aligner run.
        DataError: the store cannot be read, its latents are not the aligner's (another
            encoder or dimension), a bad version name, or no segment aligned (nothing written).
    """
    from flowkit.data.store import StoreReader
    from flowkit.data.store.format import REJECTIONS_FILE
    from flowkit.data.store.timings import Timings, check_name, write_version
    from flowkit.io import atomic_write_text

    check_name(name)
    model, vocab, meta, checkpoint = load_aligner(run)
    reader = StoreReader.open(store)
    try:
        n, frame_rate, latent_dim = reader.n_segments, reader.frame_rate, reader.latent_dim
        prepare_fp = reader.attrs.get("prepare_fingerprint", reader.attrs["fingerprint"])
        ids = list(reader.strings["segment_id"])
    finally:
        reader.close()
    if latent_dim != int(meta["latent_dim"]):
        raise DataError(f"{store}: latents of {latent_dim} channels, the aligner {run} reads {meta['latent_dim']}; "
                        "train an aligner on this store")
    corpus, _, _ = load_corpus([store], vocab, meta["stats"], progress=progress)
    results = align_corpus(model, corpus, vocab, frame_rate, settings, progress)
    source_name = f"aligner.learned:{Path(run).resolve().name}@{checkpoint.name}"
    per_segment = []
    for sid in ids:
        result = results.get(sid)
        per_segment.append(None if result is None else result.units)
    if not any(per_segment):
        counts = {}
        for result in results.values():
            counts[result.reason] = counts.get(result.reason, 0) + 1
        raise DataError(f"{store}: the aligner {run} aligned none of its {n} segments (refused: "
                        f"{', '.join(f'{k} {v}' for k, v in sorted(counts.items()))}); nothing was written: train it "
                        "longer, or with more speech of the language beside this store (docs/alignment.md)")
    source = [1 if u else 0 for u in per_segment]
    timings = Timings.from_segments(per_segment, source, [True] * n)
    info = {"aligner": "aligner.learned", "run": str(Path(run).resolve()), "checkpoint": str(checkpoint),
            "estimated": True, "confidence_median": float(np.nanmedian([r.confidence for r in results.values()]))
            if results else None}
    refused: dict[str, int] = {}
    lines = []
    for sid in ids:
        result = results.get(sid)
        if result is not None and result.reason:
            refused[result.reason] = refused.get(result.reason, 0) + 1
            lines.append(json.dumps({"segment_id": sid, "reason": result.reason, "stage": f"align write {name}",
                                     "confidence": (None if np.isnan(result.confidence)
                                                    else round(result.confidence, 4))}))
    rejections = Path(store) / REJECTIONS_FILE
    kept = [line for line in (rejections.read_text(encoding="utf-8").splitlines() if rejections.exists() else [])
            if f'"stage": "align write {name}"' not in line]
    atomic_write_text(rejections, "".join(line + "\n" for line in [*kept, *lines]))
    write_version(Path(store), name, timings, ["", source_name], info,
                  version_fingerprint(prepare_fp, timings.arrays()))
    aligned = sum(1 for u in per_segment if u)
    return AlignOutcome(name, aligned, refused, results, corpus, vocab, checkpoint)


def phone_timings(outcome: AlignOutcome) -> dict[str, list[tuple[int, int, str]]]:
    """Each aligned segment's tokens inside its words as ``(frame_start, frame_end, symbol)``
    (pause tokens left out): the aligner's phone-level timings, for scoring."""
    out: dict[str, list[tuple[int, int, str]]] = {}
    corpus = outcome.corpus
    for i, sid in enumerate(corpus.segment_ids):
        result = outcome.results.get(sid)
        if result is None or result.units is None:
            continue
        tokens = corpus.tokens[i]
        phones = []
        for _, _, ts, te in tokens.words:
            for k in range(ts, te):
                phones.append((result.edges[k], result.edges[k + 1], outcome.vocab.decode([tokens.ids[k]])))
        out[sid] = phones
    return out
