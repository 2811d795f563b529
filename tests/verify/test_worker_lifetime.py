"""Local worker processes live no longer than the command that started them: ``kill -9`` of a
``fedverify mc --workers`` or ``fedverify sweep --processes`` in mid-run takes its workers,
the forkserver and multiprocessing's resource tracker with it. And a pool starts no more
workers than it is given work for."""
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from verify.sweep.executors import LocalPool

from .test_sweep import env

linux_forkserver = pytest.mark.skipif(
    not sys.platform.startswith("linux") or "forkserver" not in multiprocessing.get_all_start_methods(),
    reason="dying with the parent needs Linux's prctl (and a forkserver to start workers)")

#: Long enough to be mid-run when killed (minutes, undisturbed).
LONG_MC = ["mc", "P1", "-T", "2000", "--reps", "100000", "--workers", "2", "--no-progress"]
LONG_SWEEP = {"monte_carlo": {"patterns": ["P1"], "rounds": 2000, "reps": 100000, "seeds": [0, 1]}}


def _stat(pid: int) -> tuple[int, str, int] | None:
    """(parent pid, state, start time) of a live process, from /proc; None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()    # the name, in parentheses, may hold spaces
    return int(fields[1]), fields[0], int(fields[19])


def descendants(root: int) -> dict[int, int]:
    """Every process below ``root``: pid → start time (a pid reused later is not the same process)."""
    children: dict[int, list[int]] = {}
    starts = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (stat := _stat(int(entry))) is not None:
            children.setdefault(stat[0], []).append(int(entry))
            starts[int(entry)] = stat[2]
    found, todo = {}, [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found[child] = starts[child]
            todo.append(child)
    return found


def workers(root: int) -> int:
    """How many of the processes below ``root`` are pool workers: neither multiprocessing's
    resource tracker nor the forkserver (a child of ``root`` that runs ``forkserver.main``)."""
    count = 0
    for pid in descendants(root):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        helper = b"resource_tracker" in command or (b"forkserver" in command and (_stat(pid) or (0,))[0] == root)
        count += not helper
    return count


def alive(processes: dict[int, int]) -> list[int]:
    """Those of ``processes`` still running (a zombie has ended; its reaper is not ours)."""
    running = []
    for pid, start in processes.items():
        stat = _stat(pid)
        if stat is not None and stat[2] == start and stat[1] != "Z":
            running.append(pid)
    return running


def _wait_for(condition, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def _command(kind: str, tmp_path) -> list[str]:
    if kind == "mc":
        return [sys.executable, "-m", "verify", *LONG_MC]
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(LONG_SWEEP))
    return [sys.executable, "-m", "verify", "sweep", str(spec), "-o", str(tmp_path / "out"), "--processes", "2",
            "--no-progress"]


@pytest.mark.slow
@linux_forkserver
@pytest.mark.parametrize("kind", ["mc", "sweep"])
def test_workers_die_with_a_killed_parent(kind, tmp_path):
    """The two workers, and the forkserver and the resource tracker: every process below the
    command, gone soon after it is killed (a liveness check with a generous bound)."""
    parent = subprocess.Popen(_command(kind, tmp_path), env=env(), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    below: dict[int, int] = {}
    try:
        assert _wait_for(lambda: workers(parent.pid) >= 2 or parent.poll() is not None, 120)
        time.sleep(1)                          # the workers at work
        below = descendants(parent.pid)
        assert parent.poll() is None and workers(parent.pid) >= 2, below
        parent.kill()
        parent.wait(timeout=30)
        assert _wait_for(lambda: not alive(below), 15), f"still running: {alive(below)}"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        for pid in alive(below):                 # a failed run leaves nothing behind
            os.kill(pid, signal.SIGKILL)


def _worker_pid() -> int:
    return os.getpid()


@pytest.mark.slow
def test_a_local_pool_starts_its_workers_when_told_how_much_work_there_is():
    pool = LocalPool(4)
    try:
        assert pool.pool is None and pool.workers == 4       # nothing started on opening
        pool.start(2)
        assert pool.pool._max_workers == 2 and pool.workers == 2
        assert len({pool.submit(_worker_pid).result() for _ in range(8)}) <= 2
    finally:
        pool.shutdown()


@pytest.mark.slow
def test_a_local_pool_with_no_work_starts_nothing_until_work_comes():
    pool = LocalPool(4)
    try:
        pool.start(0)
        assert pool.pool is None
        assert pool.submit(_worker_pid).result() != os.getpid()    # work after all: one worker
        assert pool.pool._max_workers == 1
    finally:
        pool.shutdown()
    with pytest.raises(RuntimeError, match="after shutdown"):
        pool.submit(_worker_pid)
