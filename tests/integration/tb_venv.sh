#!/bin/sh
# Creates (once) the virtual environment whose TensorBoard reads the event files in the tests, and prints its
# python. --system-site-packages keeps the machine's torch visible. pip's output goes to DIR.log (shown on failure).
# Usage: tb_venv.sh DIR
set -eu
venv="$1"
if ! "$venv/bin/python" -c "import tensorboard" >/dev/null 2>&1; then
  python3 -m venv --system-site-packages "$venv" >"$venv.log" 2>&1 || { cat "$venv.log"; exit 1; }
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "tensorboard>=2.12" >>"$venv.log" 2>&1 \
    || { cat "$venv.log"; exit 1; }
fi
"$venv/bin/python" -c "import tensorboard, sys; print(sys.executable, 'tensorboard', tensorboard.__version__)"
