"""The output folder of a sweep: its records, read and checked, and the claims on its cells.

Each finished cell is written at once, atomically, to ``OUTPUT/cells/<key>.json`` (the record
``run_cell`` returns); ``OUTPUT/results.csv`` is the table of the spec's cells. A sweep started
again skips every cell whose record exists and is valid (``finished_keys``; ``count_to_run``
estimates the rest from one listing), so an interrupted sweep (even by ``kill -9``) resumes
losing no finished cell and running none twice. A record is valid when it is a JSON object
whose name is the hash of its kind and config and whose config and results hold every field of
the table with a value of the right type; any other file in its place (truncated, emptied,
edited) counts as missing: ``run_sweep`` warns (``SweepWarning``, one line naming the file) and
runs the cell again, ``load_results`` raises a ValueError naming the file.

Several sweeps on one output folder split the work: before running a cell a sweep claims
it, by an exclusive ``flock`` on ``cells/<key>.claim`` (holding the claimant's pid and
host, removed when the record is written). A cell claimed by another sweep is not run
again: this sweep waits for its record (or, if that sweep dies, which releases its locks,
takes the cell over), so every sweep ends with the same complete table and no cell runs
twice. The locks are the operating system's, dropped when their process ends however it
ends: the claim file a ``kill -9`` leaves behind holds no lock and is simply taken over
(on a network file system the locks are as good as its locking; on systems without
``fcntl``, such as Windows, concurrent sweeps are not coordinated).
"""
from __future__ import annotations

import json
import os
import signal
import socket
import stat
import threading
import warnings
from contextlib import contextmanager
from pathlib import Path

from . import worst_case_cells
from .cells import SCHEMA_VERSION, cell_key
from .grid import iter_cells
from .spec import KINDS

try:
    import fcntl
except ImportError:      # Windows: no advisory locks, so no claims (see the module docstring)
    fcntl = None

__all__ = ["SweepWarning", "CELLS_FOLDER", "RESULTS_FILE", "CLAIM_SUFFIX", "finished_keys", "count_to_run"]

CELLS_FOLDER = "cells"
RESULTS_FILE = "results.csv"
CLAIM_SUFFIX = ".claim"
#: Largest record file read back (a record is a few KiB).
_MAX_RECORD_BYTES = 64 * 2**20


class SweepWarning(UserWarning):
    """Something in the output folder a sweep works around (an invalid record it runs again)."""


def _cells_folder(folder) -> Path:
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"output {str(folder)!r} exists and is not a folder")
    return folder / CELLS_FOLDER


_NONFINITE = ("inf", "-inf", "nan")


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)) or (isinstance(value, str)
                                                                                and value in _NONFINITE)


def _or_none(test):
    return lambda value: value is None or test(value)


def _is_text(value) -> bool:
    return isinstance(value, str)


def _is_bool(value) -> bool:
    return isinstance(value, bool)


def _is_scalar(value) -> bool:
    return value is None or isinstance(value, (bool, int, float, str))


#: What a valid record holds, per kind: its config's fields and its results' fields (every
#: one the table and the summary read), each with the test of its value.
_CONFIG_FIELDS = {
    "check": {"problem": _is_text, "algorithm": _is_text, "pattern": _is_text, "theorem": _is_text,
              "n_clients": _is_int, "rounds": _is_int, "local_steps": _is_int, "seed": _is_int, "runs": _is_int,
              "confidence": _is_number},
    "monte_carlo": {"pattern": _is_text, "n_clients": _or_none(_is_int), "rounds": _is_int, "reps": _is_int,
                    "seed": _is_int, "confidence": _is_number},
}
_RESULT_FIELDS = {
    "check": {"rounds_run": _is_int, **{name: _or_none(_is_number) for name in (
                  "tau_max", "tau_avg", "eta_g", "eta_l", "measured", "lower", "upper", "bound", "ratio", "final_loss",
                  "final_accuracy")},
              "verdict": _is_text, "label": _is_text, "covered": _is_bool, "conditions_hold": _is_bool,
              "violated_conditions": lambda v: isinstance(v, list) and all(map(_is_scalar, v)), "stopped": _is_scalar},
    "monte_carlo": {"n_clients": _is_int, "paper_bound": _or_none(_is_number)},
}
_CONFIG_FIELDS["worst_case"], _RESULT_FIELDS["worst_case"] = worst_case_cells.fields(
    _is_int, _is_number, _is_text, _is_bool, _or_none)
_ESTIMATE_FIELDS = {"mean": _or_none(_is_number), "stderr": _or_none(_is_number), "ci_low": _is_number,
                    "ci_high": _is_number, "exact": _or_none(_is_number)}


def _record_problem(record, name: str) -> str | None:
    """Why ``record`` (read from ``<name>.json``) is not a valid record, or None if it is."""
    if not isinstance(record, dict):
        return "not a JSON object"
    kind, config, results = record.get("kind"), record.get("config"), record.get("results")
    if kind not in KINDS or not isinstance(config, dict) or not isinstance(results, dict):
        return "its key, kind, config or results are missing"
    schema = record.get("schema", SCHEMA_VERSION)
    try:
        key = cell_key(kind, config, schema) if _is_int(schema) else None
    except (TypeError, ValueError):       # not plain JSON values
        key = None
    if record.get("key") != name or key != name:
        return "its name is not the hash of its kind and config"
    for part, fields in (("config", _CONFIG_FIELDS[kind]), ("results", _RESULT_FIELDS[kind])):
        values = record[part]
        for field_, test in fields.items():
            if field_ not in values or not test(values[field_]):
                return f"{part}.{field_} is missing or of the wrong type"
    if kind == "monte_carlo":
        for name_ in ("tau_max", "tau_avg"):
            estimate = results.get(name_)
            if not isinstance(estimate, dict) or not all(k in estimate and test(estimate[k])
                                                         for k, test in _ESTIMATE_FIELDS.items()):
                return f"results.{name_} is missing or of the wrong type"
    timing = record.get("timing", {})
    if not isinstance(timing, dict) or not _or_none(_is_number)(timing.get("seconds")):
        return "its timing is of the wrong type"
    return None


def _read_record(path: Path) -> dict:
    """The record in ``path``, or a one-line ValueError naming the file and saying what is wrong
    (a pipe or a folder in its place is never opened: a pipe would block)."""
    info = path.stat()             # FileNotFoundError: no record
    if not stat.S_ISREG(info.st_mode):
        raise ValueError(f"{path.name} is not a sweep record (not a regular file)")
    with open(path, "rb") as f:
        data = f.read(_MAX_RECORD_BYTES + 1)
    problem = None
    if len(data) > _MAX_RECORD_BYTES:
        problem = f"larger than {_MAX_RECORD_BYTES // 2**20} MiB"
    else:
        try:
            record = json.loads(data)
        except (ValueError, RecursionError):      # JSONDecodeError, UnicodeDecodeError, a deep nesting
            problem = "not JSON"
        else:
            problem = _record_problem(record, path.stem)
    if problem is not None:
        raise ValueError(f"{path.name} is not a sweep record ({problem})")
    return record


def _record_names(cells: Path) -> set[str]:
    """The names (keys) of the record files in ``cells``: one listing of the folder."""
    try:
        with os.scandir(cells) as entries:
            return {e.name[:-5] for e in entries if e.name.endswith(".json") and not e.name.startswith(".")}
    except FileNotFoundError:
        return set()


def finished_keys(spec, output) -> set[str]:
    """The keys of the cells of ``spec`` whose record in ``output`` is valid (a missing or
    invalid one is a cell still to run). One listing of the folder, one read of each record
    of the spec's cells; nothing else."""
    cells = _cells_folder(output)
    present = _record_names(cells)
    done = set()
    for cell in iter_cells(spec):
        if cell.key in present:
            try:
                _read_record(cells / f"{cell.key}.json")
            except (ValueError, OSError):
                continue
            done.add(cell.key)
    return done


def count_to_run(spec, output, at_most: int | None = None) -> int:
    """How many cells of ``spec`` have no record file in ``output``, counting no further than
    ``at_most``: a quick estimate (one listing of the folder, no record read: an invalid
    record counts as done here, though ``run_sweep`` runs its cell again) for sizing a pool."""
    present = _record_names(_cells_folder(output))
    n = 0
    for cell in iter_cells(spec):
        if cell.key not in present:
            n += 1
            if at_most is not None and n >= at_most:
                break
    return n


@contextmanager
def _interrupts_deferred():
    """SIGINT and SIGTERM held back (in the main thread, where Python runs its handlers) until the
    block ends; they are delivered then, at once."""
    if not hasattr(signal, "pthread_sigmask") or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


class _Claims:
    """This process's claims on cells of one output folder.

    A claim is an exclusive, non-blocking ``flock`` on ``cells/<key>.claim`` (the file holds
    the claimant's pid and host, for a reader). The lock, not the file, is the claim: the
    operating system drops it when its process ends, however it ends, so a claim is never
    stale. Whoever holds a claim removes its file before letting go, and a lock taken on a
    file that is no longer at its path (removed meanwhile) is let go and taken again, so two
    sweeps never hold one cell. Without ``fcntl``, or on a file system that cannot lock
    (warned about once), every claim succeeds: no coordination."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.held: dict[str, int] = {}
        self.note = (json.dumps({"pid": os.getpid(), "host": socket.gethostname()}) + "\n").encode()
        self.locking = fcntl is not None

    def _path(self, key: str) -> Path:
        return self.folder / f"{key}{CLAIM_SUFFIX}"

    def take(self, key: str) -> bool:
        """Claim ``key``; False if another live process holds it. An interrupt (SIGINT, SIGTERM)
        waits until the claim is either held (so that ``release_all`` removes its file) or not
        made at all: a file created just before the interrupt would otherwise stay behind."""
        with _interrupts_deferred():
            return self._take(key)

    def _take(self, key: str) -> bool:
        if not self.locking:
            self.held[key] = -1
            return True
        path = self._path(key)
        while True:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                return False
            except OSError as err:        # ENOLCK, EOPNOTSUPP: a file system without locks
                os.close(fd)
                path.unlink(missing_ok=True)
                self.locking = False
                warnings.warn(SweepWarning(f"cannot lock files in {str(self.folder)!r} ({err.strerror}): sweeps "
                                           f"started together on it would each run every cell"), stacklevel=3)
                return self._take(key)
            except BaseException:
                os.close(fd)
                raise
            self.held[key] = fd   # from here an interrupt's release_all removes the file
            try:
                try:
                    on_disk, ours = os.stat(path), os.fstat(fd)
                    current = (on_disk.st_dev, on_disk.st_ino) == (ours.st_dev, ours.st_ino)
                except FileNotFoundError:
                    current = False
                if current:
                    os.ftruncate(fd, 0)
                    os.pwrite(fd, self.note, 0)
                    return True
            except BaseException:
                self.release(key)
                raise
            del self.held[key]
            os.close(fd)          # its holder removed it after we opened it: take the new one

    def release(self, key: str) -> None:
        with _interrupts_deferred():
            self._release(key)

    def _release(self, key: str) -> None:
        fd = self.held.pop(key, None)
        if fd is None or fd < 0:
            return
        try:
            self._path(key).unlink(missing_ok=True)
        finally:
            os.close(fd)

    def release_all(self) -> None:
        for key in list(self.held):
            self.release(key)
