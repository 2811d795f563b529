"""A mistake in the command line is answered before torch and the engine load: a mistyped
theorem (with the closest name), a missing trace, plugin or record file, an unwritable output, a
file that is not a run record. Checked in a fresh interpreter by the modules it loaded, not by a
clock."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

MISTAKES = [
    (["check", "--theorem", "fedsum.theorem_41"], "did you mean fedsum.theorem_4_1?"),
    (["check", "--patterns", "missing.npz"], "trace file 'missing.npz' does not exist"),
    (["check", "--plugin", "missing_plugin.py"], "plugin file 'missing_plugin.py' does not exist"),
    (["check", "-o", "/proc/x"], "--output '/proc/x' cannot be written to"),
    (["check-run", "README.md"], "README.md is not a fedverify run record"),
    (["check-run", "missing.jsonl"], "run record missing.jsonl does not exist"),
    (["check-run", "examples/flower_app/fedverify_app/task.py", "--theorem", "fedsum.theorem_41"],
     "unknown theorem 'fedsum.theorem_41'"),
]


@pytest.mark.slow
@pytest.mark.parametrize("argv, words", MISTAKES, ids=[" ".join(a) for a, _ in MISTAKES])
def test_a_mistake_is_answered_before_torch_loads(argv, words):
    code = ("import contextlib, io, sys\nfrom verify.cli import main\nerr = io.StringIO()\n"
            f"with contextlib.redirect_stderr(err):\n    rc = main({argv!r})\n"
            "print(rc, 'torch' in sys.modules, 'algorithms' in sys.modules)\nprint(err.getvalue())")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    status, message = done.stdout.split("\n", 1)
    assert status == "2 False False" and words in message and message.strip().count("\n") == 0
