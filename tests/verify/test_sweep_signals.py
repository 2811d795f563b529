"""How ``fedverify sweep`` ends when its reader goes away or it is interrupted: one line (or
none), never a traceback from the parent, a pool thread or a worker."""
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import InvalidStateError

import pytest

from verify.sweep import runner as sweep
from verify.sweep.executors import local_processes, open_executor, stop

from .test_sweep import env

SMALL_MC = {"monte_carlo": {"patterns": ["P2", "case4"], "n_clients": 5, "rounds": 20, "reps": 5, "seeds": [0, 1]}}


def spec_file(tmp_path, spec=SMALL_MC):
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    return path


def ctrl_c_as_in_a_terminal():
    """A child's Ctrl-C at its default, as a terminal gives it: the test's own process may
    ignore SIGINT (pytest-xdist's workers do), and a Python started with SIGINT ignored never
    raises KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def command(*args):
    return [sys.executable, "-m", "verify", "sweep", *map(str, args)]


# ------------------------------------------------------------------ a reader that goes away


@pytest.mark.slow
@pytest.mark.parametrize("args", [["--example"], ["SPEC", "-o", "OUT", "-j", "1", "--no-progress"]])
def test_a_closed_stdout_ends_quietly(args, tmp_path):
    args = [str(spec_file(tmp_path)) if a == "SPEC" else str(tmp_path / "out") if a == "OUT" else a for a in args]
    process = subprocess.Popen(command(*args), env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    process.stdout.close()           # the reader is gone before anything is written: every write is EPIPE
    stderr = process.stderr.read()
    assert process.wait(timeout=120) == 0 and stderr == ""
    if "--example" not in args:
        assert len(sweep.load_results(tmp_path / "out")) == 4     # the sweep itself finished


@pytest.mark.slow
@pytest.mark.parametrize("args", [["bound", "--list"], ["delays", "--list"], ["bound", "fedsum.theorem_4_1", "--inputs"]])
def test_every_command_ends_quietly_into_a_closed_pipe(args):
    """The quiet end on a gone reader is ``main``'s, not one command's: ``| head -1`` after
    any command ends without a BrokenPipeError traceback."""
    process = subprocess.Popen([sys.executable, "-m", "verify", *args], env=env(), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    process.stdout.close()
    stderr = process.stderr.read()
    assert process.wait(timeout=120) == 0 and stderr == "", stderr


# ------------------------------------------------------------------ SIGTERM and Ctrl-C


@pytest.mark.slow
@pytest.mark.skipif("forkserver" not in multiprocessing.get_all_start_methods(), reason="needs forkserver")
def test_sigterm_while_workers_start_is_one_line(tmp_path):
    """SIGTERM that lands while a worker process is being started (here: as soon as the first
    one is) waits until every worker is up, then stops them all: no half-started worker
    prints a traceback after its parent has gone."""
    script = textwrap.dedent("""
        import signal, sys
        import multiprocessing.context as context
        from multiprocessing.process import BaseProcess

        def start(self):
            BaseProcess.start(self)
            signal.raise_signal(signal.SIGTERM)

        context.ForkServerProcess.start = start
        from verify.cli import main
        sys.exit(main(sys.argv[1:]))
    """)
    process = subprocess.run([sys.executable, "-c", script, "sweep", str(spec_file(tmp_path)), "-o",
                              str(tmp_path / "out"), "-j", "2", "--no-progress"], env=env(), capture_output=True,
                             text=True, timeout=120)
    assert process.returncode == 130 and process.stderr == "fedverify: interrupted\n", process.stderr
    assert not list((tmp_path / "out" / "cells").glob("*.claim"))


@pytest.mark.slow
def test_sigterm_during_a_parallel_sweep_is_one_line_and_resumes(tmp_path):
    spec = {"monte_carlo": {"patterns": ["P2", "case4"], "n_clients": 5, "rounds": 20, "reps": 5,
                            "seeds": list(range(40))}}
    path = spec_file(tmp_path, spec)
    out = tmp_path / "out"
    process = subprocess.Popen(command(path, "-o", out, "-j", "2", "--no-progress"), env=env(),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while len(list((out / "cells").glob("*.json"))) < 5 and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    process.send_signal(signal.SIGTERM)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 130 and stderr == "fedverify: interrupted\n" and stdout == "", stderr
    assert not list((out / "cells").glob("*.claim"))          # claims let go of on the way out
    resumed = sweep.run_sweep(path, out, progress=False)
    assert resumed.ran + resumed.skipped == 80 and resumed.skipped >= 5


@pytest.mark.slow
def test_an_interrupt_swallowed_by_a_gc_callback_still_ends_the_sweep(tmp_path):
    """Ctrl-C that lands in a gc callback (Dask installs one) is printed by Python as
    "Exception ignored" and lost; the command raises it again, and ends in one line."""
    script = textwrap.dedent("""
        import gc, sys, time
        from verify.sweep import runner as sweep
        from verify.cli import main
        real = sweep.run_sweep

        def run_sweep(*args, **kwargs):
            def callback(phase, info):
                gc.callbacks.remove(callback)
                raise KeyboardInterrupt
            gc.callbacks.append(callback)
            gc.collect()
            time.sleep(30)              # the sweep would go on
            return real(*args, **kwargs)

        sweep.run_sweep = run_sweep
        sys.exit(main(sys.argv[1:]))
    """)
    process = subprocess.run([sys.executable, "-c", script, "sweep", str(spec_file(tmp_path)), "-o",
                              str(tmp_path / "out"), "-j", "1", "--no-progress"], env=env(), capture_output=True,
                             text=True, timeout=60, preexec_fn=ctrl_c_as_in_a_terminal)
    assert process.returncode == 130 and process.stderr == "fedverify: interrupted\n", process.stderr


#: ``fedverify sweep`` that says on stderr how many workers each pool it starts has.
COUNTING_POOLS = textwrap.dedent("""
    import sys
    from verify.sweep import executors
    from verify.cli import main

    real = executors.local_processes

    def counted(n, *args):
        print(f"pool of {n}", file=sys.stderr)
        return real(n, *args)

    executors.local_processes = counted
    if __name__ == "__main__":
        sys.exit(main(sys.argv[1:]))
""")


@pytest.mark.slow
@pytest.mark.parametrize("left, pools", [(0, ""), (1, "pool of 1\n")])
def test_a_sweep_with_little_or_nothing_to_do_starts_no_idle_worker_and_ends_cleanly(left, pools, tmp_path):
    """``-j 2`` with one cell left to run starts one worker; with none left, no pool at all
    (no worker waits for work that never comes, no forkserver starts). Either way the sweep
    ends as any other: exit 0, the table on stdout, nothing else on stderr."""
    path, out = spec_file(tmp_path), tmp_path / "out"
    sweep.run_sweep(path, out, progress=False)
    for record in sorted((out / "cells").glob("*.json"))[:left]:
        record.unlink()
    process = subprocess.run([sys.executable, "-c", COUNTING_POOLS, "sweep", str(path), "-o", str(out), "-j", "2",
                              "--no-progress"], env=env(), capture_output=True, text=True, timeout=120)
    assert process.returncode == 0 and process.stderr == pools, process.stderr
    head = process.stdout.splitlines()[0]
    assert head.startswith(f"4 cells: {left} run now") and f"{4 - left} found done" in head, head


@pytest.mark.slow
def test_a_stopped_pool_keeps_its_threads_invalid_state_errors_quiet(monkeypatch):
    """On Python < 3.12 a stopped pool's manager thread may fail a cancelled future after
    ``stop`` has returned; that InvalidStateError stays off stderr, others do not."""
    shown = []
    monkeypatch.setattr(threading, "excepthook", lambda args: shown.append(str(args.exc_value)))
    pool = local_processes(2)
    assert pool.submit(int, "7").result() == 7
    manager = pool._executor_manager_thread
    stop(pool)
    for thread, text in ((manager, "late"), (threading.current_thread(), "ours")):
        threading.excepthook(threading.ExceptHookArgs([InvalidStateError, InvalidStateError(text), None, thread]))
    threading.excepthook(threading.ExceptHookArgs([ValueError, ValueError("real"), None, manager]))
    assert shown == ["ours", "real"]


@pytest.mark.slow
def test_process_pool_workers_are_born_deaf_to_ctrl_c():
    """Blocked from their first instruction (inherited through the forkserver), not only
    ignored once the pool's initialiser has run. A fresh interpreter: a forkserver started
    earlier by another pool would not have the mask."""
    script = textwrap.dedent("""
        import signal
        from verify.sweep.executors import open_executor
        if __name__ == "__main__":
            with open_executor(processes=2) as executor:
                masks = [executor.submit(signal.pthread_sigmask, signal.SIG_BLOCK, []).result() for _ in range(4)]
            print(all(signal.SIGINT in mask for mask in masks))
    """)
    process = subprocess.run([sys.executable, "-c", script], env=env(), capture_output=True, text=True, timeout=120)
    assert process.stdout == "True\n" and process.stderr == "", process.stderr


def _worker_state():
    return os.getpid(), signal.pthread_sigmask(signal.SIG_BLOCK, [])


@pytest.mark.slow
def test_local_dask_workers_never_see_ctrl_c(capfd):
    """The Ctrl-C a terminal sends to the process group reaches the Dask workers blocked: no
    KeyboardInterrupt or CancelledError traceback, no restarted worker; the parent stops them."""
    pytest.importorskip("distributed")
    with open_executor(workers=1) as executor:
        pid, blocked = executor.submit(_worker_state).result()
        os.kill(pid, signal.SIGINT)
        again, _ = executor.submit(_worker_state).result()
    assert signal.SIGINT in blocked and again == pid
    err = capfd.readouterr().err
    assert "KeyboardInterrupt" not in err and "CancelledError" not in err and "Traceback" not in err, err


@pytest.mark.slow
def test_ctrl_c_during_a_dask_sweep_is_one_line(tmp_path):
    pytest.importorskip("distributed")
    spec = {"monte_carlo": {"patterns": ["P2", "case4"], "n_clients": 5, "rounds": 20, "reps": 5,
                            "seeds": list(range(100))}}
    out = tmp_path / "out"
    process = subprocess.Popen(command(spec_file(tmp_path, spec), "-o", out, "--workers", "2", "--no-progress"),
                               env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True, preexec_fn=ctrl_c_as_in_a_terminal)
    deadline = time.monotonic() + 60
    while not list((out / "cells").glob("*.json")) and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    os.killpg(process.pid, signal.SIGINT)          # what Ctrl-C in a terminal does
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130 and stderr == "fedverify: interrupted\n", stderr
