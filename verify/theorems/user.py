"""A theorem of the user's own, through the same contract as the papers' theorems.

The short way is a bound written in the participation's delays, like FedSUM's: a function of
any of ``constants``, ``tau_max``, ``tau_avg`` (or ``expected_tau_max``, ``expected_tau_avg``
for a bound over the participation too), ``eta_g``, ``eta_l``, ``algorithm``, ``pattern``,
returning a ``bounds.core.Bound`` (sympy terms, conditions; see ``bounds.core.make_bound``) or a
number. :func:`user_theorem` wraps it with what it bounds and for whom; ``verify.check`` and
``verify.conformance`` take the result, and ``verify.theorems.register`` makes it a name that
``fedverify check --theorem NAME --plugin FILE.py`` finds (the file calls ``register``). The long way, for any
other left side or step-size rule, is a :class:`~verify.theorems.contract.Theorem` with a
``plan`` of its own (see ``verify.theorems.momentum`` for a worked one).
"""
from __future__ import annotations

import inspect

from ..verdicts import AVERAGE_GRAD_NORM2, AVERAGE_GRAD_NORM2_LATEX
from .contract import Theorem
from .measures import average_grad_norm2

__all__ = ["user_theorem", "from_callable"]

KEYWORDS = ("constants", "tau_max", "tau_avg", "expected_tau_max", "expected_tau_avg", "eta_g", "eta_l", "algorithm",
            "pattern")


def user_theorem(bound, *, covers=None, name: str | None = None, lhs: str = AVERAGE_GRAD_NORM2,
                 lhs_latex: str = AVERAGE_GRAD_NORM2_LATEX, measure=None, steps: str | None = None, needs=None,
                 assumptions: str = "", nonnegative: bool | None = None) -> Theorem:
    """A checkable theorem from a delay bound ``bound`` (see the module docstring).

    ``covers``: the algorithm names it is proved for (None: unknown, every verdict is then
    unmarked); ``measure(history, problem) -> float``: the left side of one run (default
    (1/T) Σ_t ‖∇f(x_t)‖², the History's ``mean_grad_norm2``), described by ``lhs``/``lhs_latex``;
    ``steps``: what step sizes it assumes, in words; ``needs``: constants beyond L, σ², Δ_f, F_0;
    ``nonnegative``: whether the left side is never negative, which lets the judge take Markov's
    lower limit (default: True for the default measure, False for a measure of your own).
    The bound is over the participation too when it takes ``expected_tau_max``."""
    if not callable(bound):
        raise ValueError(f"bound must be a callable returning a Bound or a number, got {bound!r}")
    try:
        params = set(inspect.signature(bound).parameters)
    except (TypeError, ValueError):
        raise ValueError(f"cannot read the signature of bound {bound!r}") from None
    unknown = sorted(p for p in params if p not in KEYWORDS
                     and inspect.signature(bound).parameters[p].default is inspect.Parameter.empty)
    if unknown:
        raise ValueError(f"bound {getattr(bound, '__name__', bound)!r} needs {', '.join(unknown)}, which check cannot "
                         f"give; a delay bound takes only {', '.join(KEYWORDS)}")
    if measure is not None and not callable(measure):
        raise ValueError(f"measure must be a callable (history, problem) -> float, got {measure!r}")
    if covers is not None and (isinstance(covers, str) or not all(isinstance(c, str) for c in covers)):
        raise ValueError(f"covers must be a sequence of algorithm names, got {covers!r}")
    title = name or getattr(bound, "__qualname__", getattr(bound, "__name__", repr(bound)))
    given = "η_g, η_l given to check" if {"eta_g", "eta_l"} & params else "FedSUM Thm 4.1's unless the bound prescribes its own"
    return Theorem(name=title, bound=bound, lhs=lhs, lhs_latex=lhs_latex,
                   expectation="participation" if "expected_tau_max" in params else "noise",
                   covers=None if covers is None else tuple(covers), steps=steps or given, plan=None,
                   needs=dict(needs or {}), assumptions=assumptions, delay_bound=True,
                   measure=measure or average_grad_norm2,
                   nonnegative=measure is None if nonnegative is None else bool(nonnegative))


def from_callable(bound) -> Theorem:
    """A bare callable as a theorem: its ``covers`` attribute (if any) names the algorithms."""
    return user_theorem(bound, covers=getattr(bound, "covers", None))
