"""Worst-case cells of a sweep: a theorem's bound against the exact worst case of an algorithm on a
pattern's trace (``verify.worst_case.theorem_bounds``), at σ² = 0.

A cell's config: algorithm, pattern (a preset with ⌊2N/3⌋ clients a round where it samples, or a
trace file), theorem, n_clients, rounds, local_steps, seed, traces (drawn for a theorem in
expectation over the participation; a trace file stands alone), solver, and the class's
constants L, delta_f, F0, sigma_g2. Its results: the worst case (one trace, or the mean of the
per-trace worst cases), the solver's status and accuracy, the bound at the same step sizes, the
ratio bound / worst case (FedSUM arXiv:2512.18275 Thm 4.1 eq. (12), Cor 4.1; Server momentum
arXiv:2312.12670 Thms 4.1, 4.6).
"""
from __future__ import annotations

import math
import numbers
from pathlib import Path

__all__ = ["DEFAULTS", "COLUMNS", "keys", "fields", "run", "describe", "check_names", "summary"]

#: The keys of a [worst_case] table with their defaults, in product order.
DEFAULTS = {"algorithms": ("fedsum-b", "fedsum"), "patterns": ("P1",), "theorems": ("fedsum.theorem_4_1",),
            "n_clients": (3,), "rounds": (6,), "local_steps": (2,), "seeds": (0,), "traces": (3,),
            "solvers": ("clarabel",), "L": (1.0,), "delta_f": (1.0,), "F0": (1.0,), "sigma_g2": (1.0,)}

#: The results' columns of the sweep's table a worst-case cell adds.
COLUMNS = ("traces", "solver", "worst_case", "status", "accuracy", "bound_valid")


def _positive_number(value) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"expected a finite number > 0, got {value!r}"[:120])
    return float(value)


def keys(name, positive_int, seed):
    """Key → parser of one value (the sweep's own parsers of names, counts and seeds passed in)."""
    number = _positive_number

    def solver(value):
        from ..worst_case import SOLVERS

        text = name(value).lower()
        if text not in SOLVERS:
            raise ValueError(f"expected one of {', '.join(SOLVERS)}, got {value!r}")
        return text
    return {"algorithms": name, "patterns": name, "theorems": name, "n_clients": positive_int, "rounds": positive_int,
            "local_steps": positive_int, "seeds": seed, "traces": positive_int, "solvers": solver, "L": number,
            "delta_f": number, "F0": number, "sigma_g2": number}


def check_names(algorithms, theorems) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The canonical algorithm and theorem names; a theorem without a comparison, an algorithm the
    engine does not transcribe, or a pair the theorem's class does not run, is a one-line ValueError."""
    import algorithms as registry

    from ..worst_case import SUPPORTED, coverage
    from ..worst_case.theorem_bounds import resolve_theorem

    names = tuple(dict.fromkeys(registry.get(a).name for a in algorithms))
    for a in names:
        if a not in SUPPORTED:
            raise ValueError(f"no worst case for {a!r}: the engine transcribes {', '.join(SUPPORTED)}")
    resolved = tuple(dict.fromkeys(resolve_theorem(t) for t in theorems))
    for t in resolved:
        runs = coverage(t).algorithms
        for a in names:
            if a not in runs:
                raise ValueError(f"{t}'s worst case runs {', '.join(runs)}, not {a}")
    return names, resolved


def fields(is_int, is_number, is_text, is_bool, or_none):
    """(config fields, result fields) of a valid record, with the sweep's tests passed in."""
    config = {"algorithm": is_text, "pattern": is_text, "theorem": is_text, "n_clients": is_int, "rounds": is_int,
              "local_steps": is_int, "seed": is_int, "traces": is_int, "solver": is_text, "L": is_number,
              "delta_f": is_number, "F0": is_number, "sigma_g2": is_number}
    results = {"rounds_run": is_int, "worst_case": or_none(is_number), "bound": is_number, "ratio": or_none(is_number),
               "status": is_text, "accuracy": or_none(is_number), "eta_l": is_number, "eta_g": is_number,
               "tau_max": is_number, "tau_avg": is_number, "label": is_text, "covered": is_bool,
               "bound_valid": is_bool}
    return config, results


def _source(cell):
    """The cell's traces and pattern (None for a trace file): a trace file (checked against its
    hash, cut to ``rounds``), or ``traces`` traces of seed ``seed`` drawn from the preset for a
    theorem in expectation over the participation, else its trace of seed ``seed``."""
    import hashlib

    from participation import Trace

    from ..worst_case.theorem_bounds import THEOREMS, pattern_for

    c = cell.config
    if "trace_sha256" in c:
        path = Path(cell.trace_file)
        if hashlib.sha256(path.read_bytes()).hexdigest() != c["trace_sha256"]:
            raise ValueError(f"trace file {path.name} changed since the sweep was expanded")
        trace = Trace.load(path)
        return [Trace(trace.mask[:c["rounds"]])], None
    pattern, _ = pattern_for(c["pattern"], c["n_clients"])
    if THEOREMS[c["theorem"]]:
        return [Trace(m) for m in pattern.sample_batch(c["rounds"], c["traces"], seed=c["seed"])], pattern
    return [pattern.sample(c["rounds"], seed=c["seed"])], pattern


def run(cell) -> dict:
    """The results of one worst-case cell (``verify.worst_case.theorem_bounds``)."""
    from bounds import Constants

    from ..worst_case.theorem_bounds import against

    c = cell.config
    traces, pattern = _source(cell)
    first = traces[0]
    momentum = c["theorem"].startswith("momentum.")
    constants = Constants(c["L"], 0.0, c["delta_f"], c["F0"], first.n_clients, c["local_steps"], first.n_rounds,
                          zeta2=c["sigma_g2"] if momentum else None)
    r = against(c["theorem"], c["algorithm"], traces, constants, pattern=pattern, solver=c["solver"])
    return {"rounds_run": r.rounds, "worst_case": r.worst_case, "bound": r.bound, "ratio": r.ratio,
            "status": r.status, "accuracy": r.accuracy, "eta_l": r.step_sizes["eta_l"], "eta_g": r.step_sizes["eta_g"],
            "tau_max": sum(t.tau_max for t in r.per_trace) / len(r.per_trace),
            "tau_avg": sum(t.tau_avg for t in r.per_trace) / len(r.per_trace), "label": r.label,
            "covered": r.covered, "bound_valid": r.bound_valid, "detail": r.as_dict()}


def describe(cell) -> str:
    c = cell.config
    return (f"worst case of {c['algorithm']} under {c['pattern']} against {c['theorem']} (N={c['n_clients']}, "
            f"T={c['rounds']}, K={c['local_steps']}, seed {c['seed']})")


def summary(rows, cell) -> list[str]:
    """The worst-case rows as text lines (``cell`` formats one number)."""
    head = (f"{'algorithm':10s} {'pattern':10s} {'theorem':22s} {'N':>3s} {'T':>4s} {'K':>3s} {'seed':>4s} "
            f"{'worst case':>10s} {'bound':>10s} {'ratio':>7s}  status")
    lines = [f"worst-case cells ({len(rows)})", head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['algorithm']:10s} {r['pattern']:10s} {r['theorem']:22s} {r['n_clients']:>3d} "
                     f"{r['rounds_run']:>4d} {r['local_steps']:>3d} {r['seed']:>4d} {cell(r['worst_case'], 10)} "
                     f"{cell(r['bound'], 10)} {cell(r['ratio'], 7, 3)}  {r['status']}")
    return lines
