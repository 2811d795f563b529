"""Sweeps: a grid of checks and Monte-Carlo jobs, run in parallel, stored cell by cell.

``load_spec(path)`` reads a spec, ``iter_cells(spec)`` yields its ``Cell`` s one at a time
(``expand(spec)`` lists them, ``count_cells(spec)`` counts them without expanding),
``run_sweep(spec, output, executor=...)`` runs the cells that have no record yet and
``load_results(folder)`` reads the records back as one table (a list of flat dicts;
``to_columns`` and ``write_table`` turn it into columns or a CSV file). ``fedverify sweep
SPEC`` is the command.

This module is the run: ``run_sweep`` streams the spec's cells in spec order, skips those
with a valid record, claims and runs the others (in this process or on an executor) and
waits for those another sweep on the same folder holds, then writes the table. The names of
the sweep's other modules are importable from here too:

* :mod:`.spec`: the spec format, reading and validating a spec (``load_spec``, ``parse_spec``,
  ``Spec``, ``MAX_CELLS``, ``MAX_SPEC_DEPTH``, ``MAX_SPEC_BYTES``, ``EXAMPLE_SPEC``);
* :mod:`.grid`: a spec's tables with every name checked, their sizes, their cells
  (``iter_cells``, ``expand``, ``count_cells``);
* :mod:`.cells`: a cell, its key and its computation (``Cell``, ``cell_key``, ``run_cell``,
  ``SCHEMA_VERSION``);
* :mod:`.store`: the output folder: records and their validity, resuming, claims on cells
  (``finished_keys``, ``count_to_run``, ``SweepWarning``);
* :mod:`.table`: the results as a table (``COLUMNS``, ``load_results``, ``to_columns``,
  ``write_table``, ``summary_table``).

Spec format
-----------
``verify.sweep.spec.SPEC_FORMAT`` (``fedverify sweep --help`` prints it).
"""
from __future__ import annotations

import os
import sys
import time
import warnings
from concurrent.futures import FIRST_COMPLETED, CancelledError, Executor, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

from . import worst_case_cells
from .cells import SCHEMA_VERSION, Cell, cell_key, run_cell
from .executors import LocalPool
from .grid import _check_size, _tables, _walk, count_cells, expand, iter_cells
from .spec import (EXAMPLE_SPEC, KINDS, MAX_CELLS, MAX_SPEC_BYTES, MAX_SPEC_DEPTH, Spec, _as_spec,  # noqa: F401
                   load_spec, parse_spec)
from .store import (CELLS_FOLDER, CLAIM_SUFFIX, RESULTS_FILE, SweepWarning, _cells_folder, _Claims,  # noqa: F401
                    _read_record, _record_names, count_to_run, finished_keys)
from .table import COLUMNS, _flat, load_results, summary_table, to_columns, write_table
from ..report import write_json

__all__ = ["Cell", "Spec", "SweepOutcome", "SweepError", "SweepWarning", "SCHEMA_VERSION", "EXAMPLE_SPEC", "COLUMNS",
           "MAX_CELLS", "MAX_SPEC_DEPTH", "MAX_SPEC_BYTES", "load_spec", "parse_spec", "count_cells", "iter_cells",
           "expand", "cell_key", "run_cell", "run_sweep", "finished_keys", "count_to_run", "load_results",
           "to_columns", "write_table", "summary_table"]

#: Seconds between two looks at cells another sweep is running (the longest wait; it starts shorter).
_POLL_SECONDS = 1.0


class SweepError(RuntimeError):
    """Some cells failed; the others' records are written. ``outcome`` says which."""

    def __init__(self, message: str, outcome: "SweepOutcome"):
        super().__init__(message)
        self.outcome = outcome


@dataclass(frozen=True)
class SweepOutcome:
    """``rows``: the table of the spec's finished cells in spec order; ``ran``/``skipped``:
    cells run now / found done; ``failed``: (key, one-line error) per cell that raised;
    ``table``: the CSV written; ``elsewhere``: cells another sweep on the same folder ran
    while this one was running (not counted in ``ran`` or ``skipped``)."""

    rows: list[dict]
    ran: int
    skipped: int
    failed: list[tuple[str, str]]
    folder: Path
    table: Path
    elsewhere: int = 0


def _describe(cell: Cell) -> str:
    c = cell.config
    if cell.kind == "worst_case":
        return worst_case_cells.describe(cell)
    if cell.kind == "check":
        return f"{c['algorithm']} on {c['problem']} under {c['pattern']} (N={c['n_clients']}, T={c['rounds']}, seed {c['seed']})"
    return f"Monte-Carlo {c['pattern']} (T={c['rounds']}, {c['reps']} reps, seed {c['seed']})"


def _one_line(err: BaseException) -> str:
    return f"{type(err).__name__}: {' '.join(str(err).split())}"


def _capacity(executor: Executor) -> int:
    """How many cells ``executor`` runs at once: a process pool's workers, a Dask cluster's
    threads, else this machine's CPUs."""
    if isinstance(executor, LocalPool):
        return executor.workers
    n = getattr(executor, "_max_workers", None)
    if not n:
        client = getattr(executor, "_client", None)
        try:
            n = sum(client.nthreads().values())
        except Exception:       # not a Dask executor, or its cluster is still starting
            n = None
    return max(1, n or os.cpu_count() or 1)


class _Run:
    """The state of one ``run_sweep``: the spec's cells stream by in order, each found done
    (a valid record), claimed and run here, or left to the sweep that holds its claim."""

    def __init__(self, folder: Path, executor: Executor | None, bar):
        self.folder = folder
        self.cells = _cells_folder(folder)
        self.executor = executor
        self.bar = bar
        self.present = _record_names(self.cells)
        self.claims = _Claims(self.cells)
        self.rows: list[dict | None] = []           # spec order; None until known
        self.failed: list[tuple[str, str]] = []
        self.ran = self.skipped = self.elsewhere = 0
        self.inflight: dict[Future, tuple[int, Cell]] = {}
        self.waiting: dict[int, Cell] = {}          # cells another sweep holds
        self.warned: set[str] = set()

    def _valid(self, cell: Cell) -> dict | None:
        """The cell's record if its file is there and valid; a file that is there but invalid
        is warned about (once) and counts as missing."""
        path = self.cells / f"{cell.key}.json"
        try:
            return _read_record(path)
        except FileNotFoundError:
            return None
        except (ValueError, OSError) as err:
            if cell.key not in self.warned:
                self.warned.add(cell.key)
                message = err if isinstance(err, ValueError) else f"{path.name} cannot be read ({err.strerror})"
                warnings.warn(SweepWarning(f"{message}; running its cell again"), stacklevel=2)
            return None

    def _done(self, i: int, record: dict, counter: str) -> None:
        self.rows[i] = _flat(record)
        setattr(self, counter, getattr(self, counter) + 1)
        self.bar.update(1)

    def add(self, cell: Cell) -> None:
        """The next cell of the spec: done, run (or sent to run), or left waiting."""
        i = len(self.rows)
        self.rows.append(None)
        if cell.key in self.present:
            record = self._valid(cell)
            if record is not None:
                self._done(i, record, "skipped")
                return
        self._claim_and_run(i, cell)

    def _claim_and_run(self, i: int, cell: Cell) -> bool:
        """Run the cell (or send it to run) if this sweep can claim it and it is still not
        done; False if it did not (another sweep holds it, or has just finished it)."""
        if not self.claims.take(cell.key):
            self.waiting[i] = cell
            return False
        record = self._valid(cell)     # another sweep may have finished it since the folder was listed
        if record is not None:
            self.claims.release(cell.key)
            self._done(i, record, "elsewhere")
            return False
        blocked = self.cells / f"{cell.key}.json"
        if os.path.lexists(blocked) and not blocked.is_file():
            self.claims.release(cell.key)        # its record could never be written there
            self.failed.append((cell.key, f"{_describe(cell)}: {blocked.name} is in the way (not a regular file); "
                                          "remove it to run this cell"))
            self.bar.update(1)
            return True
        if self.executor is None:
            self.bar.set_postfix_str(_describe(cell), refresh=False)
            try:
                outcome = run_cell(cell)
            except Exception as err:       # one bad cell does not stop the others
                outcome = err
            self.finish(i, cell, outcome)
        else:
            self.inflight[self.executor.submit(run_cell, cell)] = (i, cell)
        return True

    def finish(self, i: int, cell: Cell, outcome) -> None:
        """Write the cell's record (then let go of its claim), or note its failure."""
        try:
            if isinstance(outcome, BaseException):
                self.failed.append((cell.key, f"{_describe(cell)}: {_one_line(outcome)}"))
            else:
                write_json(self.cells / f"{cell.key}.json", outcome)
                self.rows[i] = _flat(outcome)
                self.ran += 1
        finally:
            self.claims.release(cell.key)
        self.bar.update(1)

    def look_again(self, room: int) -> None:
        """The waiting cells: done by the sweep that held them, or free to take (that sweep
        ended without a record); at most ``room`` of them are started here."""
        for i, cell in list(self.waiting.items()):
            if room <= 0:
                break
            if (self.cells / f"{cell.key}.json").exists():
                record = self._valid(cell)
                if record is not None:
                    del self.waiting[i]
                    self._done(i, record, "elsewhere")
                    continue
            del self.waiting[i]
            if self._claim_and_run(i, cell):
                room -= 1

    def collect(self, timeout: float | None) -> None:
        """Wait for at least one running cell (up to ``timeout`` seconds) and finish those done."""
        done, _ = wait(list(self.inflight), timeout=timeout, return_when=FIRST_COMPLETED)
        for future in done:
            i, cell = self.inflight.pop(future)
            try:
                err = future.exception()
            except CancelledError as cancelled:     # e.g. the cluster went away
                err = cancelled
            self.finish(i, cell, err if err is not None else future.result())

    def abandon(self) -> None:
        """On an interrupt or an error: stop waiting for running cells and let go of every
        claim. A process pool's futures are left to the pool's own shutdown (cancelling them
        from here races with its manager thread, which then fails them: an InvalidStateError
        on Python < 3.12); other executors' (Dask) are cancelled."""
        if self.executor is not None and not isinstance(self.executor, (ProcessPoolExecutor, LocalPool)):
            for future in self.inflight:
                future.cancel()
        self.inflight.clear()
        self.claims.release_all()


def _fit_pool(executor: Executor | None, spec: Spec, folder: Path) -> None:
    """Start a ``LocalPool``'s workers, no more than the cells still to run (by
    ``count_to_run``), and none when every cell is done: idle workers cost a process each."""
    if isinstance(executor, LocalPool):
        executor.start(count_to_run(spec, folder, at_most=executor.limit))


def run_sweep(spec, output, *, executor: Executor | None = None, progress: bool | None = None) -> SweepOutcome:
    """Run every cell of ``spec`` (a ``Spec``, a mapping or a spec file) that has no valid
    record in ``output`` yet, writing each record as it finishes, then write ``output/results.csv``.

    The spec is checked first (its size against ``max_cells`` and the memory budget, every
    name), then its cells stream in spec order: a cell with a valid record is skipped, a
    file in its place that is not a valid record is warned about (``SweepWarning``) and the
    cell runs again; at most twice as many cells as the executor has workers are in flight.
    A cell another sweep on the same folder has claimed is left to it, and waited for: when
    this returns, every cell is done (or failed), whoever ran it.

    ``executor``: any ``concurrent.futures.Executor`` (see ``verify.sweep.executors``), or None to
    run in this process; a ``LocalPool`` (what ``open_executor(processes=N)`` gives) starts
    no more workers than there are cells still to run, and none when none is. ``progress``:
    a tqdm bar of cells done (None: only on a terminal). Raises ``SweepError`` after the
    table is written if any cell raised.
    """
    from tqdm.auto import tqdm

    spec = _as_spec(spec)
    total = _check_size(spec)
    stream = _walk(_tables(spec))            # every name is checked here, before anything is written
    folder = Path(output)
    _cells_folder(folder).mkdir(parents=True, exist_ok=True)
    _fit_pool(executor, spec, folder)
    window = 1 if executor is None else 2 * _capacity(executor)
    with tqdm(total=total, unit="cell", desc="fedverify sweep", disable=True if progress is False else None,
              file=sys.stderr) as bar:
        run = _Run(folder, executor, bar)
        pause = 0.05
        try:
            for cell in stream:
                if cell is None:                 # an earlier table's cell
                    bar.update(1)
                    continue
                run.add(cell)
                while len(run.inflight) >= window:
                    run.collect(None)
            while run.inflight or run.waiting:
                if run.waiting:
                    run.look_again(window - len(run.inflight))
                if run.inflight:
                    run.collect(_POLL_SECONDS if run.waiting else None)
                elif run.waiting:                # every cell left is another sweep's
                    time.sleep(pause)
                    pause = min(2 * pause, _POLL_SECONDS)
        except BaseException:
            run.abandon()
            raise
    rows = [row for row in run.rows if row is not None]
    table = write_table(folder / RESULTS_FILE, rows)
    outcome = SweepOutcome(rows, run.ran, run.skipped, run.failed, folder, table, run.elsewhere)
    if run.failed:
        raise SweepError(f"{len(run.failed)} of {len(run.rows)} cells failed (first: {run.failed[0][1]}); "
                         f"the other records are in {folder}", outcome)
    return outcome
