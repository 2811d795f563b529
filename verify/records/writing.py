"""Writing run records: ``RunRecorder`` appends one synced line per round from any training loop,
``record_from_history`` writes the record of a run of fedverify's engine, ``amend_header`` adds
constants and hyper-parameters to a finished record's header, and ``algorithm_fields`` and
``availability_of`` give the header fields of an algorithm and of a participation pattern.
"""
from __future__ import annotations

import json
import math
import numbers
import os
import stat
import warnings
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from .fields import FORMAT, PER_CLIENT, VERSION, _ROUND_REQUIRED, _finite, _kind, check_header, check_round
from .reading import _parse_line, load_record

__all__ = ["RunRecorder", "record_from_history", "availability_of", "algorithm_fields", "amend_header"]

def _client_ids(ids, name: str) -> list[int]:
    """Client ids as sorted ints: integers (or integral floats); a boolean mask or a fractional id
    is refused, since reading either as ids would record the wrong clients."""
    a = np.atleast_1d(np.asarray(ids))
    if a.dtype == bool:
        raise ValueError(f"{name} is a boolean mask; give the client ids (np.flatnonzero(mask))")
    if a.size and not (np.issubdtype(a.dtype, np.integer) or (np.issubdtype(a.dtype, np.floating)
                                                              and np.all(np.isfinite(a)) and np.all(a == np.round(a)))):
        bad = a.ravel()[0] if not np.issubdtype(a.dtype, np.number) else a[~(a == np.round(a))].ravel()[:1]
        raise ValueError(f"{name} must hold integer client ids, got {np.asarray(bad).tolist()!r}")
    return sorted(int(i) for i in a.astype(np.int64).ravel())



def _plain(value):
    """``value`` with numpy scalars and arrays as JSON numbers and lists (None stays None)."""
    if value is None:
        return None
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, np.generic) or (isinstance(value, np.ndarray) and value.ndim == 0):
        return value.item()
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_plain(v) for v in value]
    return value


def _per_client(values, name: str, n: int) -> list:
    """One round's per-client values as N JSON numbers or nulls (None and NaN are null)."""
    items = list(values)
    if len(items) != n:
        raise ValueError(f"{name} has {len(items)} entries; give one per client ({n}), None where undefined")
    out = []
    for i, v in enumerate(items):
        if v is None or (isinstance(v, float) and math.isnan(v)) or (isinstance(v, np.floating) and np.isnan(v)):
            out.append(None)
        else:
            out.append(_json_number(v, f"{name} of client {i}"))
    return out


def _json_number(value, name: str = "a recorded number"):
    if isinstance(value, (str, bytes, bool)) or not isinstance(value, (numbers.Real, np.ndarray)) or np.ndim(value) != 0:
        raise ValueError(f"{name} must be a number, got {_kind(value)}")
    try:
        value = float(value)
    except OverflowError:
        raise ValueError(f"{name} must be finite, got an integer of {len(str(abs(value)))} digits") from None
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    return value


class RunRecorder:
    """Writes a run record from any training loop::

        with RunRecorder("run.jsonl", n_clients=N, algorithm="fedavg", local_steps=K,
                         step_sizes={"eta_g": 1.0, "eta_l": 0.05}, constants={"L": L, ...}) as rec:
            for t in range(T):
                ...                                   # train round t from x_t
                rec.record_round(t, selected, replied, grad_norm2=g2, loss=f)

    Each ``record_round`` appends one whole line and syncs it. ``resume=True`` reopens an existing
    record whose header agrees (same n_clients and settings), keeps its complete rounds, and
    continues from ``next_round``; without it an existing file is refused (nothing is lost)."""

    def __init__(self, path, n_clients: int, *, algorithm: str | None = None, local_steps: int | None = None,
                 step_sizes: dict | None = None, seed: int | None = None, constants: dict | None = None,
                 problem=None, notes: str | None = None, hparams: dict | None = None, schedule: dict | None = None,
                 availability: dict | None = None, resume: bool = False):
        self.path = Path(path)
        n_clients = _plain(n_clients)
        header = {"format": FORMAT, "version": VERSION, "n_clients": n_clients}
        for key, value in (("algorithm", algorithm), ("local_steps", local_steps), ("step_sizes", step_sizes),
                           ("seed", seed), ("constants", constants), ("problem", problem), ("notes", notes),
                           ("hparams", hparams), ("schedule", schedule), ("availability", availability)):
            if value is not None:
                header[key] = _plain(value)
        check_header({**header}, self.path)
        self.n_clients = n_clients
        self._file = None
        self._lock = None
        if self.path.exists() and self.path.stat().st_size > 0:
            if not resume:
                raise ValueError(f"{self.path.name} exists; pass resume=True to continue it, or choose another path")
            self._hold_lock()
            try:
                self.next_round = self._resumable(header)
            except BaseException:
                self.close()
                raise
        else:
            header["created"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._append(header, new=True)
            self.next_round = 0

    def _resumable(self, header: dict) -> int:
        """The next round of the existing record, once its header agrees with ``header`` and every
        line but a cut-off last one is a valid round; the cut-off line is removed."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            old = load_record(self.path)
        mismatch = [k for k in header if k != "created" and old.header.get(k) != header[k]]
        if mismatch:
            raise ValueError(f"{self.path.name}: cannot resume, its {mismatch[0]} is "
                             f"{old.header.get(mismatch[0])!r}, not {header[mismatch[0]]!r}")
        self._truncate_to_complete_lines()
        return old.n_rounds

    def _hold_lock(self) -> None:
        """Hold an exclusive lock on the record while this recorder lives (until ``close``): a
        second recorder, resuming or creating, is refused instead of appending rounds of its own."""
        fd = os.open(self.path, os.O_RDONLY)
        if not _lock_exclusively(fd):
            os.close(fd)
            raise ValueError(f"{self.path.name} is being written by another recorder; wait for it to finish "
                             "or choose another path")
        self._lock = fd

    def close(self) -> None:
        """Release the record for other recorders (``with RunRecorder(...)`` does it on exit)."""
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None

    def __del__(self):
        lock = getattr(self, "_lock", None)
        if lock is not None:
            try:
                os.close(lock)
            except OSError:
                pass

    def _truncate_to_complete_lines(self) -> None:
        raw = self.path.read_bytes()
        keep = raw.rfind(b"\n") + 1
        if keep < len(raw):
            with open(self.path, "r+b") as f:
                f.truncate(keep)

    def _append(self, entry: dict, *, new: bool = False) -> None:
        """Append one line and flush it to disk. ``new``: the header of a new record, written
        exclusively: of several recorders started at once on one path, the one that first holds an
        exclusive lock on the empty file writes it and keeps the lock (the file stays open as the
        recorder's lock until ``close``), the others are refused (an empty file already there counts
        as new)."""
        line = (json.dumps(entry, ensure_ascii=False, allow_nan=False, separators=(",", ":")) + "\n").encode("utf-8")
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        keep = False
        try:
            if new:
                self._claim_empty(fd)
            if os.write(fd, line) != len(line):
                raise OSError(f"short write to {self.path.name}")
            os.fsync(fd)
            keep = new
        finally:
            if keep:
                self._lock = fd
            else:
                os.close(fd)

    def _claim_empty(self, fd: int) -> None:
        if not _lock_exclusively(fd):
            raise ValueError(f"{self.path.name} is being created by another recorder; choose another path")
        if os.fstat(fd).st_size:
            raise ValueError(f"{self.path.name} was created by another recorder at the same time; choose another path")

    def record_round(self, t: int, selected, replied, **metrics) -> None:
        """Append round ``t`` (must be ``next_round``): who was sent work, who replied, and
        measured values: numbers, or for the fields of :data:`PER_CLIENT` a sequence of N
        (None or NaN where undefined for a client)."""
        if t != self.next_round:
            raise ValueError(f"round {t}: the record expects round {self.next_round} next")
        entry = {"round": int(t), "selected": _client_ids(selected, "selected"), "replied": _client_ids(replied, "replied")}
        for key, value in metrics.items():
            if key in _ROUND_REQUIRED:
                raise ValueError(f"{key!r} is a reserved field of a round")
            if key in PER_CLIENT and value is not None and np.ndim(value) == 1:
                entry[key] = _per_client(value, key, self.n_clients)
            else:
                entry[key] = None if value is None else _json_number(value, key)
        check_round(entry, t, self.n_clients, self.path)
        self._append(entry)
        self.next_round += 1

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def _lock_exclusively(fd: int) -> bool:
    """Take an exclusive advisory lock on ``fd`` without waiting: False when another open file
    holds one; True where the system has no advisory locks (Windows: no coordination)."""
    try:
        import fcntl
    except ImportError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


def algorithm_fields(algorithm) -> dict:
    """``hparams`` and ``schedule`` of a record header for an ``algorithms.Algorithm``: its
    hyper-parameters other than the step sizes and K that a record can hold (numbers, text,
    lists of numbers), and its stage schedule when it has one."""
    hparams, schedule = {}, None
    for key, value in algorithm.hparams.items():
        if key.startswith("eta") or key == "local_steps" or value is None:
            continue
        if key == "schedule":
            schedule = {"lengths": [int(v) for v in value.lengths], "eta_g": [float(v) for v in value.eta_g],
                        "beta": [float(v) for v in value.beta], "nu": [float(v) for v in value.nu],
                        "eta_l": float(value.eta_l)}
            continue
        value = _plain(value)
        if isinstance(value, (str, bool)) or _finite(value) or (
                isinstance(value, list) and value and all(_finite(v) for v in value)):
            hparams[key] = value
    return {"hparams": hparams or None, "schedule": schedule}


def amend_header(path, *, constants: dict | None = None, hparams: dict | None = None) -> Path:
    """Add ``constants`` and ``hparams`` to the header of a finished record (merged into its own;
    the rounds are kept byte for byte). The new file is written beside it and renamed onto it,
    holding the record's lock throughout: a record that a ``RunRecorder`` is still writing (or
    another amendment holds) is refused, since the rounds it appends meanwhile would be lost."""
    path = Path(path)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))       # a pipe does not wait for a writer
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError(f"run record {path.name} is not a regular file (a pipe, a device or a folder)")
        if not _lock_exclusively(fd) or os.fstat(fd).st_ino != os.stat(path).st_ino:
            raise ValueError(f"{path.name} is being written by a recorder (or amended); amend it once the run "
                             "has finished")
        with os.fdopen(os.dup(fd), "rb") as f:
            raw = f.read()
        first, _, rest = raw.partition(b"\n")
        header = check_header(_parse_line(path, 1, first), path)
        for key, more in (("constants", constants), ("hparams", hparams)):
            if more:
                header[key] = {**(header.get(key) or {}), **_plain(more)}
        check_header(header, path)
        line = json.dumps(header, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")
        partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
        try:
            with open(partial, "wb") as f:
                f.write(line + b"\n" + rest)
                f.flush()
                os.fsync(f.fileno())
            os.replace(partial, path)
        finally:
            partial.unlink(missing_ok=True)
    finally:
        os.close(fd)
    return path


def availability_of(source) -> dict | None:
    """The header's ``availability`` for a participation pattern fedverify draws from: the
    pattern's own ``record_header()`` (``participation.patterns.HEADER_MODELS``: Uniform → uniform
    m or full, Cyclic → cyclic m, ReshuffledCyclic → reshuffled m, Markov → markov π, λ, Bernoulli
    with per-client p → bernoulli p), a trace where every client takes part every round → full;
    None for any other source (another trace, a pattern no header model describes)."""
    from participation import Trace
    from participation.patterns import Pattern

    if isinstance(source, Pattern):
        return source.record_header()
    if isinstance(source, Trace) and source.mask.all():
        return {"model": "full"}
    return None


def _engine_fields(history, mask: np.ndarray, averaged_losses) -> list[dict]:
    """Per round, the v2 fields of an engine run's ``observed`` (``algorithms.run(observe=True)``)."""
    T, N = mask.shape
    obs = history.observed or {}
    rows: list[dict] = [{} for _ in history.rounds]
    index = {int(t): i for i, t in enumerate(history.rounds)}
    for name in ("heterogeneity", "heterogeneity_max", "param_norm"):
        for i, value in enumerate(np.asarray(obs.get(name, []), dtype=float)[:len(rows)]):
            rows[i][name] = value
    for t, value in enumerate(np.asarray(obs.get("local_norm", []), dtype=float)[:T]):
        if int(t) in index and np.isfinite(value):
            rows[index[t]]["local_norm"] = value
    for name in ("local_steps", "delays"):
        for t, values in enumerate(obs.get(name, ())[:T]):
            if int(t) in index:
                full = np.full(N, np.nan)
                full[np.flatnonzero(mask[t])] = np.asarray(values, dtype=float)
                rows[index[t]][name] = full
    for name, field_ in (("weights", "weights"), ("client_generator_error", "generator_error")):
        table = obs.get(name)
        if table is not None and len(table):
            for t, values in enumerate(np.asarray(table, dtype=float)[:T]):
                if int(t) in index:
                    rows[index[t]][field_] = values
    if averaged_losses is not None and rows:
        rows[-1]["avg_client_losses"] = np.asarray(averaged_losses, dtype=float)
    return rows


def record_from_history(path, history, trace, *, algorithm, local_steps: int, step_sizes: dict, seed: int | None,
                        constants: dict | None = None, problem=None, hparams: dict | None = None,
                        schedule: dict | None = None, availability: dict | None = None, averaged_losses=None) -> Path:
    """Write the record of a run of fedverify's engine (``algorithms.run``): the trace as both
    selected and replied, and per round ‖∇f(x_t)‖², f(x_t), accuracy and what the run observed
    (``observe=True``: heterogeneity, local steps and delays, weights, generator errors; needs
    ``record_every=1``); ``averaged_losses``: F_k at the run's averaged iterate, written in the
    last round. The whole record is written beside ``path`` and renamed onto it (an old one is
    replaced)."""
    mask = np.asarray(trace.mask if hasattr(trace, "mask") else trace, dtype=bool)
    path = Path(path)
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    partial.unlink(missing_ok=True)
    try:
        with RunRecorder(partial, mask.shape[1], algorithm=algorithm, local_steps=local_steps,
                         step_sizes={k: float(v) for k, v in step_sizes.items()}, seed=seed, constants=constants,
                         problem=problem, hparams=hparams, schedule=schedule, availability=availability) as rec:
            extra = _engine_fields(history, mask, averaged_losses)
            for i, t in enumerate(history.rounds):
                ids = np.flatnonzero(mask[t])
                metrics = {"grad_norm2": history.grad_norm2[i], "loss": history.loss[i], **extra[i]}
                if history.accuracy is not None and np.isfinite(history.accuracy[i]):
                    metrics["accuracy"] = history.accuracy[i]
                rec.record_round(int(t), ids, ids, **metrics)
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
    return path
