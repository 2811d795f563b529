"""The README's first example prints what the command prints: every line of its output block, the
solve's seconds and the solver's accuracy aside (they depend on the machine)."""
import re
from pathlib import Path

import pytest

from verify.cli import main

ROOT = Path(__file__).resolve().parents[2]


def _timeless(text: str) -> str:
    """The text without the solve's seconds and its accuracy (the solver's last digits)."""
    text = re.sub(r", \d+(\.\d+)? s\)", ", … s)", text)
    return re.sub(r"accuracy [0-9.e+-]+", "accuracy …", text)


@pytest.mark.slow
def test_the_readme_first_example_is_the_commands_output(capsys):
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```\n\$ \.venv/bin/fedverify worst-case fedsum-b\n(.*?)```", readme, re.S).group(1)
    assert main(["worst-case", "fedsum-b"]) == 0
    printed = capsys.readouterr().out
    assert _timeless(block).strip().splitlines() == _timeless(printed).strip().splitlines()
