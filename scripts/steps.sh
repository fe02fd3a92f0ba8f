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
steps_table() {
  local i
  printf '\n== step times (%s)\n| step | wall seconds | exit |\n|---|---|---|\n' "${POLICYTRAIN_STEPS_TITLE:-$(basename "$0")}"
  for i in "${!POLICYTRAIN_STEP_NAMES[@]}"; do
    printf '| %s | %d | %s |\n' "${POLICYTRAIN_STEP_NAMES[$i]}" "${POLICYTRAIN_STEP_SECONDS[$i]}" "${POLICYTRAIN_STEP_STATUS[$i]}"
  done
  printf '| total | %d | |\n' $((SECONDS - POLICYTRAIN_STEPS_T0))
}
trap steps_table EXIT
