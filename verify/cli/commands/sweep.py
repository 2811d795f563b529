"""``fedverify sweep``: a grid of checks and Monte-Carlo jobs from a spec, resumable.

How it ends: with the table on stdout (exit 0); with one line on stderr for a bad spec or
option (exit 2) or an interrupt, Ctrl-C or SIGTERM (``fedverify: interrupted``, exit 130,
the workers stopped and silent); quietly, exit 0, when the reader of stdout has gone (``|
head``): the records and results.csv are written by then. A record the sweep runs again
because it is not valid is one ``fedverify: warning:`` line on stderr.
"""
from __future__ import annotations

import _thread
import argparse
import sys
import warnings

from ...sweep.spec import SPEC_FORMAT
from ..usage import UsageError
from . import arguments

HELP = "a grid of checks and Monte-Carlo jobs from a spec file (TOML or JSON), in parallel, stored cell by cell and resumable"

DESCRIPTION = """\
Runs every cell of SPEC that has no record in --output yet. A check cell runs an
algorithm on a problem under a pattern, as `fedverify check` does, and records the
measured (1/T) Σ_t ‖∇f(x_t)‖², f(x_T), the bound, ratio and verdict; a Monte-Carlo cell
estimates E[τ_max] and E[τ_avg] of a pattern with confidence intervals, beside the exact
values and the paper's bound, as `fedverify mc` does.

Each finished cell is written at once to OUTPUT/cells/<key>.json, the key being the sha256
of the cell's config; started again, a sweep skips the cells already written, so an
interrupted sweep resumes losing nothing and running nothing twice. At the end the table
of the spec's cells is printed and written to OUTPUT/results.csv. Cells run on local
processes (--processes), on a Dask cluster (--scheduler) or on a local Dask cluster
(--workers; both need `pip install "fedverify[distributed]"`). A cell's numbers depend on
its config only, wherever it runs. `fedverify sweep --example` prints a small spec.

Spec format:
""" + SPEC_FORMAT

FORMATTER_CLASS = argparse.RawDescriptionHelpFormatter


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


def _interrupt_again(previous):
    """A ``sys.unraisablehook`` that does not let an interrupt be lost: a KeyboardInterrupt
    raised where Python cannot propagate it (a gc callback, as Dask installs one; a
    ``__del__``) would be printed as "Exception ignored" and the sweep would go on. Instead
    the main thread gets SIGINT again a moment later (from a timer thread: raised at once,
    it would land in this hook again), silently. Anything else goes to ``previous``."""
    import signal
    import threading

    main = threading.main_thread().ident

    def again():
        if hasattr(signal, "pthread_kill"):     # a real signal: it also ends a blocking wait
            signal.pthread_kill(main, signal.SIGINT)
        else:
            _thread.interrupt_main()

    def hook(unraisable):
        if unraisable.exc_type is not None and issubclass(unraisable.exc_type, KeyboardInterrupt):
            timer = threading.Timer(0.05, again)
            timer.daemon = True
            timer.start()
        else:
            previous(unraisable)
    return hook


def _warn_in_one_line(message, category, filename, lineno, file=None, line=None):
    """``warnings.showwarning`` for the command: ``fedverify: warning: MESSAGE``, above the progress bar."""
    from tqdm.auto import tqdm

    tqdm.write(f"fedverify: warning: {' '.join(str(message).split())}", file=sys.stderr)


def add_arguments(parser) -> None:
    """The options of ``sweep``: where the cells run is one of --processes, --scheduler, --workers."""
    parser.add_argument("spec", nargs="?", type=arguments.path, metavar="SPEC", help="the spec file (.toml or .json)")
    parser.add_argument("--output", "-o", type=arguments.path, default="fedverify-sweep",
                        help="results folder, created (default fedverify-sweep)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--processes", "-j", type=arguments.processes, metavar="N",
                       help="local worker processes (default: the CPUs available, at most one per cell to run); "
                            "1 runs in this process")
    where.add_argument("--scheduler", metavar="ADDRESS",
                       help="run on the Dask cluster of this scheduler, e.g. tcp://host:8786")
    where.add_argument("--workers", type=arguments.processes, metavar="N",
                       help="run on a local Dask cluster of N worker processes")
    parser.add_argument("--example", action="store_true", help="print a small example spec and exit")
    arguments.add_no_progress(parser)


def run(args) -> str:
    """The cells of the spec that have no record yet, then the table of all of them."""
    import signal

    from ...sweep import runner as sweep
    from ...sweep.executors import default_processes, open_executor

    if args.example:
        return sweep.EXAMPLE_SPEC.rstrip("\n")
    if not args.spec:
        raise UsageError("sweep needs a SPEC file (.toml or .json); fedverify sweep --example prints one")
    spec = sweep.load_spec(args.spec)
    processes = args.processes
    if processes is None and args.scheduler is None and args.workers is None:
        cpus = default_processes()
        processes = max(1, min(cpus, sweep.count_to_run(spec, args.output, at_most=cpus)))
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)   # a terminated sweep stops its workers too
    previous_unraisable = sys.unraisablehook
    sys.unraisablehook = _interrupt_again(previous_unraisable)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("always", sweep.SweepWarning)
            warnings.showwarning = _warn_in_one_line
            with open_executor(processes=processes, scheduler=args.scheduler, workers=args.workers) as executor:
                try:
                    outcome = sweep.run_sweep(spec, args.output, executor=executor,
                                              progress=False if args.no_progress else None)
                except sweep.SweepError as err:
                    raise UsageError(str(err)) from None
    finally:
        signal.signal(signal.SIGTERM, previous)
        sys.unraisablehook = previous_unraisable
    where = ("this process" if executor is None and args.scheduler is None and args.workers is None
             else f"the Dask scheduler at {args.scheduler}" if args.scheduler
             else f"a local Dask cluster of {args.workers} workers" if args.workers else _processes(executor, processes))
    head = (f"{len(outcome.rows)} cells: {outcome.ran} run now on {where}, {outcome.skipped} found done"
            + (f", {outcome.elsewhere} run by another sweep on the same folder" if outcome.elsewhere else "")
            + (f" ({spec.description})" if spec.description else ""))
    return "\n".join([head, sweep.summary_table(outcome.rows),
                      f"wrote {outcome.table} (records in {outcome.folder / sweep.CELLS_FOLDER})"])


def _processes(executor, limit: int) -> str:
    """The local workers the sweep started (at most one per cell it had to run)."""
    if not hasattr(executor, "pool"):
        count = limit
    else:
        count = executor.workers if executor.pool is not None else 0
    return f"{count} process" + ("" if count == 1 else "es")
