"""Process counts on the command line: a count no machine has is one line (exit 2), and a
command never starts more workers than it has work for."""
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


def test_mc_starts_no_more_workers_than_replicates(monkeypatch, capsys):
    import concurrent.futures

    started = []
    real = concurrent.futures.ProcessPoolExecutor

    def counting(max_workers=None, *args, **kwargs):
        started.append(max_workers)
        return real(max_workers, *args, **kwargs)

    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", counting)
    assert main(["mc", "P1", "-T", "10", "--reps", "3", "--workers", "32", "--no-progress"]) == 0
    assert started == [3]
    assert "tau_max" in capsys.readouterr().out
