#!/bin/sh
# Creates (once) a virtual environment with one package from PyPI, and prints its python: TensorBoard reads the
# event files in the tests, matplotlib draws the effect plots. --system-site-packages keeps the machine's torch
# visible. pip's output goes to DIR.log (shown on failure).
# Usage: py_venv.sh DIR MODULE REQUIREMENT   e.g. py_venv.sh build/venv-tensorboard tensorboard "tensorboard>=2.12"
# REQUIREMENT may name several, separated by spaces. (torchvision has a script of its own: torchvision_venv.sh.)
set -eu
venv="$1" module="$2" requirement="$3" site=--system-site-packages
if ! "$venv/bin/python" -c "import $module" >/dev/null 2>&1; then
  python3 -m venv $site "$venv" >"$venv.log" 2>&1 || { cat "$venv.log"; exit 1; }
  # shellcheck disable=SC2086 # several requirements, split on spaces
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check $requirement >>"$venv.log" 2>&1 \
    || { cat "$venv.log"; exit 1; }
fi
"$venv/bin/python" -c "import $module, sys; print(sys.executable, '$module', $module.__version__)"
