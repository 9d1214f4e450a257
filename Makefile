# The two quick-start commands (see README.md) and a few helpers.
.PHONY: setup demo test test-fast lint bench

setup:
	bash tools/setup.sh

# Train gin/quickstart.gin on the bundled real speech, then write its report.
# Run again, it continues the same run (after Ctrl-C) or finds it complete.
demo: setup
	if ls runs/quickstart/checkpoints/step-* >/dev/null 2>&1; then .venv/bin/flowkit resume runs/quickstart; \
	else .venv/bin/flowkit train gin/quickstart.gin --out runs/quickstart; fi
	.venv/bin/flowkit report runs/quickstart --samples 2

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
