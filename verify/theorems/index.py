"""The index of the papers' theorems that ``fedverify bound --list`` prints and the commands read
to name a mistyped theorem: each declaration's name and one-line summary, generated from the
declarations in ``verify.theorems`` and kept in ``index.json`` beside this module, so that
listing the theorems or refusing a wrong name imports neither the bounds nor torch.

``python -m verify.theorems.index`` writes it; ``tests/verify/test_declarations.py`` fails, with
that command, whenever the file differs from the declarations.
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from . import _registry

__all__ = ["INDEX_PATH", "load_index", "build_index", "write_index"]

INDEX_PATH = Path(__file__).with_name("index.json")


def load_index() -> dict[str, str]:
    """{theorem name: one-line summary}, in the declarations' order, read from ``index.json``."""
    with open(INDEX_PATH, encoding="utf-8") as f:
        return json.load(f)


def build_index() -> dict[str, str]:
    """The index as the declarations give it (imports every paper's theorems)."""
    return {name: theorem.summary for name, theorem in _registry().items()}


def write_index(path: Path = INDEX_PATH) -> dict[str, str]:
    """Write :func:`build_index` to ``path`` atomically and return it."""
    index = build_index()
    fd, tmp = tempfile.mkstemp(dir=Path(path).parent, prefix=".index.", suffix=".json")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(index, f, ensure_ascii=False, indent=1)
        f.write("\n")
    os.replace(tmp, path)
    return index


if __name__ == "__main__":
    written = write_index()
    print(f"{len(written)} theorems written to {INDEX_PATH.name}")
