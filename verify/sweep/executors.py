"""Where sweep cells run: in this process, in local processes, or on a Dask cluster.

``open_executor(processes=, scheduler=, workers=)`` is a context manager that yields a
``concurrent.futures.Executor`` (or None, meaning "run in this process") and shuts it down
on exit:

- ``processes=N`` (default :func:`default_processes`): a :class:`LocalPool` of at most N
  worker processes, started when first needed (``LocalPool.start`` fits them to the work:
  never more workers than tasks, none when there is nothing to do); ``processes=1`` runs in
  this process.
- ``scheduler="tcp://host:8786"``: the Dask cluster behind that scheduler.
- ``workers=N``: a local Dask cluster of N single-threaded worker processes.

Dask is the optional ``distributed`` extra (``pip install "fedverify[distributed]"``) and is
imported only when asked for. Local workers are started with ``forkserver`` (``spawn`` where
it does not exist), never ``fork``: the parent may hold torch's thread pools. As with any
such pool, a script that opens one runs it under ``if __name__ == "__main__":``.

Interrupts. Only the parent answers Ctrl-C: local workers (a process pool's and a local
Dask cluster's) are started with SIGINT blocked, which they inherit, so the Ctrl-C a
terminal sends to the whole process group never reaches them (no KeyboardInterrupt or
CancelledError traceback from a worker), and the parent stops them. While workers are being
started, Ctrl-C and SIGTERM wait: they take effect as soon as the last worker is up, so no
worker is ever left half-started (a forkserver child that outlives its parent prints a
traceback). ``stop`` ends a pool without waiting and keeps the pool's own threads quiet.

Lifetime. Local workers die with their parent, however it ends (``kill -9`` included), on
Linux: each forkserver worker asks the kernel (``prctl(PR_SET_PDEATHSIG)``) for SIGKILL when
the forkserver ends, then gives up its copy of the forkserver's "alive" pipe, so that the
forkserver, which ends when the last holder of that pipe has gone, ends with the parent; and
multiprocessing's resource tracker ends once the parent and the workers have closed its
pipe. Where ``prctl`` does not exist, workers outlive a parent killed without warning.
"""
from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import sys
import threading
import weakref
from concurrent.futures import Executor, InvalidStateError, ProcessPoolExecutor
from contextlib import ExitStack, contextmanager
from typing import Iterator, Sequence
from participation.validation import integer

__all__ = ["open_executor", "default_processes", "local_processes", "LocalPool", "dask_executor", "stop"]

#: Modules a forkserver imports once (torch among them), so that every worker it forks starts
#: warm: a sweep's by default. A process has one forkserver, started by its first pool: later
#: pools share it and what it imported.
_PRELOAD = ("verify.checking", "verify.choices", "verify.sweep.runner")
#: ``prctl`` option (linux/prctl.h): the signal this process gets when its parent ends.
_PR_SET_PDEATHSIG = 1


def default_processes() -> int:
    """The CPUs this process may use (its affinity mask where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:   # not on Linux
        return max(1, os.cpu_count() or 1)


def _ignore_interrupts() -> None:
    """Ctrl-C reaches the whole process group; only the parent reacts."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _killed_with_parent() -> bool:
    """Ask Linux to SIGKILL this process when its parent ends; False where that cannot be
    asked (no ``prctl``: not Linux, or no C library to call it through)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
        prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
        return prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _release_forkserver() -> None:
    """Close this forkserver child's copy of the forkserver's "alive" pipe. Every child of a
    forkserver inherits one, and the forkserver ends only when all are closed: kept, the
    workers would keep the forkserver (and so themselves) alive after their parent has gone.
    A worker never starts processes of its own through it."""
    from multiprocessing import forkserver

    server = getattr(forkserver, "_forkserver", None)
    fd = getattr(server, "_forkserver_alive_fd", None)
    if fd is None:
        return
    server._forkserver_alive_fd = None
    try:
        os.close(fd)
    except OSError:
        pass


def _start_worker(forkserved: bool) -> None:
    """Worker initialiser: deaf to Ctrl-C and, when started by a forkserver, dying with it
    (see the module docstring). In that order: the forkserver cannot end (its last "alive"
    pipe closed) before the kernel has been asked to kill this worker when it does."""
    _ignore_interrupts()
    if forkserved and _killed_with_parent():
        _release_forkserver()


@contextmanager
def _starting_workers() -> Iterator[None]:
    """While processes are started inside: SIGINT is blocked in this thread, so that the
    processes (and the threads that start them) inherit it blocked and never see the Ctrl-C
    meant for the parent; and, in the main thread, Ctrl-C and SIGTERM are noted instead of
    handled, then delivered to their own handlers when the block ends (none is lost).
    SIGTERM is never blocked: ``stop`` ends workers with it."""
    mask = hasattr(signal, "pthread_sigmask")
    if mask:
        try:      # multiprocessing's resource tracker unblocks SIGINT when it starts: start it first
            from multiprocessing import resource_tracker

            resource_tracker.ensure_running()
        except (ImportError, AttributeError, OSError):
            pass
    previous_mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT}) if mask else None
    noted: list[int] = []
    previous: dict[int, object] = {}
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            handler = signal.getsignal(signum)
            if handler is not None:            # None: set outside Python, cannot be put back
                previous[signum] = signal.signal(signum, lambda number, frame: noted.append(number))
    try:
        yield
    finally:
        if mask:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous_mask)   # a Ctrl-C held back arrives now
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if noted:
            signal.raise_signal(noted[0])


def local_processes(n: int, preload: Sequence[str] = _PRELOAD) -> ProcessPoolExecutor:
    """A pool of ``n`` worker processes, started by forkserver (or spawn), all at once (see
    the module docstring on interrupts and lifetime); ``preload``: the modules a forkserver
    started now imports before forking workers."""
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
    forkserved = context.get_start_method() == "forkserver"
    if forkserved:
        context.set_forkserver_preload(list(preload))
    executor = ProcessPoolExecutor(n, mp_context=context, initializer=_start_worker, initargs=(forkserved,))
    try:
        with _starting_workers():
            launch = getattr(executor, "_launch_processes", None)   # all n now (else: one per task while none is idle)
            if launch is not None:
                launch()
            for ready in [executor.submit(os.getpid) for _ in range(n)]:    # and every one up and running
                ready.result()
    except BaseException:     # an interrupt noted while they started
        stop(executor)
        raise
    return executor


class LocalPool(Executor):
    """At most ``limit`` local worker processes (a :func:`local_processes` pool), started when
    first needed rather than when opened, so that they fit the work: ``start(tasks)`` starts
    min(tasks, limit) of them, none for no task; a ``submit`` before that starts all ``limit``,
    and one after ``start(0)`` (work that turned up after all) starts one. The pool itself
    is ``pool`` (None until started)."""

    def __init__(self, limit: int, preload: Sequence[str] = _PRELOAD):
        self.limit = limit
        self.preload = preload
        self.pool: ProcessPoolExecutor | None = None
        self._planned = limit
        self._closed = False
        self._lock = threading.Lock()

    @property
    def workers(self) -> int:
        """The workers started, or to be started by the next ``submit``."""
        return self.pool._max_workers if self.pool is not None else max(1, self._planned)

    def start(self, tasks: int) -> None:
        """Start min(tasks, limit) workers now; none if ``tasks`` is 0."""
        self._planned = max(0, min(tasks, self.limit))
        if self._planned:
            self._started()

    def _started(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._closed:
                raise RuntimeError("cannot schedule new futures after shutdown")
            if self.pool is None:
                self.pool = local_processes(max(1, self._planned), self.preload)
            return self.pool

    def submit(self, fn, /, *args, **kwargs):
        return self._started().submit(fn, *args, **kwargs)

    def close(self) -> ProcessPoolExecutor | None:
        """Take no more work (no pool is started after this); the pool, if one was started."""
        with self._lock:
            self._closed = True
            return self.pool

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        pool = self.close()
        if pool is not None:
            pool.shutdown(wait=wait, cancel_futures=cancel_futures)


def _import_distributed():
    try:
        import distributed
    except ImportError:
        raise ValueError('Dask is not installed: install the extra with pip install "fedverify[distributed]"') from None
    return distributed


@contextmanager
def dask_executor(scheduler: str | None = None, workers: int | None = None) -> Iterator[Executor]:
    """An Executor on the Dask scheduler at ``scheduler``, or on a local cluster of ``workers``
    single-threaded processes, quiet: no dashboard, and its processes log critical errors only
    (a cell that fails comes back through its future, in one line; a worker losing its
    scheduler while Ctrl-C ends the cluster logs nothing)."""
    distributed = _import_distributed()
    if scheduler is not None:
        try:
            client = distributed.Client(scheduler, timeout="20s")
        except (OSError, TimeoutError) as err:
            raise ValueError(f"cannot reach the Dask scheduler at {scheduler!r}: {' '.join(str(err).split())}") from None
        with client:
            yield client.get_executor()
        return
    with ExitStack() as stack:
        with _starting_workers():      # the cluster's threads, and the workers they start, block SIGINT
            cluster = stack.enter_context(distributed.LocalCluster(
                n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
                silence_logs=logging.CRITICAL))
        client = stack.enter_context(distributed.Client(cluster))
        yield client.get_executor()


#: Threads of stopped pools whose InvalidStateError is not shown (see ``stop``).
_quiet_threads: "weakref.WeakSet[threading.Thread]" = weakref.WeakSet()
_hook_lock = threading.Lock()
_previous_hook = None


def _quiet_pool_threads(args) -> None:
    """``threading.excepthook`` while stopped pools may still wind down: drop their threads'
    InvalidStateError, pass everything else on."""
    if args.thread in _quiet_threads and issubclass(args.exc_type, InvalidStateError):
        return
    (_previous_hook or threading.__excepthook__)(args)


def _quiet(threads) -> None:
    global _previous_hook
    with _hook_lock:
        if threading.excepthook is not _quiet_pool_threads:
            _previous_hook = threading.excepthook
            threading.excepthook = _quiet_pool_threads
        _quiet_threads.update(t for t in threads if isinstance(t, threading.Thread))


def stop(executor: Executor | None) -> None:
    """Cancel what has not started and, for a local process pool, end its workers now
    (their cells are lost; their records were never written).

    Terminated workers make a pool's manager thread fail the futures still pending, and on
    Python < 3.12 that thread (or the queue feeder thread) raises InvalidStateError for one
    that was cancelled meanwhile; that race is harmless, and its traceback is kept off
    stderr for as long as those two threads live, not just while this waits for them."""
    if isinstance(executor, LocalPool):
        executor = executor.close()
    if executor is None:
        return
    if isinstance(executor, ProcessPoolExecutor):
        call_queue = getattr(executor, "_call_queue", None)
        _quiet([getattr(executor, "_executor_manager_thread", None), getattr(call_queue, "_thread", None)])
        if hasattr(executor, "terminate_workers"):   # Python ≥ 3.14
            executor.terminate_workers()
            return
    # before 3.14: shutdown forgets the workers, so take them first
    workers = list((getattr(executor, "_processes", None) or {}).values())
    manager = getattr(executor, "_executor_manager_thread", None)
    executor.shutdown(wait=False, cancel_futures=True)
    for process in workers:
        process.terminate()
    if manager is not None:
        manager.join(timeout=10)


@contextmanager
def open_executor(processes: int | None = None, scheduler: str | None = None, workers: int | None = None,
                  preload: Sequence[str] = _PRELOAD) -> Iterator[Executor | None]:
    """The executor the options ask for (see the module docstring); None runs in-process.

    At most one of ``processes``, ``scheduler``, ``workers`` may be given. On an exception
    (Ctrl-C included) the executor is stopped without waiting for running cells.
    ``preload``: what a local pool's forkserver imports (see ``local_processes``).
    """
    given = [name for name, value in (("processes", processes), ("scheduler", scheduler), ("workers", workers))
             if value is not None]
    if len(given) > 1:
        raise ValueError(f"choose one of processes, scheduler, workers; got {', '.join(given)}")
    for name, value in (("processes", processes), ("workers", workers)):
        if value is not None:
            integer(value, name)
    if scheduler is not None or workers is not None:
        with dask_executor(scheduler, workers) as executor:
            yield executor
        return
    n = default_processes() if processes is None else processes
    if n == 1:
        yield None
        return
    executor = LocalPool(n, preload)
    try:
        yield executor
    except BaseException:
        stop(executor)
        raise
    executor.shutdown(wait=True)
