#!/usr/bin/env bash
# Can a CPU-trained model say sentences it never heard? End to end, from a clone: a teacher
# corpus (Piper en_US-joe-medium saying KJV sentences, tools/teacher_corpus.py) -> flowkit
# prepare -> unit timings -> flowkit train gin/speak_cpu.gin (or $GIN) -> flowkit eval on two
# held-out lists: the teacher's KJV sentences (heldout.lst) and modern English sentences
# (tools/modern_english.txt, modern.lst), said with the same prompts.
# Leaves the corpus in OUT/corpus/ (or uses CORPUS), the store in OUT/data.zarr, the run in
# OUT/run/ and the evals in OUT/run/evals/{heldout,modern}/; prints both held-out WERs last.
# Every stage continues where a killed run stopped (rerun the same command).
#
#   tools/speak_cpu.sh OUT                                   # the teacher's own timings
#   TIMINGS=learned tools/speak_cpu.sh OUT                   # timings learned from audio and text alone
#   HOURS=0.05 STEPS=300 HELDOUT=10 tools/speak_cpu.sh OUT   # the small proof
#
# TIMINGS: teacher (default: the TextGrids the teacher's duration predictor gives), learned (the
# TextGrids are withheld: prepare estimates energy timings, `flowkit align train gin/align.gin`
# learns an aligner on the store and `flowkit align write` makes its timings the store's; the
# TextGrids only score them), or energy (aligner.energy's estimates alone).
# Sizes (env): HOURS (training speech, default 1), STEPS (default: gin/speak_cpu.gin's),
# ALIGN_STEPS (default: gin/align.gin's), HELDOUT (held-out sentences, default 50), PROMPTS
# (default 10), SEED (default 0), THREADS (Piper's onnxruntime threads, default 2), PROBE (0 = no
# probe during training), BINDINGS (more -b bindings for flowkit train, separated by ';'), GIN
# (the experiment, default speak_cpu.gin; speak_cpu_f5.gin is the same recipe on the F5 unaligned
# text path), CORPUS (an existing teacher corpus folder to use instead of building OUT/corpus).
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
TIMINGS="${TIMINGS:-teacher}"
case "$TIMINGS" in teacher|learned|energy) ;; *) echo "TIMINGS=$TIMINGS: use teacher, learned or energy" >&2; exit 2;; esac

if [ ! -x "$REPO/.venv/bin/flowkit" ]; then
  "$REPO/tools/setup.sh"
fi
PY="$REPO/.venv/bin/python"
FLOWKIT="$REPO/.venv/bin/flowkit"
cd "$REPO"

stage() { printf '\n== %s (%s)\n' "$1" "$(date -u +%H:%M:%S)"; }
declare -A took
timed() { local name=$1; shift; local t0=$SECONDS; "$@"; took[$name]=$((SECONDS - t0)); }

if [ -n "${CORPUS:-}" ]; then
  CORPUS="$(cd "$CORPUS" && pwd)"; took[corpus]=0
  echo "teacher corpus: $CORPUS (given)"
else
  CORPUS="$OUT/corpus"
  stage "teacher corpus: $HOURS h, $HELDOUT held-out"
  timed corpus "$PY" tools/teacher_corpus.py "$CORPUS" --hours "$HOURS" --seed "$SEED" \
    --heldout "$HELDOUT" --prompts "$PROMPTS" --threads "$THREADS"
fi
"$PY" tools/modern_list.py "$CORPUS/heldout.lst" "$CORPUS/manifest.jsonl" "$OUT/modern.lst"

stage "prepare (timings: $TIMINGS)"
grids=()
[ "$TIMINGS" = teacher ] && grids=(--textgrids "$CORPUS/textgrids")
if [ ! -f "$OUT/data.zarr/zarr.json" ]; then
  timed prepare "$FLOWKIT" prepare "$CORPUS/manifest.jsonl" --out "$OUT/data.zarr" "${grids[@]}" --align energy --quiet
else
  echo "prepare: $OUT/data.zarr exists"; took[prepare]=0
fi
took[align]=0
if [ "$TIMINGS" = learned ]; then
  stage "aligner: train on the store, then write its timings"
  align_args=()
  [ -n "${ALIGN_STEPS:-}" ] && align_args+=(--steps "$ALIGN_STEPS")
  t0=$SECONDS
  "$FLOWKIT" align train gin/align.gin --data "$OUT/data.zarr" --out "$OUT/align" "${align_args[@]}"
  if [ ! -f "$OUT/align/.written" ]; then
    "$FLOWKIT" align write "$OUT/data.zarr" --run "$OUT/align" --reference "$CORPUS/textgrids"
    touch "$OUT/align/.written"
  fi
  took[align]=$((SECONDS - t0))
fi

stage "train gin/$GIN"
args=(-b "Probe.audio_dirs = ['$CORPUS/wavs']")
[ -n "${STEPS:-}" ] && args+=(-b "Trainer.steps = $STEPS")
[ "$PROBE" = 0 ] && args+=(-b "Trainer.probe = None")
if [ -n "${BINDINGS:-}" ]; then
  IFS=';' read -ra extra <<< "$BINDINGS"
  for b in "${extra[@]}"; do args+=(-b "$b"); done
fi
timed train "$FLOWKIT" train "gin/$GIN" --data "$OUT/data.zarr" --out "$OUT/run" "${args[@]}"

stage "eval on the held-out lists"
timed eval "$FLOWKIT" eval "$OUT/run" --testset "$CORPUS/heldout.lst" --out "$OUT/run/evals/heldout"
timed eval_modern "$FLOWKIT" eval "$OUT/run" --testset "$OUT/modern.lst" --out "$OUT/run/evals/modern"

printf '\nstage seconds: corpus %s, prepare %s, align %s, train %s, eval %s + %s\n' \
  "${took[corpus]}" "${took[prepare]}" "${took[align]}" "${took[train]}" "${took[eval]}" "${took[eval_modern]}"
"$PY" - "$OUT/run/evals/heldout" "$OUT/run/evals/modern" <<'EOF'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
modern = json.loads((Path(sys.argv[2]) / "summary.json").read_text())["totals"].get("generated") or {}
totals = json.loads((out / "summary.json").read_text())["totals"]
gen, truth = totals.get("generated") or {}, totals.get("truth") or {}
def fmt(t, k):
    v = t.get(k)
    return f"{v:.3f}" if isinstance(v, (int, float)) else "-"
asr = json.loads((out / "summary.json").read_text()).get("judges", {}).get("asr") or {}
judge = " ".join(str(asr[k]) for k in ("name", "model", "version") if asr.get(k))
print(f"teacher (ceiling) WER: {fmt(truth, 'wer')}  SIM: generated {fmt(gen, 'sim')}, teacher {fmt(truth, 'sim')}"
      + (f"  (judge: {judge})" if judge else ""))
print(f"modern-English held-out WER: {fmt(modern, 'wer')}")
print(f"held-out WER: {fmt(gen, 'wer')}")
EOF
