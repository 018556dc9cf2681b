"""`pip install ./python` into a venv, then `import pulsebox` from it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

PYTHON_DIR = Path(__file__).resolve().parents[1]


def test_pip_install_in_a_venv_then_import(tmp_path):
    # A copy: setuptools builds in the source tree, and the repository stays as it was.
    source = tmp_path / "src"
    shutil.copytree(PYTHON_DIR, source, ignore=shutil.ignore_patterns(
        "tests", "__pycache__", "build", "*.egg-info", ".pytest_cache"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True,
                   timeout=120)
    install = subprocess.run([str(venv / "bin" / "pip"), "install", "--no-build-isolation",
                              "--no-index", "--quiet", str(source)],
                             capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert install.returncode == 0, install.stdout + install.stderr
    probe = subprocess.run([str(venv / "bin" / "python"), "-c",
                            "import pulsebox, sys; print(pulsebox.__file__); print(pulsebox.Sandbox.__name__)"],
                           capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert probe.returncode == 0, probe.stderr
    location, name = probe.stdout.split()
    assert location.startswith(str(venv)) and name == "Sandbox"
