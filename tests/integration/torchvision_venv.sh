#!/bin/sh
# Creates (once) the virtual environment of torchvision, the oracle of differential.transforms, and prints its python.
# torchvision from PyPI needs the torch it was built for (torchvision==0.29.1: torch==2.14.1) and does not import
# beside the system's torch. Where the CUDA LibTorch's venv already holds that torch (scripts/setup-cuda,
# $POLICYTRAIN_CUDA_VENV, which .ci/run sets up before the extended tests), this venv sees it through a .pth file and
# installs torchvision, numpy and Pillow alone (about 10 s); elsewhere it installs its own torch (several GB).
# pip's output goes to DIR.log (shown on failure).
# Usage: torchvision_venv.sh DIR
set -eu
venv="$1"
torch_version=2.14.1 requirement="torchvision==0.29.1"
cuda_venv=${POLICYTRAIN_CUDA_VENV:-$HOME/.cache/policytrain/venv-cuda}
if ! "$venv/bin/python" -c "import torchvision" >/dev/null 2>&1; then
  rm -rf "$venv"
  python3 -m venv "$venv" >"$venv.log" 2>&1 || { cat "$venv.log"; exit 1; }
  if [ -x "$cuda_venv/bin/python" ] &&
     [ "$("$cuda_venv/bin/python" -c 'import torch; print(torch.__version__.split("+")[0])' 2>/dev/null)" = "$torch_version" ]; then
    purelib() { "$1" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'; }
    purelib "$cuda_venv/bin/python" >"$(purelib "$venv/bin/python")/policytrain-cuda-torch.pth"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps "$requirement" numpy pillow \
      >>"$venv.log" 2>&1 || { cat "$venv.log"; exit 1; }
  else
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "torch==$torch_version" "$requirement" \
      >>"$venv.log" 2>&1 || { cat "$venv.log"; exit 1; }
  fi
fi
"$venv/bin/python" -c "import sys, torch, torchvision; print(sys.executable, 'torch', torch.__version__, 'torchvision', torchvision.__version__)"
