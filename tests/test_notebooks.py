"""Every notebook runs top to bottom: at its default parameters where those take seconds, and
otherwise at the smaller sizes below, set in a cell inserted after the notebook's parameter cell
(its first code cell), so that the suite runs the reader's code on a smaller problem."""
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.longest]  # each notebook takes seconds

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))

SMALLER = {
    "01_participation_and_delays.ipynb": {"ROUNDS": 200, "REPS": 60},
    "03_verify_fedsum.ipynb": {"ROUNDS": 100, "SEEDS": 2, "COROLLARY_ROUNDS": [50, 100], "COROLLARY_SEEDS": 2},
    "04_cafed.ipynb": {"ROUNDS": 150, "EST_ROUNDS": [50, 200, 1000], "EST_REPS": 8, "SEEDS": 2},
    "05_server_momentum.ipynb": {"FAMILY_ROUNDS": 80, "SEEDS": 2},
    "06_logit.ipynb": {"ROUNDS": 100, "SEEDS": 2},
    "07_real_fleet.ipynb": {"BOOTSTRAP": 19, "MC_REPS": 60},
    "08_your_theorem.ipynb": {"ROUNDS": 120, "SEEDS": 2},
}


def test_the_smaller_sizes_name_parameters_the_notebooks_have():
    import nbformat

    for name, values in SMALLER.items():
        notebook = nbformat.read(NOTEBOOKS[0].parent / name, as_version=4)
        first = next(c for c in notebook.cells if c.cell_type == "code").source
        for key in values:
            assert any(line.startswith(f"{key} =") for line in first.splitlines()), (name, key)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_executes(path):
    import nbformat  # imported here: a collection that runs no notebook does not load Jupyter
    from nbclient import NotebookClient

    notebook = nbformat.read(path, as_version=4)
    if path.name in SMALLER:
        first = next(i for i, c in enumerate(notebook.cells) if c.cell_type == "code")
        source = "\n".join(f"{key} = {value!r}" for key, value in SMALLER[path.name].items())
        notebook.cells.insert(first + 1, nbformat.v4.new_code_cell(source))
    NotebookClient(notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
