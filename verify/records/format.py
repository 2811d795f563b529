"""The run record: one open, versioned, append-only file per training run, made anywhere.

Format ``fedverify-run`` version 2, JSON Lines (UTF-8, one JSON object per line; the schema ships
as ``verify/schemas/run-record.schema.json``). Version 1 is version 2 without the fields marked
(v2); both load.

* line 1, the header: ``{"format": "fedverify-run", "version": 2, "n_clients": N, ...}`` with
  optional ``algorithm`` (a registered name), ``local_steps`` K, ``step_sizes`` (``eta_g``,
  ``eta_l``, ...), ``seed``, ``constants`` (``L``, ``sigma2``, ``delta_f``, ``F0`` and the
  constants a theorem needs, see :data:`CONSTANTS`, with ``source``: how they were obtained),
  ``problem`` and ``notes`` (free text), ``created`` (ISO time), and (v2):

  - ``hparams``: the algorithm's other hyper-parameters (numbers, text, lists of numbers), e.g.
    ``{"beta": 0.9}`` for FedAvgM, ``{"surrogate": "generator"}`` for LOGIT;
  - ``schedule``: a multistage server schedule ``{"lengths": [T_1..T_S], "eta_g": [η_1..η_S],
    "beta": [β_1..β_S], "nu": ν, "eta_l": η_l}`` (Server momentum, arXiv:2312.12670, Alg. 3 and
    Sec. 4.1);
  - ``availability``: the participation model the run assumed, :data:`AVAILABILITY` (e.g.
    ``{"model": "markov", "pi": [...], "lam": [...]}``; ``{"model": "estimate"}`` asks for it to
    be estimated from the recorded S_t);
* one line per round, in order t = 0, 1, …: ``{"round": t, "selected": [ids], "replied": [ids],
  "grad_norm2": ‖∇f(x_t)‖², "loss": f(x_t), "accuracy": ..., ...}``: ``selected`` the clients sent
  work, ``replied`` those whose update arrived (S_t, the participation the theorems see; a
  subset of ``selected``), and any measured quantities: numbers (``grad_norm2`` is what FedSUM's
  left side needs, at the model x_t the round starts from) and (v2) the per-client lists of
  :data:`PER_CLIENT`, N entries each, null where the quantity is undefined for a client.

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
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from participation.files import strict_json
from participation.validation import integer

__all__ = ["RunRecord", "RunRecorder", "load_record", "read_header", "FORMAT", "VERSION", "READS", "SCHEMA_PATH", "PER_CLIENT",
           "PER_ROUND", "CONSTANTS", "AVAILABILITY", "record_from_history", "availability_of",
           "algorithm_fields", "amend_header"]

FORMAT = "fedverify-run"
VERSION = 2
#: The versions this fedverify reads.
READS = (1, 2)
SCHEMA_PATH = Path(__file__).resolve().parents[1] / "schemas" / "run-record.schema.json"
_HEADER_OPTIONAL = {"algorithm": str, "local_steps": int, "step_sizes": dict, "seed": int, "constants": dict,
                    "problem": (str, dict), "notes": str, "created": str, "hparams": dict, "schedule": dict,
                    "availability": dict}
#: Per-client round fields (v2), N entries each (null where undefined), and what each holds.
PER_CLIENT = {
    "local_steps": "K_{t,i}, the local steps of client i's update that arrived in round t (Server momentum Alg. 4)",
    "delays": "τ_{t,i}, the rounds since the model client i's arriving update started from (Server momentum Alg. 4)",
    "weights": "q_{t,i}, client i's aggregation weight in round t (CA-Fed eq. (2))",
    "probabilities": "p_i^t, client i's availability probability in round t (LOGIT Section 3.3)",
    "generator_error": "e_{i,t} = (1/I) Σ_j ‖g̃_i − ∇F_i(x^i_{t,j})‖² for an unavailable client i (LOGIT eq. (23))",
    "avg_client_losses": "F_i(w̄) at the step-weighted average iterate w̄ after round t (CA-Fed §III-B)",
    "example_weights": "the weight client i's reply carried into the server's weighted mean in round t (Flower's "
                       "num-examples), normalised over the round's replies",
}
#: Per-round numbers (v2) the theorems of other papers read.
PER_ROUND = {
    "heterogeneity": "(1/N) Σ_i ‖∇f_i(x_t) − ∇f(x_t)‖² (Server momentum Assumption A3, σ_g²)",
    "heterogeneity_max": "max_i ‖∇f_i(x_t) − ∇f(x_t)‖² (LOGIT Assumption 4, σ₃²)",
    "local_norm": "max ‖w^k_{t,j}‖ over round t's local iterates (CA-Fed Lemma 1: W holds them)",
    "param_norm": "‖x_t‖, the norm of the model round t starts from",
}
#: Constants a header may give beyond L, σ², Δ_f, F_0, and the theorem that reads each.
CONSTANTS = {
    "sigma_g2": "σ_g², Server momentum Assumption A3", "zeta2": "σ₃², LOGIT Assumption 4",
    "sigma2_surrogate": "σ₂², LOGIT Assumption 3", "eps_star": "ε*, LOGIT Assumption 5, (30)",
    "C1": "C₁, LOGIT Assumption 5, (31)–(32)", "mu": "μ, CA-Fed Assumption 4",
    "Gamma": "Γ = max_k F_k(w*) − F_k*, CA-Fed eq. (9)", "Gamma_prime": "Γ' = max_k F_k(w_B*) − F_k*, CA-Fed Thm 3",
    "diam": "diam(W), CA-Fed Lemma 1", "eps_bias": "ε_bias = F(w_B*) − F*, CA-Fed Thm 1",
    "F_star": "F* = min Σ_k α_k F_k, CA-Fed eq. (3)", "F_B_star": "F_B* = min Σ_k p_k F_k, CA-Fed eq. (4)",
}
#: Constants that are strictly positive (μ divides κ = L/μ) and those that cannot be negative
#: (variances, norms, a diameter). Gaps between computed minima (Γ, Γ', ε_bias) are left free:
#: at zero they carry the rounding of their two terms.
_POSITIVE_CONSTANTS = ("mu",)
_NONNEGATIVE_CONSTANTS = ("L", "sigma2", "delta_f", "F0", "sigma_g2", "zeta2", "sigma2_surrogate", "eps_star", "C1",
                          "diam")
#: The range of each per-client and per-round field a round line may hold: (low, high, integer).
_FIELD_RANGES = {"local_steps": (1, math.inf, True), "delays": (0, math.inf, True), "weights": (0, math.inf, False),
                 "probabilities": (0, 1, False), "generator_error": (0, math.inf, False),
                 "example_weights": (0, 1, False),
                 "heterogeneity": (0, math.inf, False), "heterogeneity_max": (0, math.inf, False),
                 "local_norm": (0, math.inf, False), "param_norm": (0, math.inf, False)}
#: The hyper-parameters of the server-momentum algorithms and their range: (low, high, high
#: included); β ∈ [0, 1) and ν ∈ [0, 1] (Server momentum eq. (2)). Other algorithms give the same
#: names other meanings (CA-Fed's β ∈ (0, 1] filters loss reports).
_HPARAM_RANGES = {"beta": (0.0, 1.0, False), "nu": (0.0, 1.0, True)}
_MOMENTUM_ALGORITHMS = ("fedgm", "qhm", "fedavgm", "fednag", "fedgm-autonomous")


class _AvailabilityModels(Mapping):
    """The availability models (v2) and their fields, read from the participation patterns' table
    at every look-up (``participation.patterns.HEADER_MODELS``: full, uniform, cyclic, reshuffled,
    markov, bernoulli and any pattern registered there), then ``any`` (m clients a round by any
    rule: Server momentum footnote 4) and ``estimate`` (the model estimated from the recorded S_t)."""

    #: The models that name no pattern.
    OTHERS = {"any": ("m",), "estimate": ()}

    def _models(self) -> dict:
        from participation.patterns import HEADER_MODELS, header_fields

        return {**{name: header_fields(name) for name in HEADER_MODELS}, **self.OTHERS}

    def __getitem__(self, model):
        return self._models()[model]

    def __iter__(self):
        return iter(self._models())

    def __len__(self):
        return len(self._models())

    def __repr__(self):
        return repr(self._models())


#: The availability models (v2) and their fields.
AVAILABILITY = _AvailabilityModels()
_ROUND_REQUIRED = ("round", "selected", "replied")
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
    if type(header.get("version")) is not int or header.get("version") not in READS:
        raise ValueError(f"{where}: version {header.get('version')!r} is not supported (this fedverify reads "
                         f"{', '.join(map(str, READS))})")
    n = integer(header.get("n_clients"), f"{where}: n_clients")
    for key, kind in _HEADER_OPTIONAL.items():
        if key in header and header[key] is not None and (
                not isinstance(header[key], kind) or (kind is int and isinstance(header[key], bool))):
            raise ValueError(f"{where}: {key} has the wrong type ({type(header[key]).__name__})")
    if "local_steps" in header and header["local_steps"] is not None:
        integer(header["local_steps"], f"{where}: local_steps")
    for name, value in (header.get("step_sizes") or {}).items():
        if not _finite(value):
            raise ValueError(f"{where}: step_sizes.{name} must be a finite number, got {value!r}")
        if name.startswith("eta") and not value > 0:
            raise ValueError(f"{where}: step_sizes.{name} is a step size and must be > 0, got {value!r}")
    momentum = str(header.get("algorithm", "")).lower() in _MOMENTUM_ALGORITHMS
    for name, (low, high, closed) in (_HPARAM_RANGES.items() if momentum else ()):
        value = (header.get("hparams") or {}).get(name)
        if value is not None and (not _is_number(value) or not (low <= value <= high if closed else low <= value < high)):
            raise ValueError(f"{where}: hparams.{name} must be a number in [{low}, {high}{']' if closed else ')'}, "
                             f"got {value!r}")
    for name, value in (header.get("constants") or {}).items():
        if name == "source":
            if not isinstance(value, str):
                raise ValueError(f"{where}: constants.source must be text, got {value!r}")
        elif not _finite(value):
            raise ValueError(f"{where}: constants.{name} must be a finite number, got {value!r}")
        elif name in _POSITIVE_CONSTANTS and not value > 0:
            raise ValueError(f"{where}: constants.{name} must be > 0 ({CONSTANTS[name]}), got {value!r}")
        elif name in _NONNEGATIVE_CONSTANTS and not value >= 0:
            raise ValueError(f"{where}: constants.{name} must be ≥ 0, got {value!r}")
    for name, value in (header.get("hparams") or {}).items():
        if not (isinstance(value, (str, bool)) or _finite(value)
                or (isinstance(value, list) and all(_finite(v) for v in value))):
            raise ValueError(f"{where}: hparams.{name} must be a finite number, text or a list of numbers, "
                             f"got {str(value)[:40]}")
    if header.get("schedule") is not None:
        _check_schedule(header["schedule"], where)
    if header.get("availability") is not None:
        _check_availability(header["availability"], n, where)
    return header


def _numbers(value, name: str, where: str, *, length: int | None = None, positive: bool = False) -> list:
    if not isinstance(value, list) or not value or not all(_finite(v) for v in value):
        raise ValueError(f"{where}: {name} must be a non-empty list of finite numbers, got {str(value)[:60]}")
    if length is not None and len(value) != length:
        raise ValueError(f"{where}: {name} has {len(value)} entries, not {length}")
    if positive and min(value) <= 0:
        raise ValueError(f"{where}: {name} must be positive, got {min(value)!r}")
    return value


def _check_schedule(schedule, where: str) -> None:
    """A multistage schedule: lengths, η per stage, β per stage, one ν and one η_l."""
    for key in ("lengths", "eta_g", "beta", "nu", "eta_l"):
        if key not in schedule:
            raise ValueError(f"{where}: schedule.{key} is missing (lengths, eta_g, beta, nu, eta_l)")
    lengths = _numbers(schedule["lengths"], "schedule.lengths", where, positive=True)
    if not all(isinstance(v, int) for v in lengths):
        raise ValueError(f"{where}: schedule.lengths must be whole numbers of rounds, got {lengths}")
    _numbers(schedule["eta_g"], "schedule.eta_g", where, length=len(lengths), positive=True)
    beta = _numbers(schedule["beta"], "schedule.beta", where, length=len(lengths))
    if not all(0 <= b < 1 for b in beta):
        raise ValueError(f"{where}: schedule.beta must lie in [0, 1), got {beta}")
    nu = schedule["nu"]
    nus = _numbers(nu, "schedule.nu", where, length=len(lengths)) if isinstance(nu, list) else [nu]
    if not all(_finite(v) and 0 <= v <= 1 for v in nus):
        raise ValueError(f"{where}: schedule.nu must be a number in [0, 1] or one per stage, got {nu!r}")
    eta_l = schedule["eta_l"]
    if not _finite(eta_l) or not eta_l > 0:
        raise ValueError(f"{where}: schedule.eta_l must be one finite number > 0, got {eta_l!r}")


def _check_availability(model, n: int, where: str) -> None:
    """One of :data:`AVAILABILITY` with its fields: probabilities in [0, 1], m in 1..N, λ in
    (−1, 1); a field of another name need only be present (its pattern checks it when read)."""
    kind = model.get("model")
    models = dict(AVAILABILITY)
    if not isinstance(kind, str) or kind not in models:
        raise ValueError(f"{where}: availability.model must be one of {', '.join(models)}, got {kind!r}")
    for key in models[kind]:
        if key not in model:
            raise ValueError(f"{where}: availability {kind!r} needs {key!r}")
        if key == "m":
            m = model["m"]
            if isinstance(m, bool) or not isinstance(m, int) or not 1 <= m <= n:
                raise ValueError(f"{where}: availability.m must be an integer in 1..{n}, got {m!r}")
        elif key == "lam":            # the chain's second eigenvalue 1 − a − b (CA-Fed App. F3)
            values = _numbers(model[key], "availability.lam", where, length=n)
            if not all(-1 < v < 1 for v in values):
                raise ValueError(f"{where}: availability.lam must lie in (−1, 1), got {min(values)!r}..{max(values)!r}")
        elif key in ("pi", "p"):
            values = _numbers(model[key], f"availability.{key}", where, length=n)
            if not all(0 <= v <= 1 for v in values):
                raise ValueError(f"{where}: availability.{key} must hold probabilities in [0, 1], got "
                                 f"{min(values)!r}..{max(values)!r}")


def _is_number(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _finite(value) -> bool:
    """Whether ``value`` is a finite number (an integer beyond a float's range is not)."""
    try:
        return _is_number(value) and math.isfinite(value)
    except OverflowError:
        return False


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
        if key in PER_CLIENT and isinstance(value, list):
            if len(value) != n or not all(v is None or _finite(v) for v in value):
                raise ValueError(f"{where}: {key} must be a list of {n} numbers or nulls (one per client), "
                                 f"got {str(value)[:60]}")
            _in_range(key, [v for v in value if v is not None], where)
            continue
        if value is not None and not _is_number(value):
            raise ValueError(f"{where}: {key} must be a number or null"
                             + (f" (or a list of {n}, one per client)" if key in PER_CLIENT else "")
                             + f", got {_kind(value)}")
        if value is not None and not _finite(value):
            raise ValueError(f"{where}: {key} must be a finite number, got {value!r} (a number beyond a float's range "
                             "reads as infinity)")
        if key == "grad_norm2" and value is not None and not value >= 0:
            raise ValueError(f"{where}: grad_norm2 is a squared norm and must be ≥ 0, got {value!r}")
        if value is not None:
            _in_range(key, [value], where)
    low, high = entry.get("heterogeneity"), entry.get("heterogeneity_max")
    if _is_number(low) and _is_number(high) and high < low:
        raise ValueError(f"{where}: heterogeneity_max ({high!r}) is below heterogeneity ({low!r}); the largest "
                         "client's ‖∇f_i − ∇f‖² is at least their mean")
    return entry


def _kind(value) -> str:
    """A value as an error shows it, with its JSON type where a number was expected."""
    if isinstance(value, str):
        return f"the string {value!r}"
    return f"{type(value).__name__} {str(value)[:40]}"


def _in_range(key: str, values: list, where: str) -> None:
    """The values of field ``key`` within its range of :data:`_FIELD_RANGES` (if it has one)."""
    if key not in _FIELD_RANGES:
        return
    low, high, whole = _FIELD_RANGES[key]
    for v in values:
        if not low <= v <= high or (whole and v != int(v)):
            kind = "whole numbers" if whole else "numbers"
            span = f"≥ {low}" if high == math.inf else f"in [{low}, {high}]"
            raise ValueError(f"{where}: {key} holds {kind} {span}, got {v!r}")


def load_record(path, *, keep_damaged: bool = False, bytes_per_cell: float = 0.0, held_bytes: float = 0.0) -> RunRecord:
    """Read a record (see the module docstring); a cut-off last line is dropped with a warning.

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
