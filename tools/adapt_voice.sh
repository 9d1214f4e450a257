#!/usr/bin/env bash
# A base model learns a new voice, or a new language, from minutes of recordings; one command
# from a clone. From one speaker's clips of a metadata.csv corpus (default: the shared
# asterisk-5voice corpus, allison in English, ~6.5 min; LANG=es SPEAKER=allison is the new-
# language recipe) it holds out HELDOUT clips, prepares the rest, and compares on the held-out
# list (tools/adapt_data.py: held-out clips as targets of held-out prompts, which give the
# recordings' own ceilings, and sentences written for the recipe):
#
#   base     the base model prompted with the held-out clips (zero-shot)
#   full     a full fine-tune (flowkit init-from BASE ... -b "Trainer.adapter = None")
#   lora     LoRA adapters on the frozen base (gin/adapt_voice.gin's adapter.lora)
#   *-avg    each run's last K checkpoints averaged (flowkit average RUN --last K; LoRA's
#            merged onto the base first, flowkit merge-adapter), K >= 2
#
# every one judged by flowkit eval (Whisper: tiny.en for English, the multilingual base for
# other languages; CER where words are not the unit), then one table: WER, CER, SIM, DNSMOS,
# trainable parameters, checkpoint size, with the recordings' ceilings. Every stage continues
# where a killed run stopped (rerun the same command).
#
#   tools/adapt_voice.sh BASE OUT
#   LANG_CODE=es tools/adapt_voice.sh BASE OUT                  # the new-language recipe
#   STEPS=20 K=2 LIMIT=4 tools/adapt_voice.sh BASE OUT          # a smoke run
#
# BASE: a run directory (tools/speak_cpu.sh's OUT/run, or any flowkit run or import-f5 run);
# each arm trains with the base's own config.gin plus gin/adapt_voice.gin.
# Env: CORPUS, SPEAKER (allison), LANG_CODE (en), HELDOUT (20), STEPS (gin's 600), K (3),
# LORA_LR (1e-3), FULL_LR (2e-4), LIMIT (test lines judged; default all), NFE (eval's default),
# ARMS ("base full lora"), TIMINGS (learned: `flowkit align train` on the clips beside the base's
# training stores, or ALIGN_DATA's, for ALIGN_STEPS (1500), then `align write`; energy:
# aligner.energy's estimates alone, on which a 600-step full fine-tune of a speak_cpu.gin base
# lost its words: held-out WER 0.19 -> 1.19), REPLAY (0: clips of the base's own training corpus
# mixed into every arm's data, so the fine-tune keeps what the base learned of the words while it
# learns the voice), REPLAY_MANIFEST (the base's training manifest; default tools/speak_cpu.sh's
# layout, BASE/../corpus/manifest.jsonl, its TextGrids beside it in textgrids/; a new REPLAY wants
# a new OUT, the replay store is prepared once), AVERAGE (1; 0 leaves out the averaged arms).
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: [LANG_CODE=en] [SPEAKER=allison] [STEPS=N] tools/adapt_voice.sh BASE OUT" >&2
  exit 2
fi
REPO="$(cd "$(dirname "$0")/.." && pwd)"
BASE="$(cd "$1" && pwd)"
mkdir -p "$2"
OUT="$(cd "$2" && pwd)"
CORPUS="${CORPUS:-$REPO/../shared/data/asterisk-5voice}"
SPEAKER="${SPEAKER:-allison}"
LANG_CODE="${LANG_CODE:-en}"
HELDOUT="${HELDOUT:-20}"
K="${K:-3}"
LORA_LR="${LORA_LR:-1e-3}"
FULL_LR="${FULL_LR:-2e-4}"
ARMS="${ARMS:-base full lora}"
TIMINGS="${TIMINGS:-learned}"
ALIGN_STEPS="${ALIGN_STEPS:-1500}"
REPLAY="${REPLAY:-0}"
AVERAGE="${AVERAGE:-1}"
REPLAY_MANIFEST="${REPLAY_MANIFEST:-$BASE/../corpus/manifest.jsonl}"
if [ ! -f "$BASE/config.gin" ]; then
  echo "adapt_voice: $BASE is not a run directory (no config.gin); give a base run, e.g. tools/speak_cpu.sh's OUT/run" >&2
  exit 2
fi
if [ ! -x "$REPO/.venv/bin/flowkit" ]; then
  "$REPO/tools/setup.sh"
fi
PY="$REPO/.venv/bin/python"
FLOWKIT="$REPO/.venv/bin/flowkit"
cd "$REPO"

stage() { printf '\n== %s (%s)\n' "$1" "$(date -u +%H:%M:%S)"; }
declare -A took
timed() { local name=$1; shift; local t0=$SECONDS; "$@"; took[$name]=$((SECONDS - t0)); }

stage "data: $SPEAKER in $LANG_CODE, $HELDOUT held out"
replay_args=()
[ "$REPLAY" -gt 0 ] && replay_args=(--replay "$REPLAY_MANIFEST" --replay-clips "$REPLAY")
"$PY" tools/adapt_data.py "$CORPUS" "$OUT/data" --speaker "$SPEAKER" --language "$LANG_CODE" --heldout "$HELDOUT" \
  "${replay_args[@]}"

stage "prepare"
if [ ! -f "$OUT/data.zarr/zarr.json" ]; then
  # the base's encoder, and word timings where its text path needs them
  timed prepare "$FLOWKIT" prepare "$OUT/data/train" --out "$OUT/data.zarr" --align energy --quiet
else
  echo "prepare: $OUT/data.zarr exists"; took[prepare]=0
fi

stage "timings: $TIMINGS"
if [ "$TIMINGS" = learned ] && [ ! -d "$OUT/data.zarr/timings/learned" ]; then
  # minutes of speech are too little to learn an alignment from: the aligner learns on the
  # target clips beside the base's own training stores (docs/alignment.md, "Minutes of speech")
  align_data=()
  for store in ${ALIGN_DATA:-$("$PY" -c 'import json, sys; print(" ".join(json.load(open(sys.argv[1])).get("stores", [])))' \
                               "$BASE/run_info.json" 2>/dev/null)}; do
    if [ -f "$store/zarr.json" ]; then align_data+=(--data "$store"); fi
  done
  if [ ${#align_data[@]} -eq 0 ]; then
    echo "timings: no store of the base found; the aligner learns on the target clips alone"
  fi
  timed align "$FLOWKIT" align train gin/align.gin "${align_data[@]}" --data "$OUT/data.zarr" --out "$OUT/aligner" \
    --steps "$ALIGN_STEPS"
  timed align_write "$FLOWKIT" align write "$OUT/data.zarr" --run "$OUT/aligner"
fi

arm_data=(--data "$OUT/data.zarr")
if [ "$REPLAY" -gt 0 ]; then
  stage "replay: $REPLAY clips of the base's corpus"
  if [ ! -f "$OUT/replay.zarr/zarr.json" ]; then
    grids=()
    [ -d "$(dirname "$REPLAY_MANIFEST")/textgrids" ] && grids=(--textgrids "$(dirname "$REPLAY_MANIFEST")/textgrids")
    timed prepare_replay "$FLOWKIT" prepare "$REPLAY_MANIFEST" --out "$OUT/replay.zarr" --keep "$OUT/data/replay.lst" \
      "${grids[@]}" --align energy --quiet
  else
    echo "replay: $OUT/replay.zarr exists"
  fi
  arm_data+=(--data "$OUT/replay.zarr")
fi

eval_args=(--testset "$OUT/data/heldout.lst" --language "$LANG_CODE")
[ -n "${LIMIT:-}" ] && eval_args+=(--limit "$LIMIT")
[ -n "${NFE:-}" ] && eval_args+=(--nfe "$NFE")
steps=()
if [ -n "${STEPS:-}" ]; then  # a run of other length: K + 1 saves and evaluations over it, K kept
  every=$(( STEPS / (K + 1) )); [ "$every" -lt 1 ] && every=1
  steps=(--steps "$STEPS" -b "Trainer.save_every = $every" -b "Trainer.eval_every = $every"
         -b "Trainer.keep_last = $(( K > 3 ? K : 3 ))" -b "lr_schedule.warmup_cosine.warmup_updates = $(( STEPS / 10 + 1 ))")
fi

train_arm() {  # name, extra bindings...
  local name=$1; shift
  timed "train_$name" "$FLOWKIT" init-from "$BASE" "$BASE/config.gin" gin/adapt_voice.gin "${arm_data[@]}" \
    --out "$OUT/$name" "${steps[@]}" --device cpu "$@"
}

for arm in $ARMS; do
  case "$arm" in
    base)
      stage "eval: the base, zero-shot"
      if "$PY" -c 'import json, sys; from flowkit.checkpoints.files import resolve_checkpoint as r
sys.exit(0 if sys.argv[2] in json.load(open(r(sys.argv[1]) / "meta.json"))["languages"] else 1)' "$BASE" "$LANG_CODE"; then
        timed eval_base "$FLOWKIT" eval "$BASE" "${eval_args[@]}" --out "$OUT/evals/base"
      else  # a base without the language cannot be asked for it (flowkit eval rejects such lines)
        echo "eval: the base has no language $LANG_CODE; its zero-shot row is left out"
      fi ;;
    full)
      stage "train: full fine-tune"
      train_arm full -b "Trainer.adapter = None" -b "Trainer.lr = $FULL_LR"
      timed eval_full "$FLOWKIT" eval "$OUT/full" "${eval_args[@]}" --out "$OUT/evals/full"
      [ "$AVERAGE" = 0 ] && continue
      timed average_full "$FLOWKIT" average "$OUT/full" --last "$K"
      timed eval_full_avg "$FLOWKIT" eval "$(ls -d "$OUT"/full/averaged/last"$K"/step-* | tail -1)" "${eval_args[@]}" \
        --out "$OUT/evals/full-avg" ;;
    lora)
      stage "train: LoRA"
      train_arm lora -b "Trainer.lr = $LORA_LR"
      timed eval_lora "$FLOWKIT" eval "$OUT/lora" "${eval_args[@]}" --out "$OUT/evals/lora"
      [ "$AVERAGE" = 0 ] && continue
      # adapter checkpoints average as what they are on the base: merged, then averaged
      merged=()
      for ck in $(ls -d "$OUT"/lora/checkpoints/step-* | tail -n "$K"); do
        [ -d "$OUT/lora/merged/$(basename "$ck")" ] || "$FLOWKIT" merge-adapter "$ck" --out "$OUT/lora/merged"
        merged+=("$OUT/lora/merged/$(basename "$ck")")
      done
      timed average_lora "$FLOWKIT" average "${merged[@]}" --out "$OUT/lora/averaged/last$K"
      timed eval_lora_avg "$FLOWKIT" eval "$(ls -d "$OUT"/lora/averaged/last"$K"/step-* | tail -1)" "${eval_args[@]}" \
        --out "$OUT/evals/lora-avg" ;;
    *) echo "adapt_voice: unknown arm $arm (base, full, lora)" >&2; exit 2 ;;
  esac
done

printf '\nstage seconds:'
for name in "${!took[@]}"; do printf ' %s %s,' "$name" "${took[$name]}"; done
printf '\n'
"$PY" tools/adapt_table.py "$OUT" "$BASE"
