#!/usr/bin/env bash
# Set up (or refresh) flowkit's virtual environment in .venv: torch, flowkit with its dev
# extras, and the example plugin package. Safe to re-run; a second run only checks.
#
#   FLOWKIT_TORCH   the torch requirement to install first. Default torch==2.13.0: on these
#                   CPU machines pip takes that CPU build from local disk, while an unpinned
#                   torch could pull a multi-GB CUDA build. On a GPU machine set it to your
#                   CUDA build (e.g. FLOWKIT_TORCH="torch==2.13.0+cu128" with its index).
#   PYTHON          the interpreter that creates the venv (default python3).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"

# espeak-ng: the phonemizer backend of the text.phonemes front end (a Debian package, no
# pip wheel). Installed when missing and apt-get is usable (root); else text.phonemes says how.
if ! command -v espeak-ng >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "setup: installing espeak-ng (apt)"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq espeak-ng >/dev/null) \
      || echo "setup: espeak-ng not installed; text.phonemes will not work until it is"
  else
    echo "setup: espeak-ng is missing (install it, e.g. apt-get install espeak-ng) for text.phonemes"
  fi
fi
TORCH="${FLOWKIT_TORCH:-torch==2.13.0}"

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $($PYTHON --version)"
  "$PYTHON" -m venv .venv
fi
PIP=(.venv/bin/python -m pip --disable-pip-version-check -q)

stamp=.venv/.flowkit-setup
want="$(cat pyproject.toml plugins/*/pyproject.toml | sha256sum | cut -c1-16) $TORCH"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && .venv/bin/python -c "import flowkit, torch" 2>/dev/null; then
  echo "setup: .venv is up to date"
  exit 0
fi

echo "setup: installing $TORCH"
"${PIP[@]}" install "$TORCH"
echo "setup: installing flowkit[dev] and the example plugin (plugins/flowkit-tsamplers)"
"${PIP[@]}" install -e ".[dev]"
"${PIP[@]}" install --no-deps -e plugins/flowkit-tsamplers
# resemblyzer (the eval extra) declares the `typing` backport of Python 3.4's era; in a venv it
# can shadow the standard library's typing for other users. Python >= 3.5 ships its own.
if .venv/bin/python -m pip show -q typing >/dev/null 2>&1; then
  "${PIP[@]}" uninstall -y typing
fi
echo "$want" > "$stamp"
echo "setup: done ($(.venv/bin/python -c 'import torch; print("torch", torch.__version__)'))"
