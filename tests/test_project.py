"""The project as a reader meets it: packaging metadata, citations, README examples."""
import re
import shlex
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [p for pattern in ("participation/**/*.py", "bounds/**/*.py", "algorithms/**/*.py", "verify/**/*.py",
                             "tests/**/*.py", "notebooks/*.ipynb", "*.md", "CITATION.cff")
           for p in ROOT.glob(pattern) if p.resolve() != Path(__file__).resolve()]


def test_licence_is_an_spdx_expression():
    """`pip install` warned that a TOML-table licence is deprecated."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "MIT" and project["license-files"] == ["LICENSE"]
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
    assert "cff-version" in (ROOT / "CITATION.cff").read_text()


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_citations_are_ones_a_reader_can_follow(path):
    """Docstrings, notebooks and prose cite theorem and equation numbers, never private text files."""
    text = path.read_text(encoding="utf-8")
    assert not re.search(r"\b00[0-4]_[0-9a-f]{16}\.txt", text), "cites a private text file"
    assert not re.search(r"\bseed (?:file|line)s?\b", text), "cites a private text file's lines"


def _readme_commands(prefix: str) -> list[list[str]]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```bash\n(.*?)```", text, re.S)
    lines = [line.split("#")[0].strip() for block in blocks for line in block.splitlines()]
    return [shlex.split(line)[1:] for line in lines if line.startswith(prefix)]


@pytest.mark.parametrize("args", _readme_commands("fedverify bound"), ids=lambda a: " ".join(a[:2]))
def test_the_readme_bound_examples_run(args, capsys):
    """The README once carried a literal '...' in an example."""
    from verify.cli import main

    assert "..." not in args
    assert main(args) == 0, capsys.readouterr().err


def _readme_python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), re.S)


def _unbound_names(source: str) -> set[str]:
    """Names a block reads but neither imports, assigns, defines nor takes from builtins."""
    import ast
    import builtins

    tree = ast.parse(source)
    bound = set(dir(builtins))
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)
    return {node.id for node in ast.walk(tree)
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in bound}


def _is_template(source: str) -> bool:
    """A block with a bare ``...`` statement is a sketch for the reader to fill in."""
    import ast

    return any(isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and node.value.value is Ellipsis
               for node in ast.walk(ast.parse(source)))


@pytest.mark.parametrize("source", [b for b in _readme_python_blocks() if not _is_template(b)],
                         ids=lambda b: b.splitlines()[0][:40])
def test_readme_python_examples_run_as_pasted(source):
    """Every name a README example uses is imported or defined in that example (the Flower
    example once used ``preset``, ``problem`` and ``constants`` without defining them)."""
    assert not _unbound_names(source)


def test_the_readme_has_a_flower_example():
    assert any("verify.records.flower" in b for b in _readme_python_blocks())
