"""console logger: plain lines at the configured cadence when stdout is not a terminal."""

from __future__ import annotations

from flowkit.loggers.progress import ConsoleLogger
from flowkit.registry import get


def test_plain_lines_by_default_for_every_record(tmp_path, capsys):
    logger = ConsoleLogger()
    logger.open(tmp_path, resumed=False, total_steps=30, start_step=0)
    for step in (10, 20, 30):
        logger.log({"kind": "train", "step": step, "loss": 0.5})
    logger.close()
    train = [line for line in capsys.readouterr().out.splitlines() if line.startswith("train ")]
    assert [line.split()[1] for line in train] == ["10/30", "20/30", "30/30"]


def test_plain_lines_every_n_records(tmp_path, capsys):
    logger = ConsoleLogger(every=2)  # records come every 10 steps here: a line per 20
    logger.open(tmp_path, resumed=False, total_steps=100, start_step=0)
    for step in range(10, 101, 10):
        logger.log({"kind": "train", "step": step, "loss": 0.5, "lr": 1e-4, "frames_per_s": 1234.0})
    logger.log({"kind": "eval", "step": 100, "val_loss_ema": 0.25})
    logger.log({"kind": "event", "step": 100, "event": "checkpoint", "message": "saved"})
    logger.log({"kind": "event", "step": 100, "event": "skipped_nonfinite", "what": "loss"})
    logger.close()
    lines = capsys.readouterr().out.splitlines()
    train = [line for line in lines if line.startswith("train ")]
    assert [line.split()[1] for line in train] == [
        "20/100",
        "40/100",
        "60/100",
        "80/100",
        "100/100",
    ]
    assert "loss 0.5" in train[0] and "lr 0.0001" in train[0] and "frames/s 1234" in train[0]
    assert any(line.startswith("eval step 100: val loss ema 0.25") for line in lines)
    assert "step 100: checkpoint saved" in lines
    assert "step 100: skipped_nonfinite  what loss" in lines


def test_best_val_loss_shown_after_eval(tmp_path, capsys):
    logger = ConsoleLogger(every=1)
    logger.open(tmp_path, resumed=True, total_steps=10, start_step=4)
    logger.log({"kind": "eval", "step": 4, "val_loss_ema": 0.3})
    logger.log({"kind": "eval", "step": 4, "val_loss_ema": 0.4})
    logger.log({"kind": "train", "step": 5, "loss": 0.1})
    logger.close()
    out = capsys.readouterr().out
    assert "resume 5/10" in out and "best val 0.3" in out


def test_registered():
    assert get("logger", "console").obj is ConsoleLogger


def test_best_val_loss_from_train_record(tmp_path, capsys):
    logger = ConsoleLogger(every=1)
    logger.open(tmp_path, resumed=True, total_steps=10, start_step=4)
    logger.log({"kind": "train", "step": 5, "loss": 0.1, "best_val_loss": 0.2})
    logger.close()
    assert "best val 0.2" in capsys.readouterr().out
