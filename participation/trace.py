"""Participation traces: which clients take part in which round.

A trace is the sequence {S_t}_{t=0}^{T-1} of FedSUM §2.2 stored as a
boolean mask ``mask[t, i] = 1{i in S_t}`` of shape ``(rounds, n_clients)``.

Files ``Trace.load`` reads (``save`` writes the first form of each):

* ``.npz``: fedverify's bit-packed archive (arrays ``format``, ``version``, ``shape``,
  ``bits``), or any archive holding one 2-D boolean or 0/1 integer array named ``mask``
  (``np.savez("t.npz", mask=m)``), or a single unnamed array (``np.savez("t.npz", m)``).
* ``.csv``: one row of 0/1 per round, comma-separated; an optional first row of column
  names (``client0,client1,...``) and ``#`` comment lines are skipped.
* ``.json``: ``{"format": "fedverify-trace", "version": 1, "n_clients": N, "active": [[0, 3],
  [1], ...]}``, or a bare list of per-round active-id lists ``[[0, 3], [1], ...]``, which
  needs ``n_clients`` (``--clients`` on the command line) since a client that never takes
  part appears nowhere in it.

Loading is bounded: before anything is allocated, ``Trace.load`` works out from the file's
size and its declared sizes (the JSON's ``n_clients`` × rounds, the npz member headers, the
CSV's line count × the first row's width) how much memory reading it will take, and refuses
a file that needs more than :func:`memory_limit` with a one-line ValueError naming both.
The limit is half of this machine's physical memory, or ``FEDVERIFY_MEMORY_GB`` gigabytes
(2^30 bytes) when that environment variable is set (:mod:`participation.budget`, the one
definition of the rule).
"""
from __future__ import annotations

import codecs
import errno
import json
import math
import numbers
import os
import stat
import zipfile
import zlib
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from .budget import ENV_MEMORY, human_bytes, memory_limit, require_memory  # noqa: F401  (re-exported)
from .files import atomic_write, strict_json
from .validation import integer, quote

_FORMAT = "fedverify-trace"
_VERSION = 1
#: Largest trace accepted from a file or from_sets (rounds × clients cells).
MAX_CELLS = 1 << 34
#: Deflate cannot expand data by more than about 1032:1.
_MAX_DEFLATE_RATIO = 1100
#: Peak bytes per byte of a JSON file while ``json`` parses it (a list of small ints or of
#: empty lists costs up to about 21 bytes of Python objects per byte of text).
_JSON_BYTES_PER_BYTE = 24
def _read_only(array: np.ndarray) -> np.ndarray:
    array = np.ascontiguousarray(array)
    array.flags.writeable = False
    return array


def as_mask(mask, *, what: str = "mask", batch: bool = False) -> np.ndarray:
    """Validate a 0/1 array and return it as ``bool``.

    Shape ``(rounds, n_clients)``, or ``(reps, rounds, n_clients)`` when ``batch`` allows
    it. Booleans and integers restricted to {0, 1} are accepted; anything else is a
    ValueError that names the offending value.
    """
    if isinstance(mask, Trace):
        return mask.mask
    array = np.asarray(mask)
    dims = (2, 3) if batch else (2,)
    if array.ndim not in dims:
        want = "(rounds, n_clients) or (reps, rounds, n_clients)" if batch else "(rounds, n_clients)"
        raise ValueError(f"{what} must have shape {want}, got shape {array.shape}")
    if array.shape[-1] < 1 or array.shape[-2] < 1:
        raise ValueError(f"{what} needs at least one round and one client, got shape {array.shape}")
    if array.dtype == bool:
        return array
    if not np.issubdtype(array.dtype, np.integer):
        raise ValueError(f"{what} must be boolean or 0/1 integers, got dtype {array.dtype}")
    bad = (array != 0) & (array != 1)
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError(f"{what} must contain only 0 and 1, found {array[where]} at index {where}")
    return array.astype(bool)


class Trace:
    """An immutable participation trace.

    ``Trace(mask)`` wraps a ``(rounds, n_clients)`` 0/1 array; ``Trace.from_sets(sets,
    n_clients)`` builds one from the active-id list of every round. ``save``/``load`` use
    ``.npz`` (bit-packed), ``.csv`` (one 0/1 row per round) or ``.json`` (active-id lists);
    loading never unpickles, and a corrupt file is a one-line ValueError.
    """

    __slots__ = ("_mask",)

    def __init__(self, mask):
        object.__setattr__(self, "_mask", _read_only(as_mask(mask).copy()))

    def __setattr__(self, name, value):
        raise AttributeError("Trace is immutable")

    # --- construction -------------------------------------------------------------
    @classmethod
    def from_sets(cls, sets: Iterable[Iterable[int]], n_clients: int) -> "Trace":
        """Build a trace from ``sets[t]`` = ids of the active clients in round ``t``."""
        n_clients = integer(n_clients, "n_clients")
        try:
            sets = list(sets)
        except TypeError:
            raise ValueError(f"sets must be a sequence of per-round id lists, got {type(sets).__name__}") from None
        for t, ids in enumerate(sets):
            if isinstance(ids, (str, bytes)) or not hasattr(ids, "__iter__"):
                raise ValueError(f"round {t}: expected a list of client ids, got {ids!r:.40}")
        sets = [list(s) for s in sets]
        if not sets:
            raise ValueError("from_sets needs at least one round, got an empty sequence")
        if len(sets) * n_clients > MAX_CELLS:
            raise ValueError(f"{len(sets)} rounds x {n_clients} clients exceeds the limit of {MAX_CELLS} cells")
        # the mask built here and the trace's own copy of it
        require_memory(2 * len(sets) * n_clients, f"from_sets: a trace of {len(sets)} round{'s' * (len(sets) != 1)} "
                                                  f"× {n_clients} clients")
        mask = np.zeros((len(sets), n_clients), dtype=bool)
        for t, ids in enumerate(sets):
            for i in ids:
                if not isinstance(i, numbers.Integral) or isinstance(i, bool):
                    raise ValueError(f"round {t}: client id {i!r} is not an integer")
                if not 0 <= i < n_clients:
                    raise ValueError(f"round {t}: client id {i} is outside [0, {n_clients})")
                if mask[t, i]:
                    raise ValueError(f"round {t}: client id {i} appears twice")
                mask[t, i] = True
        return cls(mask)

    @classmethod
    def from_events(cls, events, round_seconds: float, *, rule: str = "whole", fraction: float | None = None,
                    start: float = 0.0, end: float | None = None, initial: int = 0) -> "Trace":
        """Cut availability events into rounds of ``round_seconds``.

        ``events``: per client, (time, state) pairs in time order (state 1 = becomes
        available, 0 = unavailable), as a mapping id → pairs (clients in its order), a
        sequence, or a :class:`participation.events.EventLog`. ``rule``: "start" (available
        at the round's start), "whole" (for the whole round; default) or "fraction" (for at
        least ``fraction`` of it). Rounds are [start + rΔ, start + (r+1)Δ), complete ones
        only, up to ``end`` (default: the latest event). See :mod:`participation.events`.
        """
        from .event_cuts import as_event_lists, events_to_mask

        names, lists = as_event_lists(events)
        if end is None and hasattr(events, "horizon"):
            end = events.horizon
        return cls(events_to_mask(lists, round_seconds, rule=rule, fraction=fraction, start=start, end=end,
                                  initial=initial, names=names))

    # --- views ---------------------------------------------------------------------
    @property
    def mask(self) -> np.ndarray:
        """The read-only boolean mask, shape ``(rounds, n_clients)`` (a view that cannot be
        made writeable)."""
        return self._mask.view()

    @property
    def n_rounds(self) -> int:
        return self._mask.shape[0]

    @property
    def n_clients(self) -> int:
        return self._mask.shape[1]

    def active(self, t: int) -> np.ndarray:
        """Sorted ids of the clients in S_t."""
        if not -self.n_rounds <= t < self.n_rounds:
            raise ValueError(f"round {t} is outside a trace of {self.n_rounds} rounds")
        return np.flatnonzero(self._mask[t])

    def sets(self) -> list[list[int]]:
        """The active-id list of every round."""
        return [row.tolist() for row in (np.flatnonzero(r) for r in self._mask)]

    def counts(self) -> np.ndarray:
        """|S_t| for every round."""
        return self._mask.sum(axis=1)

    def participation_rate(self) -> np.ndarray:
        """Fraction of rounds each client takes part in."""
        return self._mask.mean(axis=0)

    def __len__(self) -> int:
        return self.n_rounds

    def __getitem__(self, rounds) -> "Trace":
        if not isinstance(rounds, slice):
            raise TypeError("index a Trace with a slice of rounds; use .active(t) for one round")
        return Trace(self._mask[rounds])

    def __eq__(self, other) -> bool:
        return isinstance(other, Trace) and np.array_equal(self._mask, other._mask)

    def __hash__(self) -> int:
        return hash((self._mask.shape, np.packbits(self._mask).tobytes()))

    def __repr__(self) -> str:
        return f"Trace(rounds={self.n_rounds}, n_clients={self.n_clients}, mean |S_t|={self.counts().mean():.3g})"

    def plot(self, ax=None, **imshow_kwargs):
        """Show the trace as an image (rounds across, clients down) on a matplotlib axis."""
        import matplotlib.pyplot as plt

        ax = ax if ax is not None else plt.gca()
        options = {"aspect": "auto", "interpolation": "nearest", "cmap": "Greys"} | imshow_kwargs
        ax.imshow(self._mask.T, **options)
        ax.set_xlabel("round t")
        ax.set_ylabel("client i")
        return ax

    # --- files ---------------------------------------------------------------------
    def save(self, path) -> Path:
        """Write the trace; the format follows the suffix (.npz, .csv, .json). Atomic."""
        path = Path(path)
        suffix = path.suffix.lower()
        if suffix not in (".npz", ".csv", ".json"):
            raise ValueError(f"unknown trace format {path.suffix!r}: use .npz, .csv or .json")
        def write(handle):
            if suffix == ".npz":
                np.savez_compressed(handle, format=np.array(_FORMAT), version=np.array(_VERSION),
                                    shape=np.array(self._mask.shape, dtype=np.int64),
                                    bits=np.packbits(self._mask, axis=1))
            elif suffix == ".csv":
                np.savetxt(handle, self._mask.astype(np.uint8), fmt="%d", delimiter=",")
            else:
                doc = {"format": _FORMAT, "version": _VERSION, "n_clients": self.n_clients, "active": self.sets()}
                handle.write(json.dumps(doc).encode())

        atomic_write(path, write, binary=True, make_parents=False)
        return path

    @classmethod
    def load(cls, path, n_clients: int | None = None) -> "Trace":
        """Read a trace written by ``save`` (or by hand in the same formats).

        ``n_clients`` is needed only for a bare JSON list of active-id lists, and checked
        against the file otherwise (before the trace is built). A file whose declared size
        needs more memory than :func:`memory_limit` is refused before anything is allocated;
        a path that is not a regular file (a folder, a FIFO, a link loop) is refused by what
        it is, without opening it.
        """
        if n_clients is not None:
            n_clients = integer(n_clients, "n_clients")
        if isinstance(path, str) and not path.strip():
            raise ValueError("the trace path is empty")
        path = Path(path)
        suffix = path.suffix.lower()
        readers = {".npz": _load_npz, ".csv": _load_csv, ".json": _load_json}
        if suffix not in readers:
            raise ValueError(f"unknown trace format {quote(path.suffix)}: use .npz, .csv or .json")
        size = regular_file_size(path)
        try:
            trace = readers[suffix](path, n_clients, size)
        except _Refusal as err:
            raise ValueError(str(err)) from None
        except ValueError as err:
            raise ValueError(f"cannot read trace {path.name}: {err}") from None
        except MemoryError:
            raise ValueError(f"cannot read trace {path.name}: out of memory while loading it (the memory limit "
                             f"of {human_bytes(memory_limit())} is set by {ENV_MEMORY})") from None
        except OSError as err:
            if err.strerror:                   # the system's reason (permission, I/O error)
                raise ValueError(f"cannot read trace {path.name}: {err.strerror}") from None
            raise ValueError(f"cannot read trace {path.name}: corrupt file ({type(err).__name__})") from None
        except (EOFError, KeyError, TypeError, zipfile.BadZipFile, UnicodeDecodeError, zlib.error,
                RecursionError, OverflowError, RuntimeError) as err:   # RuntimeError: zipfile's encrypted
            # members and unsupported compression methods
            raise ValueError(f"cannot read trace {path.name}: corrupt file ({type(err).__name__})") from None
        if n_clients is not None and trace.n_clients != n_clients:
            raise ValueError(f"trace {path.name} has {trace.n_clients} clients, expected {n_clients}")
        return trace


class _Refusal(ValueError):
    """A loader's refusal whose message is already complete (it names the file)."""


_FILE_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
               (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def regular_file_size(path, what: str = "trace file") -> int:
    """The size of the file ``path``, or a one-line ValueError saying what the path is when
    it is not a regular file: missing, a folder, a FIFO, a socket, a device, a loop of
    symbolic links. Nothing is opened (opening a FIFO blocks until someone writes to it); a
    file larger than :func:`memory_limit` is refused too."""
    path = Path(path)
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise ValueError(f"{what} {quote(str(path))} does not exist") from None
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise ValueError(f"{what} {quote(str(path))} is a loop of symbolic links") from None
        if err.errno == errno.ENOTDIR:
            raise ValueError(f"{what} {quote(str(path))} does not exist (a part of its path is a file, "
                             "not a folder)") from None
        raise ValueError(f"{what} {quote(str(path))} cannot be read ({err.strerror or type(err).__name__})") \
            from None
    except ValueError:                     # an embedded NUL character
        raise ValueError(f"{what} path {quote(str(path))} is not a valid path") from None
    for test, kind in _FILE_KINDS:
        if test(info.st_mode):
            raise ValueError(f"{what} {quote(str(path))} is {kind}, not a regular file")
    if not stat.S_ISREG(info.st_mode):
        raise ValueError(f"{what} {quote(str(path))} is not a regular file")
    if info.st_size > memory_limit():
        require_memory(info.st_size, f"reading {what} {path.name} ({info.st_size} bytes)")
    return info.st_size


def _owned(mask: np.ndarray) -> Trace:
    """A Trace around a freshly built boolean mask, without the copy ``Trace(mask)`` makes
    (loading holds one copy of the mask, not two)."""
    trace = Trace.__new__(Trace)
    object.__setattr__(trace, "_mask", _read_only(as_mask(mask)))
    return trace


def _expect_clients(path: Path, found: int, n_clients) -> None:
    """Refuse a file whose client count differs from the caller's, before building it."""
    if n_clients is not None and found != n_clients:
        raise _Refusal(f"trace {path.name} has {found} clients, expected {n_clients}")


def _require_cells(path: Path, rounds: int, n: int, nbytes: float, what: str = "") -> None:
    """Refuse ``rounds × n`` cells above :data:`MAX_CELLS` or ``nbytes`` above the memory limit."""
    if rounds * n > MAX_CELLS:
        raise ValueError(f"{what or 'the trace'} of {rounds} rounds × {n} clients exceeds the limit of "
                         f"{MAX_CELLS} cells")
    try:
        require_memory(nbytes, f"loading {rounds} round{'s' * (rounds != 1)} × {n} clients")
    except ValueError as err:
        raise _Refusal(f"cannot read trace {path.name}: {err}") from None


def _check_npz_headers(path: Path) -> dict:
    """Declared (shape, dtype) of every member, read from the headers before ``np.load``
    allocates anything; members whose declared array is larger than the archive can hold
    (a zip bomb) or that hold Python objects are refused."""
    declared = {}
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            with archive.open(info) as member:
                version = np.lib.format.read_magic(member)
                readers = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
                if version not in readers:
                    raise ValueError(f"member {quote(info.filename)} uses unsupported .npy version {version}")
                shape, _, dtype = readers[version](member)
            if dtype.hasobject:
                raise ValueError(f"member {quote(info.filename)} holds Python objects")
            nbytes = int(np.prod(shape, dtype=object)) * dtype.itemsize
            if nbytes > info.file_size or info.file_size > _MAX_DEFLATE_RATIO * max(info.compress_size, 1) + 1024:
                raise ValueError(f"member {quote(info.filename)} declares {nbytes} bytes that the archive does not hold")
            name = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
            declared[name] = (tuple(int(v) for v in shape), dtype, nbytes)
    return declared


def _load_npz(path: Path, n_clients, size: int) -> Trace:
    """Bit-packed fedverify archive, or one plain 2-D 0/1 array; sizes checked from the member
    headers before any array is read."""
    declared = _check_npz_headers(path)
    expected = {"format", "version", "shape", "bits"}
    names = list(declared)
    plain = "mask" if "mask" in declared else (names[0] if len(declared) == 1 else None)
    if set(declared) != expected and plain is not None:
        shape, dtype, nbytes = declared[plain]
        if len(shape) != 2:
            raise ValueError(f"array {quote(plain)} must have shape (rounds, n_clients), got shape {shape}")
        _expect_clients(path, shape[1], n_clients)
        # the array as stored, and for integers the comparisons that validate it and the bool copy
        work = nbytes + (0 if dtype == np.bool_ else 3 * math.prod(shape))
        _require_cells(path, shape[0], shape[1], work, f"array {quote(plain)}")
        with np.load(path, allow_pickle=False) as data:
            mask = data[plain]
        return _owned(as_mask(mask, what=f"array {quote(plain)}"))
    if set(declared) != expected:
        raise ValueError(f"expected a 'mask' array or the arrays {sorted(expected)}, found "
                         f"{quote(sorted(declared), 200)}")
    for name in ("format", "version", "shape"):
        if declared[name][2] > 1024:
            raise ValueError(f"member {name!r} of {declared[name][2]} bytes is too large for a header field")
    with np.load(path, allow_pickle=False) as data:
        if str(data["format"]) != _FORMAT or int(data["version"]) != _VERSION:
            raise ValueError("not a fedverify trace (format/version mismatch)")
        shape = data["shape"]
        if shape.shape != (2,) or not np.issubdtype(shape.dtype, np.integer) or (shape < 1).any():
            raise ValueError(f"invalid stored shape {quote(shape.tolist())}")
        rounds, n = (int(v) for v in shape)
        _expect_clients(path, n, n_clients)
        bits_shape, bits_dtype, bits_bytes = declared["bits"]
        if bits_dtype != np.uint8 or bits_shape != (rounds, -(-n // 8)):
            raise ValueError(f"bit array of shape {bits_shape} does not match shape ({rounds}, {n})")
        _require_cells(path, rounds, n, bits_bytes + rounds * n, "stored shape")
        bits = data["bits"]
    if n % 8 and (bits[:, -1] & ((1 << (8 - n % 8)) - 1)).any():
        raise ValueError("non-zero padding bits")
    unpacked = np.unpackbits(bits, axis=1, count=n)     # uint8 0/1: viewed as bool, not copied
    del bits
    return _owned(unpacked.view(np.bool_))


# CSV bytes: line breaks (those of str.splitlines within ASCII) and blanks within a line
_CSV_BREAKS = b"\n\r\x0b\x0c\x1c\x1d\x1e"
_CSV_BLANKS = b" \t"
_OTHER, _ZERO, _ONE, _COMMA, _BLANK, _BREAK = range(6)
_CSV_CLASS = np.full(256, _OTHER, dtype=np.uint8)
_CSV_CLASS[[ord("0"), ord("1"), ord(",")]] = _ZERO, _ONE, _COMMA
_CSV_CLASS[list(_CSV_BLANKS)] = _BLANK
_CSV_CLASS[list(_CSV_BREAKS)] = _BREAK
#: Peak bytes per byte of a CSV file while it is parsed (the bytes, their classes, a few byte
#: masks, a running count), and per line (its start, end and three counts).
_CSV_BYTES_PER_BYTE, _CSV_BYTES_PER_LINE = 12, 48


def _regular_csv(kind: np.ndarray):
    """The (rounds, n) digit classes of a text whose lines all have one layout, "d,d,...,d"
    and the same line break (what ``save`` writes), read as one reshape; None otherwise."""
    first = np.flatnonzero(kind[: 1 << 20] == _BREAK)
    if first.size == 0:
        return None
    k = int(first[0])                          # the first line's digits and commas, then its break
    length = k + 1 + int(k + 1 < kind.size and kind[k + 1] == _BREAK)     # "\n" or "\r\n"
    if k % 2 == 0 or kind.size % length:
        return None
    template = kind[:length]
    if not (np.isin(template[0:k:2], (_ZERO, _ONE)).all() and (template[1:k:2] == _COMMA).all()
            and (template[k:] == _BREAK).all()):
        return None
    body = kind.reshape(-1, length)
    if not (body[:, k:] == template[k:]).all() or not (body[:, 1:k:2] == _COMMA).all():
        return None
    cells = body[:, 0:k:2]
    if not ((cells == _ZERO) | (cells == _ONE)).all():
        return None
    return cells


def _per_line(flags: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """How many ``flags`` are set in each line; lines are consecutive and end at ``ends``."""
    running = np.cumsum(flags, dtype=np.int64 if flags.size >= 2**31 else np.int32)[ends - 1]
    return np.diff(running, prepend=0)


def _load_csv(path: Path, n_clients, size: int) -> Trace:
    """0/1 rows, parsed with vectorised byte counts: rows × columns are counted (line breaks,
    the first row's commas) and checked against the limits before the mask is built."""
    require_memory(_CSV_BYTES_PER_BYTE * size, f"parsing trace {path.name} ({size} bytes)")
    data = path.read_bytes()
    data = data[len(codecs.BOM_UTF8):] if data.startswith(codecs.BOM_UTF8) else data    # spreadsheets write a BOM
    lines = sum(data.count(bytes([b])) for b in _CSV_BREAKS) + 1
    work = _CSV_BYTES_PER_BYTE * len(data) + _CSV_BYTES_PER_LINE * lines
    require_memory(work, f"parsing trace {path.name} ({len(data)} bytes, {lines} lines)")
    if not data:
        raise ValueError("no rounds in file")
    raw = np.frombuffer(data, dtype=np.uint8)
    kind = _CSV_CLASS[raw]
    regular = _regular_csv(kind)
    if regular is not None:                    # the layout `save` writes: every line "d,d,...,d\n"
        _expect_clients(path, regular.shape[1], n_clients)
        _require_cells(path, regular.shape[0], regular.shape[1], work + regular.size)
        return _owned(regular == _ONE)
    # line k is data[starts[k]:ends[k]], its break included; the lines cover the whole text
    ends = np.flatnonzero(kind == _BREAK) + 1
    if ends.size == 0 or ends[-1] != kind.size:
        ends = np.append(ends, kind.size)
    starts = np.concatenate(([0], ends[:-1]))
    n_comma = _per_line(kind == _COMMA, ends)
    n_digit = _per_line((kind == _ZERO) | (kind == _ONE), ends)
    n_other = _per_line(kind == _OTHER, ends)
    content = np.flatnonzero((raw[starts] != ord("#")) & (n_digit + n_comma + n_other > 0))   # not comments or blank
    if content.size == 0:
        raise ValueError("no rounds in file")

    def text(k) -> str:
        """Line ``k`` of the file (index into the line arrays), without its break."""
        chunk = data[starts[k]:ends[k]].rstrip(_CSV_BREAKS)
        try:
            return chunk.decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError(f"line {int(k) + 1} is not UTF-8 text") from None

    first = text(content[0]).split(",")
    if any(v.strip() not in ("0", "1") for v in first) and not any(_is_number(v) for v in first):
        header, rows = first, content[1:]        # a row of column names
    else:
        header, rows = None, content
    if rows.size == 0:
        raise ValueError("no rounds in file")
    width = int(n_comma[rows[0]]) + 1
    if header is not None and len(header) != width:
        raise ValueError(f"the header has {len(header)} columns, the rows have {width}")
    _expect_clients(path, width, n_clients)
    _require_cells(path, rows.size, width, work + rows.size * width)
    good = (n_comma[rows] == width - 1) & (n_digit[rows] == width) & (n_other[rows] == 0)
    bad = np.flatnonzero(~good)
    if bad.size:
        _csv_row_error(int(bad[0]), text(rows[bad[0]]), width)
    del n_comma, n_digit, n_other, good
    # each row now holds exactly `width` digits and `width - 1` commas among blanks: in file
    # order they must alternate digit, comma, digit, ...; a row breaking that is reported
    edges = np.zeros(kind.size + 1, dtype=np.int8)
    edges[starts[rows]] += 1                   # rows are disjoint: +1 where one starts, -1 where it ends
    edges[ends[rows]] -= 1
    keep = np.cumsum(edges, dtype=np.int8)[:-1].view(np.bool_)
    del edges
    keep &= (kind == _ZERO) | (kind == _ONE) | (kind == _COMMA)
    tokens = kind[keep].reshape(rows.size, 2 * width - 1)
    del keep, kind
    cells = tokens[:, 0::2]
    misplaced = np.flatnonzero((cells == _COMMA).any(axis=1))
    if misplaced.size:
        _csv_row_error(int(misplaced[0]), text(rows[misplaced[0]]), width)
    return _owned(cells == _ONE)


def _csv_row_error(t: int, line: str, width: int):
    """Raise the message for data row ``t``: a wrong number of entries, or the first entry
    that is not 0 or 1 (quoted, cut short)."""
    row = line.split(",")
    if len(row) != width:
        raise ValueError(f"row {t} has {len(row)} entries, row 0 has {width}")
    for value in row:
        if value.strip(_CSV_BLANKS.decode()) not in ("0", "1"):
            raise ValueError(f"row {t}: entry {quote(value.strip())} is not 0 or 1")
    raise ValueError(f"row {t} is not a row of 0/1 entries")


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _load_json(path: Path, n_clients, size: int) -> Trace:
    """fedverify's JSON trace (``"format": "fedverify-trace"``, ``"version": 1``, duplicate
    keys refused) or a bare list of active-id lists; the mask is sized from rounds ×
    ``n_clients`` and checked against the limits before it is allocated."""
    require_memory(_JSON_BYTES_PER_BYTE * size, f"parsing trace {path.name} ({size} bytes of JSON)")
    try:
        doc = strict_json(path.read_bytes().decode("utf-8-sig"))
    except UnicodeDecodeError:
        raise ValueError("not UTF-8 text") from None
    if isinstance(doc, list):
        if n_clients is None:
            raise ValueError("a bare list of active-id lists needs the number of clients (n_clients=, or --clients "
                             "on the command line): clients that never take part appear nowhere in it")
        return _from_id_lists(path, _id_lists(doc), n_clients)
    if not isinstance(doc, dict) or doc.get("format") != _FORMAT:
        raise ValueError("not a fedverify trace (missing format tag)")
    if "version" not in doc:
        raise ValueError(f'no "version": a {_FORMAT} JSON needs "version": {_VERSION}')
    version = doc["version"]
    if isinstance(version, bool) or not isinstance(version, int) or version != _VERSION:
        raise ValueError(f"version {quote(version)} is not supported: this fedverify reads version {_VERSION}")
    n = doc.get("n_clients")
    n = integer(n, "n_clients")
    _expect_clients(path, n, n_clients)
    return _from_id_lists(path, _id_lists(doc.get("active")), n)


def _id_lists(value) -> Sequence[list]:
    if not isinstance(value, list) or not all(isinstance(s, list) for s in value):
        raise ValueError("'active' must be a list of lists of client ids")
    return value


def _from_id_lists(path: Path, sets: list, n_clients: int) -> Trace:
    """The mask of active-id lists, each id checked (an integer in [0, n), once per round)."""
    if not sets:
        raise ValueError("the trace needs at least one round, got an empty list")
    _require_cells(path, len(sets), n_clients, len(sets) * n_clients)
    mask = np.zeros((len(sets), n_clients), dtype=bool)
    for t, ids in enumerate(sets):
        for i in ids:
            if type(i) is not int:             # JSON gives int, float, str, bool, list, dict or None
                raise ValueError(f"round {t}: client id {quote(i)} is not an integer")
            if not 0 <= i < n_clients:
                raise ValueError(f"round {t}: client id {quote(i)} is outside [0, {n_clients})")
        if ids:
            row = np.array(ids, dtype=np.int64)
            if np.unique(row).size != row.size:
                seen = set()
                twice = next(i for i in ids if i in seen or seen.add(i))
                raise ValueError(f"round {t}: client id {twice} appears twice")
            mask[t, row] = True
    return _owned(mask)
