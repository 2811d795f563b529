"""Federated problems with known (or labelled estimated) constants."""
from .base import FederatedProblem, ProblemConstants

_LAZY = {"Quadratic": ".quadratic", "Logistic": ".logistic", "Classifier": ".classifier", "FunctionProblem": ".functions"}

__all__ = ["FederatedProblem", "ProblemConstants", *_LAZY]


def __getattr__(name):
    if name in _LAZY:
        from importlib import import_module

        return getattr(import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
