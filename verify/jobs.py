"""The jobs that both a command and a sweep cell run, written once.

* :func:`delay_case`: E[τ_max] and E[τ_avg] of a participation pattern at T rounds, each with
  its Monte-Carlo estimate, its exact value where ``participation.expected`` has a formula, and
  FedSUM's bound on E[τ_max] (App. F, Lemmas F.1–F.4) where the pattern is one of its cases.
  ``fedverify mc`` prints it; a sweep's ``monte_carlo`` cell saves it.
* :func:`check_cell`: one check of an algorithm under a pattern against a theorem, reduced to
  the row ``check`` prints and saves. A sweep's ``check`` cell is this; the ``check`` command
  batches many such checks (``verify.check_many``) and writes the same rows
  (``verify.report.check_row``).
"""
from __future__ import annotations

import time
from dataclasses import dataclass

__all__ = ["DelayCase", "delay_case", "exact_or_none", "paper_bound_or_none", "check_cell"]


def exact_or_none(function, pattern, rounds):
    """``function(pattern, rounds)`` (an exact expectation), or None where it has no formula."""
    try:
        return function(pattern, rounds)
    except ValueError:
        return None


def paper_bound_or_none(pattern, rounds):
    """FedSUM's App. F bound on E[τ_max] for ``pattern`` at ``rounds``, or None outside its cases."""
    from participation.expected import paper_tau_max_bound

    try:
        return paper_tau_max_bound(pattern, rounds).value
    except ValueError:
        return None


@dataclass(frozen=True)
class DelayCase:
    """What :func:`delay_case` measures. ``estimates``, ``exact`` and ``bound`` are keyed by
    "tau_max" and "tau_avg"; the paper's bound on E[τ_max] also bounds E[τ_avg], since
    τ_avg ≤ τ_max on every trace."""

    n_clients: int
    estimates: dict
    exact: dict
    bound: dict
    reps: int
    method: str
    samples: object
    seconds: float


def delay_case(pattern, rounds: int, reps: int | None = None, seed=0, **monte_carlo_options) -> DelayCase:
    """Monte-Carlo E[τ_max], E[τ_avg] of ``pattern`` over ``rounds`` (``participation.expected.
    monte_carlo`` with ``reps``, ``seed`` and ``monte_carlo_options``), beside the exact values
    and the paper's bound."""
    from participation.expected import exact_tau_avg, exact_tau_max, monte_carlo

    start = time.perf_counter()
    result = monte_carlo(pattern, rounds, reps, seed, **monte_carlo_options)
    seconds = time.perf_counter() - start
    bound = paper_bound_or_none(pattern, rounds)
    return DelayCase(n_clients=pattern.n_clients, estimates={"tau_max": result.tau_max, "tau_avg": result.tau_avg},
                     exact={"tau_max": exact_or_none(exact_tau_max, pattern, rounds),
                            "tau_avg": exact_or_none(exact_tau_avg, pattern, rounds)},
                     bound={"tau_max": bound, "tau_avg": bound}, reps=result.reps, method=result.method,
                     samples=result.samples, seconds=seconds)


def check_cell(algorithm: str, problem, source, theorem: str, *, pattern_label: str, seeds, rounds: int,
               local_steps: int, constants, confidence: float, trace_seed):
    """``verify.check`` of one algorithm under one pattern or trace, with the row ``check``
    writes for it (``report.json_row(report.check_row(...))``, without the curve)."""
    import numpy as np

    from .checking import check
    from .report import check_row, json_row

    result = check(algorithm, problem, source, theorem, seeds=seeds, rounds=rounds, local_steps=local_steps,
                   constants=constants, confidence=confidence, trace_seed=trace_seed)
    return result, json_row(check_row(result, pattern_label, theorem, np.empty(0)))
