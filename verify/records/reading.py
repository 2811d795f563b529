"""Reading a run record back: ``load_record`` reads and checks a whole record line by line within
the memory limit into a ``RunRecord`` (participation masks, per-round metrics, per-client fields),
keeping the complete rounds before a damaged or cut-off line; ``read_header`` reads the header
line only. The format and its checks are in :mod:`~verify.records.fields`.
"""
from __future__ import annotations

import stat
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from participation.files import strict_json

from .fields import _ROUND_REQUIRED, _where, check_header, check_round

__all__ = ["RunRecord", "load_record", "read_header"]

#: Bytes of parsed JSON (Python lists of ints, dicts) per byte of a record's text, for the memory budget.
PARSED_BYTES_PER_BYTE = 16


@dataclass(frozen=True)
class RunRecord:
    """A loaded record: ``header`` (dict), ``mask`` (T, N) bool of S_t (who replied),
    ``selected`` (T, N) bool, ``metrics`` name → (T,) float64 (NaN where a round did not report
    it), ``path``, ``vectors`` name → (T, N) float64 of the per-client fields (NaN where null or
    not recorded). ``trace`` is the participation as a ``participation.Trace``."""

    header: dict
    mask: np.ndarray
    selected: np.ndarray
    metrics: dict = field(default_factory=dict)
    path: Path | None = None
    vectors: dict = field(default_factory=dict)
    #: Where the record stops being readable and why (a line after the kept rounds that is not a
    #: valid next round: a cut-off write, a second writer's rounds), or None for a whole record.
    damage: str | None = None

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



def load_record(path, *, keep_damaged: bool = False, bytes_per_cell: float = 0.0, held_bytes: float = 0.0) -> RunRecord:
    """Read a record (its format: ``verify.records.fields``); a cut-off last line is dropped with a warning.

    A line after the header that is not a valid next round (bad JSON, a value the schema refuses,
    a round out of order as a second writer leaves it) is a ValueError naming the line, which
    also says how many complete rounds precede it; ``keep_damaged=True`` reads those rounds
    instead, with a warning and the reason in ``RunRecord.damage``.

    The file is read line by line into the arrays it fills: a first pass counts the rounds, the
    participation masks (2·T·N bytes) and each per-client field (8·T·N bytes, when first seen)
    are checked against the memory limit before they are allocated, and no more than one line's
    parsed JSON is held at once. A caller that will use ``bytes_per_cell`` more bytes per (round,
    client) cell to work on the record, and already holds ``held_bytes``, has those counted too."""
    path = Path(path)
    from participation.budget import require_memory

    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"run record {path.name} is not a regular file (a pipe, a device or a folder)")
        lines, cut, longest = _count_lines(path)
        require_memory(PARSED_BYTES_PER_BYTE * longest, f"reading run record {path.name} (a line of {longest} bytes)")
        with open(path, "rb") as handle:
            return _read_record(path, handle, lines, cut, keep_damaged,
                                lambda nbytes, what: require_memory(nbytes + held_bytes, what), bytes_per_cell)
    except OSError as err:
        raise ValueError(f"cannot read run record {path.name}: {err.strerror or err}") from None


def read_header(path) -> dict:
    """The validated header of the record at ``path``, reading its first line only."""
    path = Path(path)
    with open(path, "rb") as handle:
        return check_header(_parse_line(path, 1, handle.readline().rstrip(b"\n")), path)


def _count_lines(path) -> tuple[int, int | None, int]:
    """(complete lines, bytes of a cut-off last line or None, longest line in bytes), in chunks."""
    count, longest, current, last = 0, 0, 0, b""
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 18):
            pieces = chunk.split(b"\n")
            for piece in pieces[:-1]:
                longest = max(longest, current + len(piece))
                current = 0
                count += 1
            current += len(pieces[-1])
            last = chunk[-1:]
    longest = max(longest, current)
    return count, (current if current and last != b"\n" else None), longest


def _read_record(path, handle, lines: int, cut: int | None, keep_damaged: bool, require_memory,
                 bytes_per_cell: float = 0.0) -> RunRecord:
    numbered = ((i, line.rstrip(b"\n")) for i, line in enumerate(handle, start=1))
    content = ((i, text) for i, text in numbered if text.strip())
    first = next(content, None)
    if first is None:
        raise ValueError(f"{path.name}: empty run record (no header line)")
    if first[0] != 1:
        raise ValueError(f"{_where(path, first[0])}: the header must be the first line")
    header = check_header(_parse_line(path, 1, first[1]), path)
    n = header["n_clients"]
    capacity = max(lines - 1, 0) + (1 if cut is not None and lines > 0 else 0)
    work = " and the work on them" if bytes_per_cell else ""
    require_memory((2.0 + bytes_per_cell) * n * max(capacity, 1),
                   f"run record {path.name}: {capacity} rounds × {n} clients (who was selected, who replied){work}")
    mask, selected = np.zeros((capacity, n), dtype=bool), np.zeros((capacity, n), dtype=bool)
    metrics: dict[str, np.ndarray] = {}
    vectors: dict[str, np.ndarray] = {}
    damage, t = None, 0
    for i, text in content:
        if cut is not None and i > lines:      # the cut-off last line: not a round
            break
        try:
            entry = check_round(_parse_line(path, i, text), t, n, path, i)
        except ValueError as err:      # a damaged tail: the rounds before it stay readable
            if not keep_damaged:
                raise ValueError(f"{err} (the {t} rounds before line {i} are complete: "
                                 "load_record(path, keep_damaged=True) reads them)") from None
            damage = f"{err}; kept the {t} rounds before line {i}, the lines from it are left out"
            break
        mask[t, entry["replied"]] = True
        selected[t, entry["selected"]] = True
        for key, value in entry.items():
            if key in _ROUND_REQUIRED or value is None:
                continue
            if isinstance(value, list):
                if key in metrics:
                    raise ValueError(f"{_where(path, i)}: {key} is a per-client list here and a number in other "
                                     "rounds; write it one way")
                if key not in vectors:
                    require_memory(8.0 * n * capacity, f"run record {path.name}: per-client field {key} over "
                                                       f"{capacity} rounds × {n} clients")
                    vectors[key] = np.full((capacity, n), np.nan)
                vectors[key][t] = [np.nan if v is None else float(v) for v in value]
            else:
                if key in vectors:
                    raise ValueError(f"{_where(path, i)}: {key} is a number here and a per-client list in other "
                                     "rounds; write it one way")
                if key not in metrics:
                    metrics[key] = np.full(capacity, np.nan)
                metrics[key][t] = float(value)
        t += 1
    if damage is not None:
        warnings.warn(damage, stacklevel=3)
    elif cut is not None and lines >= 1:      # a record whose last line was cut off mid-write: keep the complete rounds
        damage = (f"{path.name}: the last line is cut off ({cut} bytes, a run stopped mid-write); "
                  f"kept the {t} complete rounds")
        warnings.warn(damage, stacklevel=3)
    keep = slice(0, t)
    return RunRecord(header=header, mask=mask[keep].copy() if t < capacity else mask,
                     selected=selected[keep].copy() if t < capacity else selected,
                     metrics={k: v[keep] for k, v in metrics.items()}, path=path,
                     vectors={k: v[keep] for k, v in vectors.items()}, damage=damage)


def _parse_line(path, i: int, text: bytes) -> dict:
    """Line ``i`` of a record as a JSON object, or a ValueError naming the line."""
    try:
        return strict_json(text.decode("utf-8"))
    except UnicodeDecodeError:
        raise ValueError(f"{_where(path, i)}: not UTF-8 text" + _not_a_record(i)) from None
    except ValueError as err:
        raise ValueError(f"{_where(path, i)}: not a JSON object ({str(err).splitlines()[0]})"
                         + _not_a_record(i)) from None



def _not_a_record(line: int) -> str:
    return "; not a fedverify run record" if line == 1 else ""
