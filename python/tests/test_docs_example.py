"""The Python example of docs/embedding.md runs as written, in a workspace."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "embedding.md"


def test_the_embedding_example_runs(workspace):
    section = DOC.read_text().split("## Python", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    done = subprocess.run([sys.executable, "-c", code], cwd=workspace, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("0 ok\n")
    assert "+built" in done.stdout
    assert (workspace / "out.txt").read_text() == "built\n"
