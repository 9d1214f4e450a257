"""Run directories for the report tests (helpers; fixtures in conftest.py).

- `write_synthetic_run`: files written directly in the trainer's format (no training), in
  each state a report must handle: completed, interrupted, in progress (live lock, torn
  last line), stopped early, without validation data.
- `logmel_store` / `real_run`: a tiny log-mel store of synthetic tones and a real 4-step
  `gin/debug.gin` run on it (checkpoints the sample and synthesis tests load).
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
DEBUG_GIN = REPO / "gin" / "debug.gin"
WORDS = ("la", "mora", "tie", "sun", "kell")


def _jsonl(path: Path, records: list[dict], *, torn: str = "") -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + torn)


def write_synthetic_run(root: Path, state: str, *, steps: int = 20, total: int = 40, val: bool = True,
                        config_extra: str = "") -> Path:
    """A run directory as the trainer leaves it, in ``state`` (completed | interrupted |
    in_progress | stopped_early); ``val=False`` has no eval records and no best/."""
    root.mkdir(parents=True)
    reached = total if state == "completed" else steps
    records: list[dict] = []
    if val:
        records.append({"kind": "eval", "step": 0, "val_loss": 2.0, "val_loss_ema": 2.0, "val_loss_ema_notext": 2.1,
                        "best_val_loss": 2.0})
    for s in range(2, reached + 1, 2):
        records.append({"kind": "train", "step": s, "loss": 2.0 / (1 + s / 10), "lr": 1e-3 * min(1, s / 8),
                        "grad_norm": 0.5 + 0.01 * s, "frames": 1400, "frames_per_s": 5000.0 + s, "items": 4})
        if val and s % 10 == 0:
            records.append({"kind": "eval", "step": s, "val_loss": 1.9 - s / 100, "val_loss_ema": 1.95 - s / 100,
                            "val_loss_ema_notext": 2.0 - s / 200, "best_val_loss": 1.95 - s / 100})
    if state == "interrupted":
        records.append({"kind": "event", "step": reached, "event": "stopped", "signal": 15})
    torn = '{"kind": "train", "step": 22, "lo' if state == "in_progress" else ""
    _jsonl(root / "metrics.jsonl", records, torn=torn)
    (root / "config.gin").write_text(
        f"Trainer.seed = 0\nTrainer.steps = {total}\nTrainer.lr = 0.001\ndit.preset = 'tiny'\n{config_extra}"
    )
    (root / "heartbeat.json").write_text(json.dumps(
        {"step": reached, "total_steps": total, "time": time.time() - (5 if state == "in_progress" else 3600),
         "pid": os.getpid(), "host": socket.gethostname()}))
    if state == "in_progress":  # held by a live process: this one
        (root / "run.lock").write_text(json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": 0}))
    (root / "run_info.json").write_text(json.dumps({
        "seed": 0, "git_commit": "abc123", "device": "cpu", "num_parameters": 190_000, "data_fingerprint": "f" * 16,
        "load_reports": {
            "train": {"considered": 12, "accepted": 10, "rejected": 2, "rejected_by_reason": {"too_short": 2}},
            "val": {"considered": 3 if val else 0, "accepted": 3 if val else 0, "rejected": 0,
                    "rejected_by_reason": {}},
        },
    }))
    (root / "data_rejections.jsonl").write_text(
        "".join(json.dumps({"split": "train", "segment_id": f"s{i}", "reason": "too_short", "detail": "4 frames"})
                + "\n" for i in range(2)))
    for where, step in [("checkpoints", s) for s in range(10, reached + 1, 10)] + ([("best", reached)] if val else []):
        ckpt = root / where / f"step-{step:08d}"
        ckpt.mkdir(parents=True)
        (ckpt / "meta.json").write_text(json.dumps({"step": step, "counters": {"best_val_loss": 1.5},
                                                     "model_config": {"preset": "tiny", "dim": 64, "depth": 2,
                                                                      "heads": 2, "text_path": "unaligned"},
                                                     "pairing_totals": {"items": 40, "given": 0}}))
        (ckpt / "COMPLETE").write_text("")
    if state == "stopped_early":  # a save cut short by kill -9
        (root / "checkpoints" / f"step-{reached + 5:08d}").mkdir()
    return root


def write_logmel_store(path: Path, *, val: bool = True, seed: int = 0) -> Path:
    """A store of 8 short synthetic tone clips (2 speakers) encoded by ``encoder.log_mel``."""
    from flowkit.data.encoders import LogMel
    from flowkit.data.store import SegmentRecord, StoreWriter

    enc = LogMel()
    rng = np.random.default_rng(seed)
    writer = StoreWriter.create(path, encoder_name="log_mel", encoder_params=enc.params(), frame_rate=enc.frame_rate,
                                sample_rate=enc.sample_rate, latent_dim=enc.latent_dim, latent_dtype="float32")
    for k in range(8):
        words = [WORDS[i] for i in rng.integers(0, len(WORDS), size=2)]
        seconds = 0.4 + 0.05 * k
        t = np.arange(int(seconds * enc.sample_rate)) / enc.sample_rate
        audio = (0.3 * np.sin(2 * np.pi * (180 + 40 * (k % 2)) * t * (1 + 0.3 * t))).astype(np.float32)
        latents = enc.encode(audio)
        writer.add(SegmentRecord(
            segment_id=f"spk{k % 2}_{k:02d}", speaker=f"spk{k % 2}", language="en", emotion="", intensity=float("nan"),
            rate=0, loudness=0, split="val" if (val and k >= 6) else "train", text=" ".join(words),
            latents=latents, units=None,
        ))
    return writer.commit()


