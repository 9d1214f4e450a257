# The two quick-start commands (see README.md) and a few helpers.
.PHONY: setup demo test test-slow lint bench

setup:
	bash tools/setup.sh

# Train gin/quickstart.gin on the bundled real speech, then write its report.
# Run again, it continues the same run (after Ctrl-C) or finds it complete.
demo: setup
	if ls runs/quickstart/checkpoints/step-* >/dev/null 2>&1; then .venv/bin/flowkit resume runs/quickstart; \
	else .venv/bin/flowkit train gin/quickstart.gin --out runs/quickstart; fi
	.venv/bin/flowkit report runs/quickstart --samples 2

# The test suite (what CI runs).
test: setup
	.venv/bin/python -m pytest -n 2 tests plugins/flowkit-tsamplers/tests

test-slow: setup
	.venv/bin/python -m pytest -m slow tests

lint: setup
	.venv/bin/ruff check .

bench: setup
	for b in tools/bench_*.py; do .venv/bin/python $$b || exit 1; done
