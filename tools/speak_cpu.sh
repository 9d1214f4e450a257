#!/usr/bin/env bash
# Issue 25 end to end, from a clone: a teacher corpus (Piper en_US-joe-medium saying KJV
# sentences, tools/teacher_corpus.py) -> flowkit prepare (the teacher's word timings as
# unit timings) -> flowkit train gin/speak_cpu.gin (or $GIN) -> flowkit eval on the held-out list.
# Leaves the corpus in OUT/corpus/, the store in OUT/data.zarr, the run in OUT/run/ and the
# eval in OUT/run/evals/heldout/ (listed by flowkit report); prints `held-out WER: X` last. Every stage continues
# where a killed run stopped (rerun the same command).
#
#   tools/speak_cpu.sh OUT
#   HOURS=0.05 STEPS=300 HELDOUT=10 tools/speak_cpu.sh OUT      # the small proof
#
# Sizes (env): HOURS (training speech, default 1), STEPS (default: gin/speak_cpu.gin's),
# HELDOUT (held-out sentences, default 50), PROMPTS (default 10), SEED (default 0),
# THREADS (Piper's onnxruntime threads, default 2), PROBE (0 = no probe during training),
# BINDINGS (more -b bindings for flowkit train, separated by ';'), GIN (the experiment,
# default speak_cpu.gin; speak_cpu_f5.gin is the same recipe on the F5 unaligned text path).
set -euo pipefail
if [ $# -ne 1 ]; then
  echo "usage: [HOURS=1] [STEPS=N] [HELDOUT=50] tools/speak_cpu.sh OUT" >&2
  exit 2
fi
REPO="$(cd "$(dirname "$0")/.." && pwd)"
mkdir -p "$1"
OUT="$(cd "$1" && pwd)"
HOURS="${HOURS:-1}"
HELDOUT="${HELDOUT:-50}"
PROMPTS="${PROMPTS:-10}"
SEED="${SEED:-0}"
THREADS="${THREADS:-2}"
PROBE="${PROBE:-1}"
GIN="${GIN:-speak_cpu.gin}"

if [ ! -x "$REPO/.venv/bin/flowkit" ]; then
  "$REPO/tools/setup.sh"
fi
PY="$REPO/.venv/bin/python"
FLOWKIT="$REPO/.venv/bin/flowkit"
cd "$REPO"

stage() { printf '\n== %s (%s)\n' "$1" "$(date -u +%H:%M:%S)"; }
declare -A took
timed() { local name=$1; shift; local t0=$SECONDS; "$@"; took[$name]=$((SECONDS - t0)); }

stage "teacher corpus: $HOURS h, $HELDOUT held-out"
timed corpus "$PY" tools/teacher_corpus.py "$OUT/corpus" --hours "$HOURS" --seed "$SEED" \
  --heldout "$HELDOUT" --prompts "$PROMPTS" --threads "$THREADS"

stage "prepare"
if [ ! -f "$OUT/data.zarr/zarr.json" ]; then
  timed prepare "$FLOWKIT" prepare "$OUT/corpus/manifest.jsonl" --out "$OUT/data.zarr" \
    --textgrids "$OUT/corpus/textgrids" --align energy --quiet
else
  echo "prepare: $OUT/data.zarr exists"; took[prepare]=0
fi

stage "train gin/$GIN"
args=(-b "Probe.audio_dirs = ['$OUT/corpus/wavs']")
[ -n "${STEPS:-}" ] && args+=(-b "Trainer.steps = $STEPS")
[ "$PROBE" = 0 ] && args+=(-b "Trainer.probe = None")
if [ -n "${BINDINGS:-}" ]; then
  IFS=';' read -ra extra <<< "$BINDINGS"
  for b in "${extra[@]}"; do args+=(-b "$b"); done
fi
timed train "$FLOWKIT" train "gin/$GIN" --data "$OUT/data.zarr" --out "$OUT/run" "${args[@]}"

stage "eval on the held-out list"
timed eval "$FLOWKIT" eval "$OUT/run" --testset "$OUT/corpus/heldout.lst" --out "$OUT/run/evals/heldout"

printf '\nstage seconds: corpus %s, prepare %s, train %s, eval %s\n' \
  "${took[corpus]}" "${took[prepare]}" "${took[train]}" "${took[eval]}"
"$PY" - "$OUT/run/evals/heldout" <<'EOF'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
totals = json.loads((out / "summary.json").read_text())["totals"]
gen, truth = totals.get("generated") or {}, totals.get("truth") or {}
def fmt(t, k):
    v = t.get(k)
    return f"{v:.3f}" if isinstance(v, (int, float)) else "-"
asr = json.loads((out / "summary.json").read_text()).get("judges", {}).get("asr") or {}
judge = " ".join(str(asr[k]) for k in ("name", "model", "version") if asr.get(k))
print(f"teacher (ceiling) WER: {fmt(truth, 'wer')}  SIM: generated {fmt(gen, 'sim')}, teacher {fmt(truth, 'sim')}"
      + (f"  (judge: {judge})" if judge else ""))
print(f"held-out WER: {fmt(gen, 'wer')}")
EOF
