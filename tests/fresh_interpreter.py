"""Code run in a fresh interpreter, for what a test process cannot show (it has imported everything already)."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def run_python(code: str, *arguments: str) -> str:
    """Run `code` in a fresh interpreter (nothing imported yet; `arguments` in its sys.argv[1:]) and return its
    stdout."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *arguments], capture_output=True, text=True, timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()
