"""Right-hand sides of the papers' convergence theorems (pure numpy/scipy/sympy).

Every theorem is a function returning a :class:`~bounds.core.Bound` (value, named
terms, prescribed step sizes, conditions at the user's numbers, source, sympy
expression and LaTeX). Modules: :mod:`bounds.fedsum`, :mod:`bounds.cafed`,
:mod:`bounds.momentum`, :mod:`bounds.logit`.
"""
from . import cafed, fedsum, logit, momentum
from .core import Bound, Condition, Constants, Formula, Source

__all__ = ["Bound", "Condition", "Constants", "Formula", "Source", "cafed", "fedsum", "logit", "momentum"]
