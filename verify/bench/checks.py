"""The bench rows of batched runs: checks and searches run as batches against the same runs
one at a time (``verify.theorems.runner.one_by_one``), on the same input in one process.

Rows: the default ``fedverify check`` (FedSUM Thm 4.1, its five algorithms on P1–P3, five
seeds, T = 500), ``check --paper fedsum``, ``check --paper momentum``, one conformance search,
and rounds per second per run of a batch of 25 FedSUM runs on the default quadratic. Both
sides compute the same numbers (a run gives the same numbers alone or in a batch); the row's
note says so when it was verified in the row.
"""
from __future__ import annotations

import time

import numpy as np

from participation import preset

from .rows import Ratio
from ..check_tables import CheckSettings, compute_rows, default_names, paper_theorems
from ..choices import DEFAULT_CLIENTS, MAIN_PRESETS, DefaultNames, build_problem, resolve_patterns, split_names
from ..cli import build_parser
from ..theorems import get

__all__ = ["batch_ratios", "check_ratio", "conformance_ratio", "rounds_per_second_ratio"]


def _timed(fn):
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def _check_args(extra: list[str]):
    return build_parser().parse_args(["check", *extra])


def _compute(args):
    """The rows of ``fedverify check`` with these arguments (no report, no files): its tables as
    the command resolves them, computed by ``verify.check_tables``."""
    from ..constants import estimate_constants, problem_constants

    theorems = paper_theorems(args.paper) if args.paper else [get(args.theorem)]
    n_clients = args.clients or DEFAULT_CLIENTS
    tables = []
    for theorem in theorems:
        names, patterns = default_names(theorem, MAIN_PRESETS)
        names = names if isinstance(args.algorithms, DefaultNames) else split_names(args.algorithms)
        patterns = patterns if isinstance(args.patterns, DefaultNames) else split_names(args.patterns)
        tables.append((theorem, names, resolve_patterns(patterns, n_clients)))
    problem = build_problem(args.problem, n_clients)
    consts = problem_constants(problem) if args.constants == "problem" else estimate_constants(problem)
    settings = CheckSettings(problem, consts, args.rounds, args.local_steps, args.seeds, args.confidence,
                             worst_case=args.worst_case)
    return compute_rows(tables, settings)


def _measured(results) -> list:
    return [r.values for r in results]


def check_ratio(title: str, extra: list[str], workload: str):
    """``fedverify check`` with ``extra`` arguments: batched against one run at a time."""
    from ..theorems.runner import one_by_one

    args = _check_args(extra)
    fast, (_, batched, _) = _timed(lambda: _compute(args))
    with one_by_one():
        slow, (_, alone, _) = _timed(lambda: _compute(args))
    same = _measured(batched) == _measured(alone)
    runs = sum(len(r.values) for r in batched)
    return Ratio(title, workload, slow, fast, baseline="one run at a time",
                 note=f"{runs} measured values, " + ("identical on both sides" if same else "DIFFERENT on the two sides"))


def rounds_per_second_ratio(quick: bool = False, rounds: int | None = None):
    """Rounds per second per run of 25 FedSUM runs (P1–P3 traces of their own seeds on the
    default quadratic; T = 500, 100 with ``quick``, or ``rounds``), batched against one at a time."""
    import algorithms

    rounds = rounds or (100 if quick else 500)
    problem = build_problem("quadratic", 20)
    masks = [preset(p, n_clients=20).sample(rounds, seed=s).mask for p in ("P1", "P2", "P3") for s in range(9)][:25]
    alg = algorithms.get("fedsum", eta_l=0.01, eta_g=1.0, local_steps=5)
    seeds = list(range(25))
    fast, batch = _timed(lambda: algorithms.run_batch(alg, problem, masks, seeds))
    slow, alone = _timed(lambda: [algorithms.run(alg, problem, m, seed=s) for m, s in zip(masks, seeds)])
    same = all(a.same_as(b) for a, b in zip(alone, batch))
    per_run = 25 * rounds
    return Ratio("rounds/s per run, batch of 25", f"FedSUM, N=20, d=10, K=5, T={rounds}", slow, fast,
                 baseline="one run at a time",
                 note=f"{per_run / fast:,.0f} rounds/s batched, {per_run / slow:,.0f} alone; histories "
                      + ("bit-identical" if same and np.all([a.stopped is None for a in alone]) else "DIFFERENT"))


def conformance_ratio(quick: bool = False, examples: int | None = None):
    """A conformance search of FedSUM Thm 4.1 (FedSUM, 5 seeds a case; 12 cases, 4 with
    ``quick``, or ``examples``), batched against one run at a time."""
    from ..counterexamples import conformance
    from ..theorems.runner import one_by_one

    examples = examples or (4 if quick else 12)

    def search():
        return conformance("fedsum", "fedsum.theorem_4_1", max_examples=examples, seeds=5, shrink=False)

    fast, batched = _timed(search)
    with one_by_one():
        slow, alone = _timed(search)
    same = (batched.examples, batched.worst_ratio, batched.found) == (alone.examples, alone.worst_ratio, alone.found)
    return Ratio("conformance search", f"fedsum.theorem_4_1, {examples} cases × 5 seeds", slow, fast,
                 baseline="one run at a time", note="same cases and worst margin" if same else "DIFFERENT results")


def batch_ratios(quick: bool = False) -> list:
    """The rows of batched runs (``quick``: shorter runs and fewer seeds)."""
    small = ["--rounds", "100", "--seeds", "2"] if quick else []
    return [check_ratio("check (default), batched", small, "FedSUM Thm 4.1, 5 algorithms × P1–P3 × "
                        + ("2 seeds × 100 rounds" if quick else "5 seeds × 500 rounds")),
            check_ratio("check --paper fedsum, batched", ["--paper", "fedsum", *small],
                        "every FedSUM theorem" + (", 2 seeds × 100 rounds" if quick else "")),
            check_ratio("check --paper momentum, batched", ["--paper", "momentum", *small],
                        "every server-momentum theorem" + (", 2 seeds × 100 rounds" if quick else "")),
            conformance_ratio(quick),
            rounds_per_second_ratio(quick)]
