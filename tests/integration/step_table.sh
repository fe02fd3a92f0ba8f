#!/usr/bin/env bash
# scripts/steps.sh prints the table of step times at exit, a failing step included (its exit status in the table,
# the script's status unchanged).
set -u
root=$1
out=$(bash -c "set -e; source '$root/scripts/steps.sh'; POLICYTRAIN_STEPS_TITLE=demo; step first true; step second sleep 1; step third false; step never true" 2>&1)
rc=$?
echo "$out"
fail() { echo "step_table: $*"; exit 1; }
[ "$rc" = 1 ] || fail "exit status $rc, expected 1 (the failing step's)"
# The title names the CPU that took the times (lscpu's model name), its cores and its vector extensions.
cpu=$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')
echo "$out" | grep -qF "== step times (demo; $cpu, $(nproc) cores" || fail "no table title naming the CPU ($cpu)"
echo "$out" | grep -Eq '^\| first \| 0 \| 0 \|$' || fail "no row for the first step"
echo "$out" | grep -Eq '^\| second \| [12] \| 0 \|$' || fail "the second step's row does not show its second"
echo "$out" | grep -Eq '^\| third \| 0 \| 1 \|$' || fail "the failing step's row does not show its status"
echo "$out" | grep -q '| never |' && fail "a step after the failure ran"
echo "$out" | grep -Eq '^\| total \| [12] \| \|$' || fail "no total row"
echo "step_table: ok"
