"""The run record: one open, versioned, append-only file per training run, made anywhere.

Format ``fedverify-run`` version 1, JSON Lines (UTF-8, one JSON object per line; the schema ships
as ``verify/schemas/run-record.schema.json``):

* line 1, the header: ``{"format": "fedverify-run", "version": 1, "n_clients": N, ...}`` with
  optional ``algorithm`` (a name), ``local_steps`` K, ``step_sizes`` (``eta_g``, ``eta_l``, ...),
  ``seed``, ``constants`` (``L``, ``sigma2``, ``delta_f``, ``F0``, ... and ``source``: how they were
  obtained), ``problem`` and ``notes`` (free text), ``created`` (ISO time);
* one line per round, in order t = 0, 1, …: ``{"round": t, "selected": [ids], "replied": [ids],
  "grad_norm2": ‖∇f(x_t)‖², "loss": f(x_t), "accuracy": ..., ...}``: ``selected`` the clients sent
  work, ``replied`` those whose update arrived (S_t, the participation the theorems see; a
  subset of ``selected``), and any measured quantities (numbers; ``grad_norm2`` is what FedSUM's
  left side needs, at the model x_t the round starts from).

Every round is one ``write`` of a whole line, flushed and synced before ``record_round`` returns,
so a crash loses at most the round being written: :func:`load_record` keeps every complete line,
drops a cut-off last line with a one-line warning, and refuses anything else malformed with a
one-line ValueError naming the line and the field. Nothing is ever unpickled.
"""
from __future__ import annotations

import json
import math
import numbers
import os
import stat
import warnings
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from participation.files import strict_json

__all__ = ["RunRecord", "RunRecorder", "load_record", "FORMAT", "VERSION", "SCHEMA_PATH", "record_from_history"]

FORMAT = "fedverify-run"
VERSION = 1
SCHEMA_PATH = Path(__file__).resolve().parent / "schemas" / "run-record.schema.json"
_HEADER_OPTIONAL = {"algorithm": str, "local_steps": int, "step_sizes": dict, "seed": int, "constants": dict,
                    "problem": (str, dict), "notes": str, "created": str}
_ROUND_REQUIRED = ("round", "selected", "replied")
#: Bytes of parsed JSON (Python lists of ints, dicts) per byte of a record's text, for the memory budget.
PARSED_BYTES_PER_BYTE = 16


@dataclass(frozen=True)
class RunRecord:
    """A loaded record: ``header`` (dict), ``mask`` (T, N) bool of S_t (who replied),
    ``selected`` (T, N) bool, ``metrics`` name → (T,) float64 (NaN where a round did not report
    it), ``path``. ``trace`` is the participation as a ``participation.Trace``."""

    header: dict
    mask: np.ndarray
    selected: np.ndarray
    metrics: dict = field(default_factory=dict)
    path: Path | None = None

    @property
    def n_clients(self) -> int:
        return int(self.header["n_clients"])

    @property
    def n_rounds(self) -> int:
        return int(self.mask.shape[0])

    @property
    def trace(self):
        from participation import Trace

        return Trace(self.mask)

    def metric(self, name: str) -> np.ndarray:
        if name not in self.metrics:
            raise ValueError(f"{self.path or 'the record'} has no {name!r} per round; it records "
                             f"{', '.join(self.metrics) or 'no metrics'}")
        return self.metrics[name]


def _where(path, line: int | None) -> str:
    name = Path(path).name if path is not None else "record"
    return f"{name}, line {line}" if line is not None else name


def _check_ids(ids, name: str, n: int, where: str) -> list[int]:
    if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        raise ValueError(f"{where}: {name} must be a list of integer client ids, got {str(ids)[:60]}")
    bad = [i for i in ids if not 0 <= i < n]
    if bad:
        raise ValueError(f"{where}: {name} has client id {bad[0]} outside 0..{n - 1} (n_clients = {n})")
    if len(set(ids)) != len(ids):
        raise ValueError(f"{where}: {name} repeats a client id")
    return ids


def check_header(header, path=None) -> dict:
    """The header, validated: format, version, n_clients and the types of the optional fields."""
    where = _where(path, 1)
    if not isinstance(header, dict):
        raise ValueError(f"{where}: the header must be a JSON object")
    if header.get("format") != FORMAT:
        raise ValueError(f"{where}: format must be {FORMAT!r}, got {header.get('format')!r}")
    if type(header.get("version")) is not int or header.get("version") != VERSION:
        raise ValueError(f"{where}: version {header.get('version')!r} is not supported (this fedverify reads {VERSION})")
    n = header.get("n_clients")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"{where}: n_clients must be an integer ≥ 1, got {n!r}")
    for key, kind in _HEADER_OPTIONAL.items():
        if key in header and header[key] is not None and (
                not isinstance(header[key], kind) or (kind is int and isinstance(header[key], bool))):
            raise ValueError(f"{where}: {key} has the wrong type ({type(header[key]).__name__})")
    if "local_steps" in header and header["local_steps"] is not None and header["local_steps"] < 1:
        raise ValueError(f"{where}: local_steps must be an integer ≥ 1, got {header['local_steps']!r}")
    for name, value in (header.get("step_sizes") or {}).items():
        if not _is_number(value) or not math.isfinite(value):
            raise ValueError(f"{where}: step_sizes.{name} must be a finite number, got {value!r}")
    for name, value in (header.get("constants") or {}).items():
        if name == "source":
            if not isinstance(value, str):
                raise ValueError(f"{where}: constants.source must be text, got {value!r}")
        elif not _is_number(value) or not math.isfinite(value):
            raise ValueError(f"{where}: constants.{name} must be a finite number, got {value!r}")
        elif name in ("L", "sigma2", "delta_f", "F0") and not value >= 0:
            raise ValueError(f"{where}: constants.{name} must be ≥ 0, got {value!r}")
    return header


def _is_number(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def check_round(entry, t: int, n: int, path=None, line: int | None = None) -> dict:
    """One round line, validated against the header's N and its position t."""
    where = _where(path, line)
    if not isinstance(entry, dict):
        raise ValueError(f"{where}: a round must be a JSON object")
    for key in _ROUND_REQUIRED:
        if key not in entry:
            raise ValueError(f"{where}: missing field {key!r}")
    if entry["round"] != t or isinstance(entry["round"], bool):
        raise ValueError(f"{where}: round must be {t} (rounds are recorded in order from 0), got {entry['round']!r}")
    selected = _check_ids(entry["selected"], "selected", n, where)
    replied = _check_ids(entry["replied"], "replied", n, where)
    if not set(replied) <= set(selected):
        raise ValueError(f"{where}: replied has client {sorted(set(replied) - set(selected))[0]} that was not selected")
    for key, value in entry.items():
        if key in _ROUND_REQUIRED:
            continue
        if value is not None and not _is_number(value):
            raise ValueError(f"{where}: {key} must be a number or null, got {str(value)[:40]}")
        if key == "grad_norm2" and value is not None and not value >= 0:
            raise ValueError(f"{where}: grad_norm2 is a squared norm and must be ≥ 0, got {value!r}")
    return entry


def load_record(path) -> RunRecord:
    """Read a record (see the module docstring); a cut-off last line is dropped with a warning."""
    path = Path(path)
    from participation.budget import require_memory

    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"run record {path.name} is not a regular file (a pipe, a device or a folder)")
        # the parsed lines hold about this many bytes of Python objects per byte of the file
        require_memory(PARSED_BYTES_PER_BYTE * info.st_size, f"reading run record {path.name} ({info.st_size} bytes)")
        raw = path.read_bytes()
    except OSError as err:
        raise ValueError(f"cannot read run record {path.name}: {err.strerror or err}") from None
    lines = raw.split(b"\n")
    complete = raw.endswith(b"\n")
    cut = lines.pop() if not complete and lines and lines[-1] else None
    numbered = [(i, text) for i, text in enumerate(lines, start=1) if text.strip()]   # physical line numbers
    if not numbered and cut is not None:     # a single line without its newline: read it as the header
        numbered, cut = [(1, cut)], None
    if not numbered:
        raise ValueError(f"{path.name}: empty run record (no header line)")
    entries = []
    for i, text in numbered:
        try:
            entries.append(strict_json(text.decode("utf-8")))
        except UnicodeDecodeError:
            raise ValueError(f"{_where(path, i)}: not UTF-8 text" + _not_a_record(i)) from None
        except ValueError as err:
            raise ValueError(f"{_where(path, i)}: not a JSON object ({str(err).splitlines()[0]})"
                             + _not_a_record(i)) from None
        if i == 1:
            check_header(entries[0], path)
    if cut is not None:             # a record whose last line was cut off mid-write: keep the complete rounds
        warnings.warn(f"{path.name}: the last line is cut off ({len(cut)} bytes, a run stopped mid-write); "
                      f"kept the {max(len(numbered) - 1, 0)} complete rounds", stacklevel=2)
    if numbered[0][0] != 1:
        raise ValueError(f"{_where(path, numbered[0][0])}: the header must be the first line")
    header = check_header(entries[0], path)
    n = header["n_clients"]
    require_memory(2.0 * n * max(len(entries) - 1, 1),
                   f"run record {path.name}: {len(entries) - 1} rounds × {n} clients (who was selected, who replied)")
    rounds = [check_round(e, t, n, path, numbered[t + 1][0]) for t, e in enumerate(entries[1:])]
    T = len(rounds)
    mask, selected = np.zeros((T, n), dtype=bool), np.zeros((T, n), dtype=bool)
    names = list(dict.fromkeys(k for e in rounds for k in e if k not in _ROUND_REQUIRED))
    metrics = {k: np.full(T, np.nan) for k in names}
    for t, e in enumerate(rounds):
        mask[t, e["replied"]] = True
        selected[t, e["selected"]] = True
        for k in names:
            if e.get(k) is not None:
                metrics[k][t] = float(e[k])
    return RunRecord(header=header, mask=mask, selected=selected, metrics=metrics, path=path)


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


def _not_a_record(line: int) -> str:
    return "; not a fedverify run record" if line == 1 else ""


def _json_number(value):
    try:
        value = float(value)
    except OverflowError:
        raise ValueError(f"a recorded number must be finite, got an integer of {len(str(abs(value)))} digits") from None
    if not math.isfinite(value):
        raise ValueError(f"a recorded number must be finite, got {value}")
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
                 problem=None, notes: str | None = None, resume: bool = False):
        self.path = Path(path)
        header = {"format": FORMAT, "version": VERSION, "n_clients": n_clients}
        for key, value in (("algorithm", algorithm), ("local_steps", local_steps), ("step_sizes", step_sizes),
                           ("seed", seed), ("constants", constants), ("problem", problem), ("notes", notes)):
            if value is not None:
                header[key] = value
        check_header({**header}, self.path)
        self.n_clients = n_clients
        self._file = None
        if self.path.exists() and self.path.stat().st_size > 0:
            if not resume:
                raise ValueError(f"{self.path.name} exists; pass resume=True to continue it, or choose another path")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                old = load_record(self.path)
            mismatch = [k for k in header if k != "created" and old.header.get(k) != header[k]]
            if mismatch:
                raise ValueError(f"{self.path.name}: cannot resume, its {mismatch[0]} is "
                                 f"{old.header.get(mismatch[0])!r}, not {header[mismatch[0]]!r}")
            self._truncate_to_complete_lines()
            self.next_round = old.n_rounds
        else:
            header["created"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._append(header, new=True)
            self.next_round = 0

    def _truncate_to_complete_lines(self) -> None:
        raw = self.path.read_bytes()
        keep = raw.rfind(b"\n") + 1
        if keep < len(raw):
            with open(self.path, "r+b") as f:
                f.truncate(keep)

    def _append(self, entry: dict, *, new: bool = False) -> None:
        """Append one line and flush it to disk. ``new``: the header of a new record, written
        exclusively: of several recorders started at once on one path, the one that first holds an
        exclusive lock on the empty file writes it, the others are refused (an empty file already
        there counts as new)."""
        line = (json.dumps(entry, ensure_ascii=False, allow_nan=False, separators=(",", ":")) + "\n").encode("utf-8")
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        try:
            if new:
                self._claim_empty(fd)
            if os.write(fd, line) != len(line):
                raise OSError(f"short write to {self.path.name}")
            os.fsync(fd)
        finally:
            os.close(fd)

    def _claim_empty(self, fd: int) -> None:
        try:
            import fcntl

            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except ImportError:            # no advisory locks (Windows): no coordination
            pass
        except OSError:
            raise ValueError(f"{self.path.name} is being created by another recorder; choose another path") from None
        if os.fstat(fd).st_size:
            raise ValueError(f"{self.path.name} was created by another recorder at the same time; choose another path")

    def record_round(self, t: int, selected, replied, **metrics) -> None:
        """Append round ``t`` (must be ``next_round``): who was sent work, who replied, and numbers."""
        if t != self.next_round:
            raise ValueError(f"round {t}: the record expects round {self.next_round} next")
        entry = {"round": int(t), "selected": _client_ids(selected, "selected"), "replied": _client_ids(replied, "replied")}
        for key, value in metrics.items():
            if key in _ROUND_REQUIRED:
                raise ValueError(f"{key!r} is a reserved field of a round")
            entry[key] = None if value is None else _json_number(value)
        check_round(entry, t, self.n_clients, self.path)
        self._append(entry)
        self.next_round += 1

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def record_from_history(path, history, trace, *, algorithm, local_steps: int, step_sizes: dict, seed: int | None,
                        constants: dict | None = None, problem=None) -> Path:
    """Write the record of a run of fedverify's engine (``algorithms.run``): the trace as both
    selected and replied, and per round ‖∇f(x_t)‖², f(x_t) and accuracy (needs ``record_every=1``).
    The whole record is written beside ``path`` and renamed onto it (an old one is replaced)."""
    mask = np.asarray(trace.mask if hasattr(trace, "mask") else trace, dtype=bool)
    path = Path(path)
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    partial.unlink(missing_ok=True)
    try:
        _write_history(partial, history, mask, algorithm=algorithm, local_steps=local_steps, step_sizes=step_sizes,
                       seed=seed, constants=constants, problem=problem)
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
    return path


def _write_history(path, history, mask, *, algorithm, local_steps, step_sizes, seed, constants, problem) -> None:
    with RunRecorder(path, mask.shape[1], algorithm=algorithm, local_steps=local_steps,
                     step_sizes={k: float(v) for k, v in step_sizes.items()}, seed=seed,
                     constants=constants, problem=problem) as rec:
        for i, t in enumerate(history.rounds):
            ids = np.flatnonzero(mask[t])
            metrics = {"grad_norm2": history.grad_norm2[i], "loss": history.loss[i]}
            if history.accuracy is not None and np.isfinite(history.accuracy[i]):
                metrics["accuracy"] = history.accuracy[i]
            rec.record_round(int(t), ids, ids, **metrics)
