"""LOGIT (OpenReview km8rXu0RnF) Thms 1 and 2 as checkable theorems.

Both bound (1/T) Σ_t E‖∇f(x_t)‖² of ``logit`` (eq. (8): unavailable clients contribute a
surrogate with weight 1/N) under independent availability with probabilities p_n^t (Thm 1;
a Bernoulli pattern) or p_n constant in time (Thm 2), in expectation over the noise and the
availability, so every seed runs on its own trace drawn from the pattern.

Their generator term bounds the gradient-generation error ε of eq. (23) through Assumption 5's
ε*_{n,t} and C₁ ((30)–(33)), neither of which can be measured. The check measures ε itself
along the runs, ε = 4·(1/T) Σ_t (1/N) Σ_{n∉A_t} (1/I) Σ_i ‖g̃_n − ∇F_n(x^n_{t,i})‖² (LOGIT
``observe``; the realised indicator in place of 1 − p_n^t), averaged over the runs, and enters
it as 4ε̄* with C₁ = 0, so the bound is (23) with ε measured and the theorem's step size and
other terms unchanged.

Step size: η = min{1/√(IT), 1/(2√30·LI)} (Thm 1, corrected cap) with η_g = 1, unless the
algorithm's own is given. σ₃² (Assumption 4, E‖∇F_n(x) − ∇f(x)‖² ≤ σ₃² for all x and n): the
largest max_n ‖∇F_n(x_t) − ∇f(x_t)‖² at the runs' iterates unless ``constants.zeta2`` gives it.
σ₂² (Assumption 3, the surrogates' variance): 0, since every surrogate rule here is a
deterministic function of the past, unless ``constants.extra["sigma2_surrogate"]`` gives it.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from bounds import logit as bl
from participation.patterns import Bernoulli

from .contract import Plan, Setup, Theorem
from .measures import average_grad_norm2, observed_max

__all__ = ["THEOREMS", "FORM_8"]

#: The surrogate rules of the form (8) (weight 1/N for every client); "none" reweights by 1/|A_t|.
FORM_8 = ("generator", "last", "ws", "zero")


def _probabilities(setup: Setup, name: str, constant: bool) -> np.ndarray:
    pattern = setup.pattern
    if not isinstance(pattern, Bernoulli):
        given = "a fixed trace" if pattern is None else type(pattern).__name__
        raise ValueError(f"{name} assumes independent availability with known probabilities p_n^t (LOGIT Section 3.3): "
                         f"give a Bernoulli pattern, not {given}")
    if constant:
        if callable(pattern.p) or np.ndim(pattern.p) == 2:
            raise ValueError(f"{name} assumes p_n constant in time (LOGIT Thm 2); the Bernoulli pattern varies by round: "
                             "use logit.theorem_1")
        return np.broadcast_to(np.asarray(pattern.p, dtype=float), (setup.n_clients,)).copy()
    return pattern.probabilities(0, setup.rounds)


def _constants(setup: Setup, histories):
    c = setup.constants
    extra = dict(c.extra or {})
    extra.setdefault(bl.SURROGATE_KEY, 0.0)
    zeta2 = c.zeta2 if c.zeta2 is not None else observed_max(histories, "heterogeneity_max")
    return dataclasses.replace(c, zeta2=zeta2, extra=extra)


def measured_generator_error(histories) -> float:
    """ε of eq. (23) per run, 4·(1/T) Σ_t generator_error_t, averaged over the runs."""
    return float(np.mean([4 * np.mean(h.observed["generator_error"]) for h in histories]))


def _plan(setup: Setup, *, which: str) -> Plan:
    import algorithms

    name = f"logit.{which}"
    p = _probabilities(setup, name, constant=which == "theorem_2")
    c0 = dataclasses.replace(setup.constants, zeta2=0.0, extra={**(setup.constants.extra or {}), bl.SURROGATE_KEY: 0.0})
    if setup.given is not None:
        algorithm = setup.given
        eta = algorithm.eta_l
    else:
        eta = bl.step_size(c0)
        algorithm = algorithms.get(setup.algorithm, eta_l=eta, eta_g=1.0, local_steps=setup.local_steps,
                                   **dict(setup.hparams))
    if algorithm.eta_g != 1.0:
        raise ValueError(f"{name} analyses x_(t+1) = x_t − η(1/N)Σ(...) (eq. (8)): η_g must be 1, got {algorithm.eta_g}")
    if not hasattr(algorithm, "surrogate"):
        raise ValueError(f"{name} is checked on logit (eq. (8)), not {setup.algorithm}")
    traces, note = setup.unit_traces("participation")
    one_minus = float(np.mean(1 - p))

    def bound(histories):
        c = _constants(setup, histories)
        eps = measured_generator_error(histories)
        eps_star = eps / (4 * one_minus) if one_minus > 0 else 0.0
        if which == "theorem_1":
            return bl.theorem_1(c, p, 0.0, eps_star, 0.0, eta=eta)
        return bl.theorem_2(c, p, eps_star, 0.0, eta=eta)

    def extras(histories):
        c = _constants(setup, histories)
        return {"generator error ε (measured)": measured_generator_error(histories), "sigma3^2": c.zeta2,
                "sigma3^2 source": "given" if setup.constants.zeta2 is not None else "measured: max over the runs' iterates",
                "sigma2^2": c.extra[bl.SURROGATE_KEY], "p_bar": float(np.mean(p))}

    notes = [note] if note else []
    notes.append("ε of eq. (23) measured along the runs and entered as 4ε̄* with C₁ = 0 (the generator term of the "
                 "theorem replaced by its measured value)")
    if algorithm.surrogate not in FORM_8:
        notes.append(f"{name} is proved for the surrogates of eq. (8) ({', '.join(FORM_8)}), not surrogate="
                     f"{algorithm.surrogate!r}: the verdict compares numbers for reference")
    return Plan(algorithm=algorithm, traces=traces, measure=average_grad_norm2, bound=bound, extras=extras,
                covered=lambda histories: algorithm.surrogate in FORM_8, run_options={"observe": True},
                step_sizes={"eta": eta, "eta_g": 1.0}, notes=notes)


_LHS = "(1/T) Σ_{t<T} ‖∇f(x_t)‖²"
_LHS_LATEX = r"\frac{1}{T}\sum_{t=0}^{T-1}\|\nabla f(x_t)\|^2"
_NEEDS = {"epsilon": "ε of eq. (23), measured along the runs (LOGIT observe)",
          "zeta2": "σ₃² (Assumption 4): given, else the largest max_n ‖∇F_n − ∇f‖² at the runs' iterates",
          "sigma2_surrogate": "σ₂² (Assumption 3): given, else 0 (deterministic surrogates)"}
_STEPS = "η = min{1/√(IT), 1/(2√30·LI)} (Thm 1, corrected cap), η_g = 1"


def _theorem(which, bound, assumptions) -> Theorem:
    return Theorem(name=f"logit.{which}", bound=bound, lhs=_LHS, lhs_latex=_LHS_LATEX, expectation="participation",
                   covers=("logit",), steps=_STEPS, plan=lambda setup: _plan(setup, which=which), needs=_NEEDS,
                   assumptions=assumptions)


THEOREMS = {
    "logit.theorem_1": _theorem("theorem_1", bl.theorem_1, "a Bernoulli pattern (p_n^t may vary by round); any problem"),
    "logit.theorem_2": _theorem("theorem_2", bl.theorem_2, "a Bernoulli pattern with p_n constant in time; any problem"),
}
