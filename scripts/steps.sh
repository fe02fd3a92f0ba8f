# Sourced by scripts/test and .ci/run: `step NAME COMMAND...` runs a step and records its wall time; at exit (a
# failure included) the table of every step's time is printed, so each log shows where the time went.
POLICYTRAIN_STEP_NAMES=() POLICYTRAIN_STEP_SECONDS=() POLICYTRAIN_STEP_STATUS=()
POLICYTRAIN_STEPS_T0=$SECONDS
step() {
  local name=$1 t0=$SECONDS rc=0
  shift
  echo "== $name"
  "$@" || rc=$?
  POLICYTRAIN_STEP_NAMES+=("$name")
  POLICYTRAIN_STEP_SECONDS+=($((SECONDS - t0)))
  POLICYTRAIN_STEP_STATUS+=("$rc")
  return "$rc"
}
# `step_bg NAME COMMAND...` starts a step in the background, its output kept in a file; `steps_wait` waits for every
# such step, prints each one's output whole and records its time, and fails when one failed. .ci/run pairs a step
# that keeps one core busy (a fuzzer, a differential driver) with another so that the second core works too.
POLICYTRAIN_BG_PIDS=() POLICYTRAIN_BG_NAMES=() POLICYTRAIN_BG_LOGS=() POLICYTRAIN_BG_T0=()
step_bg() {
  local name=$1 log
  shift
  log=$(mktemp "${TMPDIR:-/tmp}/policytrain-step.XXXXXX")
  echo "== $name (in the background; its output follows when it ends)"
  "$@" >"$log" 2>&1 &
  POLICYTRAIN_BG_PIDS+=($!) POLICYTRAIN_BG_NAMES+=("$name") POLICYTRAIN_BG_LOGS+=("$log") POLICYTRAIN_BG_T0+=($SECONDS)
}
steps_wait() {
  local i rc status=0
  for i in "${!POLICYTRAIN_BG_PIDS[@]}"; do
    rc=0
    wait "${POLICYTRAIN_BG_PIDS[$i]}" || rc=$?
    echo "== ${POLICYTRAIN_BG_NAMES[$i]} (ran in the background)"
    cat "${POLICYTRAIN_BG_LOGS[$i]}"
    rm -f "${POLICYTRAIN_BG_LOGS[$i]}"
    POLICYTRAIN_STEP_NAMES+=("${POLICYTRAIN_BG_NAMES[$i]} (background)")
    POLICYTRAIN_STEP_SECONDS+=($((SECONDS - POLICYTRAIN_BG_T0[$i])))
    POLICYTRAIN_STEP_STATUS+=("$rc")
    [ "$rc" = 0 ] || status=$rc
  done
  POLICYTRAIN_BG_PIDS=() POLICYTRAIN_BG_NAMES=() POLICYTRAIN_BG_LOGS=() POLICYTRAIN_BG_T0=()
  return "$status"
}
steps_table() {
  local i
  # The CPU that took these times (the figures of one CPU kind differ 2x from another's: bench/RESULTS.md).
  local cpu flags
  cpu=$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | sed 's/.*: //')
  flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | tr ' ' '\n' | grep -x -E 'avx2|avx512f|avx512_bf16|amx_bf16' | tr '\n' ' ')
  printf '\n== step times (%s; %s, %s cores, %s)\n| step | wall seconds | exit |\n|---|---|---|\n' \
    "${POLICYTRAIN_STEPS_TITLE:-$(basename "$0")}" "${cpu:-CPU unknown}" "$(nproc 2>/dev/null)" "${flags% }"
  for i in "${!POLICYTRAIN_STEP_NAMES[@]}"; do
    printf '| %s | %d | %s |\n' "${POLICYTRAIN_STEP_NAMES[$i]}" "${POLICYTRAIN_STEP_SECONDS[$i]}" "${POLICYTRAIN_STEP_STATUS[$i]}"
  done
  printf '| total | %d | |\n' $((SECONDS - POLICYTRAIN_STEPS_T0))
}
# The table is also appended, with the date, the commit, the CPU and the load, to a log outside the checkout
# (POLICYTRAIN_STEPS_LOG, default ~/.cache/policytrain/steps.log): a run whose output is not kept (a CI run that
# passed) still tells the next developer on the same machine where its time went.
steps_log() {
  local log=${POLICYTRAIN_STEPS_LOG:-${XDG_CACHE_HOME:-$HOME/.cache}/policytrain/steps.log}
  mkdir -p "$(dirname "$log")" 2>/dev/null || return 0
  {
    printf '\n# %s, %s, commit %s, CI=%s, %s, load %s\n' "$(date -u '+%Y-%m-%d %H:%M UTC')" "$PWD" \
      "$(git rev-parse --short HEAD 2>/dev/null || echo none)" "${CI:-}" \
      "$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | sed 's/.*: //')" "$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"
    steps_table
  } >>"$log" 2>/dev/null || true
}
# A run that fails while a background step runs stops it (its output is printed up to there).
steps_stop_bg() {
  local i
  for i in "${!POLICYTRAIN_BG_PIDS[@]}"; do
    pkill -TERM -P "${POLICYTRAIN_BG_PIDS[$i]}" 2>/dev/null; kill "${POLICYTRAIN_BG_PIDS[$i]}" 2>/dev/null || true
    echo "== ${POLICYTRAIN_BG_NAMES[$i]}: stopped, as the run failed; its output so far:"
    cat "${POLICYTRAIN_BG_LOGS[$i]}" 2>/dev/null; rm -f "${POLICYTRAIN_BG_LOGS[$i]}"
  done
}
trap 'steps_stop_bg; steps_table; steps_log' EXIT
