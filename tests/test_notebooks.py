"""Every notebook runs top to bottom with its default (small) parameters."""
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # each notebook takes seconds to a minute

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_executes(path):
    import nbformat  # imported here: a collection that runs no notebook does not load Jupyter
    from nbclient import NotebookClient

    notebook = nbformat.read(path, as_version=4)
    NotebookClient(notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
