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


@pytest.mark.slow
def test_the_readme_check_with_worst_cases_is_the_commands_table(capsys, tmp_path):
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    command = "check --clients 3 -T 8 -K 2 --noise-free --seeds 1 --patterns P1"
    block = re.search(r"\$ \.venv/bin/fedverify " + re.escape(command) + r"\n(.*?)```", readme, re.S).group(1)
    assert main([*command.split(), "--no-progress", "-o", str(tmp_path / "out")]) == 0
    printed = [line for line in capsys.readouterr().out.splitlines() if not line.startswith("-")]
    shown = block.strip().splitlines()
    start = printed.index(shown[0])
    assert printed[start:start + len(shown)] == shown
