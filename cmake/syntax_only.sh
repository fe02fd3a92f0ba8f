#!/bin/sh
# Compiler launcher of the per-header self-containment check (tests/CMakeLists.txt, policytrain_header_check):
# runs the compile command with -fsyntax-only (the full front end, template instantiation included, no code
# generation: about a third less time per header) and then leaves the empty object file the build expects.
# The dependency file (-MD -MF) is written as usual, so a header's check reruns only when what it includes changes.
# The arguments may start with another launcher (ccache, tests/CMakeLists.txt): it caches the -fsyntax-only compile.
set -e
out=
prev=
for a in "$@"; do
  [ "$prev" = "-o" ] && out=$a
  prev=$a
done
# A precompiled header of the target (policytrain_header_check's <torch/torch.h>) is compiled for real: the checks
# read it.
case $out in
  *.gch|*.pch) exec "$@" ;;
esac
"$@" -fsyntax-only
[ -n "$out" ] && : > "$out"
