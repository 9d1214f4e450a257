"""The sample path reads top to bottom: tools/trace_path.py follows `sample_blocks` of a
real tiny run and counts its stays, climbs and returns.

The parts are built once from the checkpoint meta and handed down, so the path is 20 stays
in 14 rooms with 4 climbs back up; the bars below hold it there, so a change that makes the
path wander (more stays or climbs) fails here and says where.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

MAX_STAYS = 20  # docs/concepts.md lists the stays
MAX_CLIMBS = 4


@pytest.fixture(scope="module")
def tracer():
    spec = importlib.util.spec_from_file_location("trace_path", REPO / "tools" / "trace_path.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["trace_path"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory, tracer) -> Path:
    if not (REPO / "gin" / "debug.gin").is_file():
        pytest.skip("gin/debug.gin is missing")
    return tracer.tiny_run(tmp_path_factory.mktemp("trace") / "run")


def test_the_sample_path_reads_top_to_bottom(tracer, tiny_run: Path) -> None:
    blocks, steps = tracer.trace_samples(tiny_run)
    counts = tracer.count(steps)
    path = tracer.render_path(steps)
    assert blocks and type(blocks[0]).__name__ == "SampleBlock", path
    assert counts.stays <= MAX_STAYS and counts.climbs <= MAX_CLIMBS, f"{counts.summary()}\n{path}"
    # the model is built in one place, from the checkpoint's meta; the vocabulary in one call
    assert [s.module for s in steps if s.function == "build"] == ["flowkit.model.dit"], path
    assert {s.module for s in steps if s.module.startswith("flowkit.text.")} == {"flowkit.text.vocabs"}, path


def test_the_counts_see_a_wandering_path(tracer) -> None:
    """The counter itself can fail: down, back up, and into a room already left."""
    Step = tracer.Step
    steps = [Step("flowkit.report.samples", "a", 0), Step("flowkit.checkpoints.files", "b", 1),
             Step("flowkit.synth.inference", "c", 1), Step("flowkit.checkpoints.files", "d", 2)]
    counts = tracer.count(steps)
    assert (counts.stays, counts.rooms, counts.climbs, counts.returns) == (4, 3, 1, 1)


def test_a_call_site_is_followed_once_and_depth_is_bounded(tracer) -> None:
    from flowkit.text.vocabs import encode_text

    class Vocab:
        def encode(self, text: str) -> list[int]:
            return [len(text)]

    def many() -> None:
        for _ in range(5):
            encode_text(Vocab(), "ab")

    _, steps = tracer.trace_calls(many, depth=2)
    # `many` is not flowkit code: its first flowkit call is the root of the path
    assert [(s.module, s.function) for s in steps] == [("flowkit.text.vocabs", "encode_text")]


MAX_STEP_ROOMS = 19  # the step path's files (tools/trace_path.py --step), docs/concepts.md


def test_the_step_path_stays_in_its_files(tracer, tmp_path: Path) -> None:
    """`flowkit train` to the first optimizer step opens at most MAX_STEP_ROOMS flowkit files
    (two module boundaries below `train`), and the cut lands on the update: the training
    loop's `train_step` is on the path, nothing after it is."""
    steps = tracer.trace_step(tmp_path / "run")
    counts = tracer.count(steps)
    path = tracer.render_path(steps)
    assert counts.rooms <= MAX_STEP_ROOMS, f"{counts.summary()}\n{path}"
    assert steps[-1].module == "flowkit.train.loop" and "train_step" in [s.function for s in steps], path
    assert "save" not in [s.function for s in steps if s.module == "flowkit.checkpoints.files"], path
