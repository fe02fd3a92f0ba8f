#!/usr/bin/env bash
# Runs every GPU benchmark of bench/gpu and writes OUTDIR/gpu-bench.md (a section for bench/RESULTS.md) and
# OUTDIR/gpu-bench.json; raw results and logs go to OUTDIR/raw/.
#
#   bench/gpu/run_all.sh OUTDIR BUILD_DIR [--smoke] [--device cuda|cpu] [--only amp,loops,loops_py,data,autobatch]
#
# BUILD_DIR is a CMake build of this tree with POLICYTRAIN_BUILD_BENCH=ON in which the target gpu_bench is built.
# Default: the GPU sizes on --device cuda (about 3 minutes on an H100). --smoke: tiny sizes on the CPU and a fake
# NVML (bench/gpu/fake_nvml), checked by report.py (ctest -R bench.gpu.smoke). Python: $POLICYTRAIN_PYTHON, else
# python3 (needs torch; lightning and nvidia-ml-py for the Lightning row and the GPU idle fractions).
# Exit status: 0 when every step succeeded (and, with --smoke, the checks passed); the report is written anyway.
set -u -o pipefail

usage() { sed -n 2,11p "$0" | sed 's/^# \{0,1\}//'; exit 2; }
(($# >= 2)) || usage
OUT=$1 BUILD=$2
shift 2
SMOKE=0 DEVICE=cuda ONLY=amp,loops,loops_py,data,autobatch
while (($#)); do
  case $1 in
    --smoke) SMOKE=1; DEVICE=cpu ;;
    --device) DEVICE=$2; shift ;;
    --only) ONLY=$2; shift ;;
    *) echo "run_all.sh: unknown option '$1'" >&2; usage ;;
  esac
  shift
done

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PY=${POLICYTRAIN_PYTHON:-python3}
BIN=$BUILD/bench/gpu/gpu_bench
if [[ ! -x $BIN ]]; then
  echo "run_all.sh: $BIN not found; configure with -DPOLICYTRAIN_BUILD_BENCH=ON and build it: cmake --build $BUILD --target gpu_bench" >&2
  exit 2
fi
"$PY" -c 'import torch' || { echo "run_all.sh: $PY cannot import torch" >&2; exit 2; }
RAW=$OUT/raw
rm -rf "$RAW"
mkdir -p "$RAW"
OUT=$(cd "$OUT" && pwd) RAW=$OUT/raw

if ((SMOKE)); then
  # Tiny sizes; each timed phase lasts >= 0.3 s so that the fake NVML's 50 ms samples cover it.
  AMP=(--resnet-batch 2 --resnet-size 32 --resnet-width 8 --resnet-classes 10 --gpt-batch 2 --gpt-seq 16 --gpt-d 32
       --gpt-heads 4 --gpt-layers 2 --gpt-vocab 64 --steps 2 --warmup 1 --reps 2 --min-seconds 0.3)
  LOOPS=(--fmnist-batch 16 --mlp-batch 8 --mlp-in 32 --mlp-hidden 32 --fmnist-steps 3 --mlp-steps 5 --warmup 1
         --reps 2 --min-seconds 0.3)
  DATA=(--samples 512 --batch 32 --workers 2 --warmup 1 --reps 2 --min-seconds 0.3)
  AUTOB=(--resnet-size 32 --resnet-width 8 --resnet-classes 10 --resnet-max-batch 64 --fmnist-max-batch 64
         --cpu-budget-mib 64 --cpu-bytes-per-sample 1048576)
  LIMIT_AMP=120 LIMIT_LOOPS=60 LIMIT_PY=120 LIMIT_DATA=60 LIMIT_AUTOB=60
else
  # GPU sizes: ResNet-18 batch 256 at 224x224, GPT-2 small (12 x 768, 12 heads) seq 1024 batch 8; loops >= 2 s.
  AMP=(--steps 5 --warmup 2 --reps 5)
  LOOPS=(--warmup 2 --reps 5 --min-seconds 2)
  DATA=(--workers 4 --warmup 1 --reps 3 --min-seconds 2)
  AUTOB=()
  LIMIT_AMP=120 LIMIT_LOOPS=45 LIMIT_PY=75 LIMIT_DATA=75 LIMIT_AUTOB=75
fi
PY_VARIANTS=python_eager,python_graph,lightning
if ! "$PY" -c 'import lightning' 2>/dev/null; then
  if ((SMOKE)); then
    PY_VARIANTS=python_eager
    echo "run_all.sh: lightning is not installed for $PY; the smoke run skips the Lightning row" >&2
  else
    echo "run_all.sh: WARNING: lightning is not installed for $PY; its row will fail" >&2
  fi
fi

# The NVML sidecar (the fake one in a smoke run).
SAMPLER_PID=
stop_sampler() {
  if [[ -n $SAMPLER_PID ]]; then
    kill -TERM "$SAMPLER_PID" 2>/dev/null
    wait "$SAMPLER_PID"
    SAMPLER_PID=
  fi
}
trap stop_sampler EXIT
if ((SMOKE)); then
  PYTHONPATH="$HERE/fake_nvml${PYTHONPATH:+:$PYTHONPATH}" "$PY" "$HERE/nvml_sampler.py" "$RAW/nvml.json" 0.005 &
  SAMPLER_PID=$!
elif [[ $DEVICE == cuda* ]] && "$PY" -c 'import pynvml; pynvml.nvmlInit()' 2>/dev/null; then
  "$PY" "$HERE/nvml_sampler.py" "$RAW/nvml.json" 0.005 "${POLICYTRAIN_NVML_INDEX:-0}" &
  SAMPLER_PID=$!
else
  echo "run_all.sh: WARNING: no NVML (pip package nvidia-ml-py) for $PY: GPU idle fractions will read n/a" >&2
fi

# step NAME LIMIT_SECONDS COMMAND...: runs one benchmark with a time limit, logs it, records its exit status.
step() {
  local name=$1 limit=$2 start=$SECONDS rc
  shift 2
  [[ ,$ONLY, == *,$name,* ]] || return 0
  echo "== $name (limit ${limit} s)" >&2
  timeout --signal=TERM --kill-after=10 "$limit" "$@" 2>&1 | tee "$RAW/$name.log" >&2
  rc=${PIPESTATUS[0]}
  echo "$name $rc $((SECONDS - start))" >>"$RAW/status.txt"
  echo "== $name: exit $rc after $((SECONDS - start)) s" >&2
}

T0=$SECONDS
step amp "$LIMIT_AMP" "$BIN" amp --device "$DEVICE" --out "$RAW/amp.json" "${AMP[@]}"
step loops "$LIMIT_LOOPS" "$BIN" loops --device "$DEVICE" --out "$RAW/loops_cpp.json" "${LOOPS[@]}"
step loops_py "$LIMIT_PY" "$PY" "$HERE/py_loops.py" --device "$DEVICE" --out "$RAW/loops_py.json" \
  --variants "$PY_VARIANTS" "${LOOPS[@]}"
step data "$LIMIT_DATA" "$BIN" data --device "$DEVICE" --out "$RAW/data.json" --profile-dir "$RAW/profile" "${DATA[@]}"
step autobatch "$LIMIT_AUTOB" "$BIN" autobatch --device "$DEVICE" --out "$RAW/autobatch.json" "${AUTOB[@]}"
stop_sampler
echo "== benchmarks took $((SECONDS - T0)) s" >&2

REPORT_ARGS=()
((SMOKE)) && REPORT_ARGS+=(--smoke)
"$PY" "$HERE/report.py" "$RAW" "$OUT" "${REPORT_ARGS[@]}" >/dev/null
rc=$?
echo "run_all.sh: wrote $OUT/gpu-bench.md and $OUT/gpu-bench.json (report exit $rc)" >&2
exit $rc
