"""The building blocks of the conformance search spaces: where ``conformance`` looks for a
counterexample to a theorem with a plan of its own, and the seed cases it tries first. Each
theorem names its own in its declaration (``Theorem.space`` through ``verify.theorems.search``,
which imports this module only when a search runs; ``Theorem.seed_cases``, its hand-made cases).

A case is (problem, participation, hparams): a problem that satisfies the theorem's assumptions,
a trace or pattern of the participation it assumes, and the options its step-size rule reads.
The step sizes themselves are the theorem's (``verify.theorems``): the search varies everything
else.
"""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from participation import Trace
from participation.patterns import Bernoulli, Markov, Uniform

from . import strategies as vst

__all__ = ["cases", "seed_cases", "full", "uniform", "autonomous", "markov", "bernoulli", "split_quadratic"]

_FINITE = dict(allow_nan=False, allow_infinity=False)


def _problem(draw, n: int, strongly_convex: bool = False):
    low = 0.2 if strongly_convex else 0.1
    return draw(vst.quadratic_problems(n_clients=n, noise_std=st.floats(0.0, 0.05), curvature=(low, 1.0)))


def _momentum_hparams(draw) -> dict:
    hp = {"beta": draw(st.floats(0.0, 0.95, **_FINITE)), "nu": draw(st.floats(0.0, 1.0, **_FINITE))}
    if draw(st.booleans()):
        hp["stages"] = (2.0, 1.0, 0.5)
    return hp


def _full(draw, n, T):
    return _problem(draw, n), Trace(np.ones((T, n), dtype=bool)), _momentum_hparams(draw)


def _uniform(draw, n, T):
    return _problem(draw, n), Uniform(n, draw(st.integers(1, n))), _momentum_hparams(draw)


def _autonomous(draw, n, T, any_arrival: bool):
    problem = _problem(draw, n)
    m = draw(st.integers(1, n))
    if any_arrival:       # any rule for who arrives, m arrivals per server step (Algorithm 4)
        keys = np.array(draw(st.lists(st.floats(0.0, 1.0, **_FINITE), min_size=T * n, max_size=T * n))).reshape(T, n)
        order = np.argsort(-keys, axis=1, kind="stable")
        mask = np.zeros((T, n), dtype=bool)
        np.put_along_axis(mask, order[:, :m], True, axis=1)
        source = Trace(mask)
    else:
        source = Uniform(n, m)
    hp = {"beta": draw(st.floats(0.0, 0.9, **_FINITE)), "nu": draw(st.floats(0.0, 1.0, **_FINITE)),
          "max_delay": draw(st.integers(1, 4)), "max_epochs": draw(st.integers(1, 3))}
    return problem, source, hp


def _markov(draw, n, T):
    pi = np.array(draw(st.lists(st.floats(0.2, 0.9, **_FINITE), min_size=n, max_size=n)))
    u = np.array(draw(st.lists(st.floats(0.0, 1.0, **_FINITE), min_size=n, max_size=n)))
    low = np.maximum.reduce([1 - 1 / pi, 1 - 1 / (1 - pi), np.full(n, -0.3)]) + 1e-6   # (236): a valid chain
    lam = low + u * (0.9 - low)
    return _problem(draw, n, strongly_convex=True), Markov(pi, lam), {"decay": draw(st.sampled_from((0.75, 1.0)))}


def _bernoulli(draw, n, T, per_round: bool):
    if per_round:
        p = np.array(draw(st.lists(st.floats(0.1, 1.0, **_FINITE), min_size=n * T, max_size=n * T))).reshape(T, n)
    else:
        p = np.array(draw(st.lists(st.floats(0.1, 1.0, **_FINITE), min_size=n, max_size=n)))
    return _problem(draw, n), Bernoulli(p, n), {"surrogate": draw(st.sampled_from(("last", "zero", "ws")))}


def full(draw, n, T):
    """Full participation: every client every round (Server momentum Thm 4.1)."""
    return _full(draw, n, T)


def uniform(draw, n, T):
    """m clients drawn uniformly without replacement each round (Server momentum Thm 4.6)."""
    return _uniform(draw, n, T)


def autonomous(draw, n, T, any_arrival: bool = False):
    """Autonomous clients: uniform arrival (Thm 5.1) or any rule with m arrivals a step (Cor G.1)."""
    return _autonomous(draw, n, T, any_arrival)


def markov(draw, n, T):
    """Two-state Markov availability on a strongly convex quadratic (CA-Fed Assumption 1)."""
    return _markov(draw, n, T)


def bernoulli(draw, n, T, per_round: bool = False):
    """Independent availability, p_n constant or per round (LOGIT Thms 1, 2)."""
    return _bernoulli(draw, n, T, per_round)


def split_quadratic(n: int, offset: float = 1.0):
    """n one-dimensional clients pulling apart (Σ b_i = n·offset, client 0 against the rest): all
    the error is heterogeneity and drift, the worst case of the drift terms (a seed case's problem)."""
    from algorithms.problems import Quadratic

    b = np.concatenate([[1.0], np.full(n - 1, -1.0 / (n - 1))])[:, None] + offset
    return Quadratic(np.ones((n, 1)), b)


@st.composite
def cases(draw, theorem, n_clients, rounds):
    """One case for the declared ``theorem`` (a ``verify.theorems.Theorem``): (problem, trace or
    pattern, hparams, T)."""
    n = draw(vst._strategy(n_clients))
    T = draw(vst._strategy(rounds))
    problem, source, hparams = theorem.space(draw, n, T)
    return problem, source, hparams, T


def seed_cases(theorem, rounds) -> list[tuple]:
    """The declared ``theorem``'s seed cases at ``rounds`` (40 when ``rounds`` is a range)."""
    T = rounds if isinstance(rounds, int) else 40
    made = theorem.seed_cases
    return [(problem, source, hp, T) for problem, source, hp in (made(T) if made else [])]
