# The two quick-start commands (see README.md) and a few helpers.
.PHONY: setup demo test test-fast lint bench

setup:
	bash tools/setup.sh

# flowkit's first run, on the bundled recordings (under 10 minutes on 2 idle cores): a learned aligner
# finds the timings of 16 recorded sentences, a small model learns to say them (gin/demo.gin),
# and the report plays its samples with their Whisper WER. Run again: each step continues
# where it stopped (after Ctrl-C) or finds its work done.
demo: setup
	bash tools/demo.sh runs/demo

# The whole test suite, slow tests included (what CI runs).
test: setup
	.venv/bin/python -m pytest -n 2 -m "slow or not slow" tests plugins/flowkit-tsamplers/tests

# The quick loop while developing: without the slow tests (kill loops, full-corpus runs).
test-fast: setup
	.venv/bin/python -m pytest -n 2 tests plugins/flowkit-tsamplers/tests

lint: setup
	.venv/bin/ruff check .

bench: setup
	for b in tools/bench_*.py; do .venv/bin/python $$b || exit 1; done
