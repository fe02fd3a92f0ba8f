"""A virtual environment with the PyPI packages a parity test needs, created once (idempotent, quiet), with
--system-site-packages so that the installed torch stays visible. Its directory: $POLICYTRAIN_VENV_DIR, else
~/.cache/policytrain/venv-oracle."""
import os
import subprocess
import sys
from pathlib import Path


def ensure(packages, modules):
    """Re-executes this script under the venv's Python once `modules` import there (installing `packages`)."""
    try:
        for m in modules:
            __import__(m)
        return
    except ImportError:
        pass
    if os.environ.get("POLICYTRAIN_IN_VENV"):
        sys.exit(f"policytrain oracle: {modules} still missing inside the venv {sys.prefix}")
    venv = Path(os.environ.get("POLICYTRAIN_VENV_DIR") or Path.home() / ".cache/policytrain/venv-oracle")
    py = venv / "bin" / "python"
    if not py.exists():
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    probe = subprocess.run([str(py), "-c", "; ".join(f"import {m}" for m in modules)], capture_output=True)
    if probe.returncode != 0:
        subprocess.run([str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *packages],
                       check=True)
    env = dict(os.environ, POLICYTRAIN_IN_VENV="1")
    sys.exit(subprocess.run([str(py), *sys.argv], env=env).returncode)
