"""Process counts on the command line: a count no machine has is one line (exit 2), and a
command never starts more workers than it has work for."""
import json

import pytest

from verify.cli import MAX_PROCESSES, main


@pytest.mark.parametrize("argv", [["mc", "P1", "-T", "10", "--reps", "4", "--workers", "99999999999999999999"],
                                  ["sweep", "spec.toml", "--processes", "99999999999999999999"],
                                  ["sweep", "spec.toml", "--workers", str(MAX_PROCESSES + 1)],
                                  ["bench", "--workers", "1e30"]])
def test_an_impossible_process_count_is_one_line(argv, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("fedverify") and ("at most" in err[-1] or "expected an integer" in err[-1])


@pytest.fixture
def pools(monkeypatch):
    """The sizes of the process pools started (a ProcessPoolExecutor per pool, as local pools are)."""
    from concurrent.futures import ProcessPoolExecutor

    from verify.sweep import executors

    started = []

    class Counting(ProcessPoolExecutor):
        def __init__(self, max_workers=None, *args, **kwargs):
            started.append(max_workers)
            super().__init__(max_workers, *args, **kwargs)

    monkeypatch.setattr(executors, "ProcessPoolExecutor", Counting)
    return started


@pytest.mark.slow
@pytest.mark.parametrize("reps", [3, 4])
def test_mc_starts_no_more_workers_than_replicates(reps, pools, capsys):
    assert main(["mc", "P1", "-T", "10", "--reps", str(reps), "--workers", "32", "--no-progress"]) == 0
    assert pools == [reps]
    assert "tau_max" in capsys.readouterr().out


ONE_CELL = {"monte_carlo": {"patterns": "P2", "n_clients": 5, "rounds": 20, "reps": 5, "seeds": 0}}


@pytest.mark.slow
def test_a_sweep_starts_no_more_workers_than_cells_to_run(tmp_path, pools, capsys):
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(ONE_CELL))
    out = tmp_path / "out"
    assert main(["sweep", str(spec), "-o", str(out), "--processes", "24", "--no-progress"]) == 0
    assert pools == [1] and "1 cells: 1 run now on 1 process," in capsys.readouterr().out
    assert main(["sweep", str(spec), "-o", str(out), "--processes", "24", "--no-progress"]) == 0
    assert pools == [1] and "1 cells: 0 run now on 0 processes" in capsys.readouterr().out  # nothing left: no pool
