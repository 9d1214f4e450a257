"""tools/adapt_data.py: held-out clips never reach the training metadata, the test list pairs
held-out prompts with held-out targets and with the recipe's own sentences."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parents[2] / "tools" / "adapt_data.py"


def _tool():
    spec = importlib.util.spec_from_file_location("adapt_data", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.corpus
def test_held_out_clips_are_never_trained_on(corpus_dir: Path, tmp_path: Path) -> None:
    tool = _tool()
    assert tool.main([str(corpus_dir), str(tmp_path), "--speaker", "allison", "--language", "es",
                      "--heldout", "20"]) == 0
    split = json.loads((tmp_path / "split.json").read_text())
    train_ids = [line.split("|")[0] for line in (tmp_path / "train" / "metadata.csv").read_text().splitlines()]
    assert len(split["heldout"]) == 20 and not set(split["heldout"]) & set(train_ids)
    assert len(train_ids) == 130 and all("_es_" in i for i in train_ids)
    assert 5 < split["train_minutes"] < 8
    lines = [line.split("|") for line in (tmp_path / "heldout.lst").read_text().splitlines()]
    clips, sentences = [x for x in lines if len(x) == 5], [x for x in lines if len(x) == 4]
    assert len(clips) == 10 and len(sentences) == len(tool.SENTENCES["es"])
    held = {Path(p).stem for x in lines for p in x[2::2]}
    assert held <= set(split["heldout"])  # every prompt and target is a held-out clip
    assert all(Path(x[2]).is_file() for x in lines)
    with pytest.raises(SystemExit):
        tool.main([str(corpus_dir), str(tmp_path / "x"), "--speaker", "allison", "--language", "de"])


@pytest.mark.corpus
def test_replay_draws_the_bases_own_clips(corpus_dir: Path, tmp_path: Path) -> None:
    manifest = tmp_path / "base" / "manifest.jsonl"
    manifest.parent.mkdir()
    manifest.write_text("".join(json.dumps({"id": f"joe_{i:04d}", "audio": f"wavs/joe_{i:04d}.wav", "text": "a"}) + "\n"
                                for i in range(50)))
    tool = _tool()
    args = [str(corpus_dir), str(tmp_path / "a"), "--speaker", "allison", "--language", "en",
            "--replay", str(manifest), "--replay-clips", "12"]
    assert tool.main(args) == 0
    chosen = (tmp_path / "a" / "replay.lst").read_text().split()
    assert len(set(chosen)) == 12 and chosen == sorted(chosen) and all(c.startswith("joe_") for c in chosen)
    assert json.loads((tmp_path / "a" / "split.json").read_text())["replay"]["of"] == 50
    assert tool.main(args) == 0 and (tmp_path / "a" / "replay.lst").read_text().split() == chosen  # seeded
    for bad in (["--replay-clips", "51"], ["--replay-clips", "0"]):
        with pytest.raises(SystemExit):
            tool.main([*args[:-2], *bad])
