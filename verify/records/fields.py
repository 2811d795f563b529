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

This module holds the format's constants and field tables (:data:`FORMAT`, :data:`VERSION`,
:data:`PER_CLIENT`, :data:`PER_ROUND`, :data:`CONSTANTS`, :data:`AVAILABILITY`, ...) and checks a
header line (``check_header``) and a round line (``check_round``) against them;
:mod:`~verify.records.reading` reads a record, :mod:`~verify.records.writing` writes one.
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from pathlib import Path

from participation.validation import integer

__all__ = ["FORMAT", "VERSION", "READS", "SCHEMA_PATH", "PER_CLIENT", "PER_ROUND", "CONSTANTS", "AVAILABILITY"]

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
