#!/usr/bin/env bash
# What `make demo` runs: flowkit's first run, on recordings bundled with the package.
#   1. flowkit prepare: the 16 recorded sentences of flowkit/demo/sentences into OUT/sentences.zarr
#   2. flowkit align train gin/align.gin: a learned aligner on those sentences and the 150 bundled
#      demo clips (flowkit/demo/asterisk5_demo.zarr), in OUT/aligner
#   3. flowkit align write: its unit timings become the sentences' timings
#   4. flowkit train gin/demo.gin: a small model learns to say the sentences, in OUT/run; the probe
#      synthesises them at the end and Whisper transcribes them
#   5. flowkit report: OUT/run/report.html plays the samples beside their transcripts and WER
# Every stage continues where a killed run stopped, or finds its work done (rerun the same command).
#
#   tools/demo.sh [OUT] [-b BINDING]...      # OUT defaults to runs/demo; bindings go to flowkit train
#   ALIGN_STEPS=150 tools/demo.sh /tmp/demo -b "Trainer.steps = 6"    # tests/docs/test_demo.py's size
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
OUT="${1:-runs/demo}"
[ $# -gt 0 ] && shift
FLOWKIT="${FLOWKIT:-$REPO/.venv/bin/flowkit}"
ALIGN_ARGS=(${ALIGN_STEPS:+--steps "$ALIGN_STEPS"})
STORE="$OUT/sentences.zarr"

if [ ! -f "$STORE/zarr.json" ]; then
  "$FLOWKIT" prepare "$REPO/flowkit/demo/sentences" --layout id,text,speaker,language,split \
    --align energy --out "$STORE" --quiet
fi
if [ ! -d "$STORE/timings/learned" ]; then   # written already: nothing left to align
  "$FLOWKIT" align train "$REPO/gin/align.gin" --data "$STORE" --data "$REPO/flowkit/demo/asterisk5_demo.zarr" \
    --out "$OUT/aligner" "${ALIGN_ARGS[@]}"
  "$FLOWKIT" align write "$STORE" --run "$OUT/aligner"
fi
if ls "$OUT"/run/checkpoints/step-* >/dev/null 2>&1; then
  "$FLOWKIT" resume "$OUT/run"
else
  "$FLOWKIT" train "$REPO/gin/demo.gin" --data "$STORE" --out "$OUT/run" "$@"
fi
"$FLOWKIT" report "$OUT/run"
