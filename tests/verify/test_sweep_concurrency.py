"""Several sweeps on one output folder: each cell is claimed by one of them and runs once,
and every sweep ends with the table a single sweep gives; a dead sweep's claims are taken over."""
import csv
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from verify.sweep import runner as sweep, store as sweep_store

from .test_sweep import env, same_numbers

SPEC = {"monte_carlo": {"patterns": ["P2", "case4"], "n_clients": 5, "rounds": [30, 60], "reps": 200,
                        "seeds": [0, 1, 2, 3]}}

#: One sweep in its own process: every cell it runs is logged; it starts when GO exists.
DRIVER = textwrap.dedent("""
    import json, os, sys, time
    from verify.sweep import runner as sweep
    spec, out, log, go = sys.argv[1:5]
    real = sweep.run_cell

    def logged(cell):
        with open(log, "a") as f:
            f.write(cell.key + "\\n")
        return real(cell)

    sweep.run_cell = logged
    real(sweep.expand(spec)[0])            # imports and caches warm, outside the race
    while not os.path.exists(go):
        time.sleep(0.001)
    outcome = sweep.run_sweep(spec, out, progress=False)
    print(json.dumps({"rows": outcome.rows, "ran": outcome.ran, "skipped": outcome.skipped,
                      "elsewhere": getattr(outcome, "elsewhere", 0)}))
""")


@pytest.mark.slow
def test_two_sweeps_on_one_folder_split_the_cells(tmp_path):
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(SPEC))
    out, go = tmp_path / "shared", tmp_path / "go"
    logs = [tmp_path / f"ran-{i}.log" for i in range(2)]
    processes = [subprocess.Popen([sys.executable, "-c", DRIVER, str(spec), str(out), str(log), str(go)], env=env(),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for log in logs]
    go.touch()
    outcomes = []
    for process in processes:
        stdout, stderr = process.communicate(timeout=300)
        assert process.returncode == 0, stderr
        outcomes.append(json.loads(stdout))
    keys = [c.key for c in sweep.expand(SPEC)]
    ran = [line for log in logs if log.exists() for line in log.read_text().split()]
    assert sorted(ran) == sorted(keys)                          # every cell ran, and none twice
    assert sum(o["ran"] for o in outcomes) == len(keys)
    assert all(o["ran"] + o["skipped"] + o["elsewhere"] == len(keys) for o in outcomes)

    reference = sweep.run_sweep(SPEC, tmp_path / "alone", progress=False)
    for outcome in outcomes:
        same_numbers(outcome["rows"], reference.rows)           # each sweep ends with the whole table
    same_numbers(sweep.load_results(out), sweep.load_results(tmp_path / "alone"))
    with open(out / "results.csv", newline="") as f:
        assert [row["key"] for row in csv.DictReader(f)] == keys
    assert not list((out / "cells").glob("*.claim"))


HOLDER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from verify.sweep.runner import _Claims
    claims = _Claims(Path(sys.argv[1]))
    assert claims.take(sys.argv[2])
    print("held", flush=True)
    sys.stdin.read()
""")


@pytest.mark.slow
def test_a_claimed_cell_is_waited_for_and_taken_over_when_its_holder_dies(tmp_path):
    spec = {"monte_carlo": {"patterns": ["P2", "case4"], "n_clients": 5, "rounds": 20, "reps": 5, "seeds": [0, 1]}}
    cells = sweep.expand(spec)
    out = tmp_path / "out"
    (out / "cells").mkdir(parents=True)
    held = cells[1]
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(out / "cells"), held.key], env=env(),
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline() == "held\n"
    claim = out / "cells" / f"{held.key}.claim"
    assert json.loads(claim.read_text())["pid"] == holder.pid

    result = {}
    thread = threading.Thread(target=lambda: result.update(outcome=sweep.run_sweep(spec, out, progress=False)))
    thread.start()
    others = [out / "cells" / f"{c.key}.json" for c in cells if c is not held]
    deadline = time.monotonic() + 60
    while not all(p.exists() for p in others) and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.3)                              # a few looks at the held cell
    assert thread.is_alive() and not (out / "cells" / f"{held.key}.json").exists()   # not run while held

    holder.send_signal(signal.SIGKILL)           # the holder dies: the kernel drops its lock
    holder.wait()
    thread.join(timeout=60)
    outcome = result["outcome"]
    assert (outcome.ran, outcome.skipped, outcome.elsewhere) == (4, 0, 0) and len(outcome.rows) == 4
    assert not list((out / "cells").glob("*.claim"))


def test_a_cell_finished_by_another_sweep_is_not_run_again(tmp_path, monkeypatch):
    spec = {"monte_carlo": {"patterns": ["P2", "case4"], "n_clients": 5, "rounds": 20, "reps": 5}}
    cells = sweep.expand(spec)
    out = tmp_path / "out"
    (out / "cells").mkdir(parents=True)
    other = sweep._Claims(out / "cells")                   # another sweep, in this process
    assert other.take(cells[0].key)
    calls = []
    real = sweep.run_cell
    monkeypatch.setattr(sweep, "run_cell", lambda cell: calls.append(cell.key) or real(cell))
    result = {}
    thread = threading.Thread(target=lambda: result.update(outcome=sweep.run_sweep(spec, out, progress=False)))
    thread.start()
    deadline = time.monotonic() + 60
    while calls != [cells[1].key] and time.monotonic() < deadline:
        time.sleep(0.01)
    record = real(cells[0])
    sweep.write_json(out / "cells" / f"{cells[0].key}.json", record)     # the other sweep's record, then its claim
    other.release(cells[0].key)
    thread.join(timeout=60)
    outcome = result["outcome"]
    assert calls == [cells[1].key] and (outcome.ran, outcome.skipped, outcome.elsewhere) == (1, 0, 1)
    assert [r["key"] for r in outcome.rows] == [c.key for c in cells]


def test_a_claim_file_left_by_a_dead_process_is_retaken(tmp_path):
    spec = {"monte_carlo": {"patterns": "P2", "n_clients": 5, "rounds": 20, "reps": 5}}
    (cell,) = sweep.expand(spec)
    out = tmp_path / "out"
    (out / "cells").mkdir(parents=True)
    (out / "cells" / f"{cell.key}.claim").write_text(json.dumps({"pid": 2**22 + 1, "host": "gone"}))
    outcome = sweep.run_sweep(spec, out, progress=False)
    assert (outcome.ran, outcome.skipped) == (1, 0) and not list((out / "cells").glob("*.claim"))
    assert os.path.exists(out / "cells" / f"{cell.key}.json")


def test_a_folder_that_cannot_be_locked_is_warned_about_once(tmp_path, monkeypatch):
    import errno
    import types

    def flock(fd, operation):
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))

    monkeypatch.setattr(sweep_store, "fcntl", types.SimpleNamespace(flock=flock, LOCK_EX=2, LOCK_NB=4))
    spec = {"monte_carlo": {"patterns": ["P2", "case4"], "n_clients": 5, "rounds": 20, "reps": 5}}
    with pytest.warns(sweep.SweepWarning, match="cannot lock files in .*No locks available") as warned:
        outcome = sweep.run_sweep(spec, tmp_path / "out", progress=False)
    assert len(warned) == 1 and outcome.ran == 2 and not list((tmp_path / "out" / "cells").glob("*.claim"))
