"""Which participation measure predicts the measured side: models compared by held-out error.

For one (problem, algorithm, step size), each trace j has a response y_j = log of its measured
side (1/T) Σ_t ‖∇f(x_t)‖², averaged over the noise seeds (a trace on which a run diverged is left
out and counted), and features x_j from :mod:`participation.measures`, each on a log scale where
it is a time (:data:`TRANSFORMS`; a time the trace leaves unbounded is capped at T, the longest
the trace can show). A model is a set of features; it is fitted by least squares with an
intercept.

Held-out error (leave one sampler out): for every sampler s, the model is fitted on the traces
of the other samplers and predicts the traces of s; e_j is the squared error of trace j. A model
that only fits its own sampler's quirks predicts the next sampler badly, so this compares what
generalises across participation mechanisms.

Improvement over a reference model (τ_max and τ_avg, FedSUM's measures): the mean over traces
of e_j(reference) − e_j(model), with a 95% percentile interval from a cluster bootstrap that
resamples samplers with replacement (traces of one sampler are not independent), ``draws``
resamples from a fixed seed. An interval above 0 says the model's extra measures carry
information beyond τ_max and τ_avg that holds across samplers.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["TRANSFORMS", "REFERENCE", "candidate_models", "feature_matrix", "held_out_errors", "Comparison",
           "compare"]

#: Feature transforms: times on a log scale (1 + x, so 0 stays finite), capped at T.
TRANSFORMS = {
    "tau_max": "log1p", "tau_avg": "log1p", "longest_empty_run": "log1p", "longest_group_absence": "log1p",
    "participation_error": "identity", "return_time": "log", "mixing_time": "log", "label_coverage": "identity",
}
#: The reference model: FedSUM's two measures.
REFERENCE = ("tau_max", "tau_avg")


def candidate_models(available) -> dict[str, tuple[str, ...]]:
    """The models compared: each FedSUM measure alone, the reference, the reference plus each
    other available measure, and every available measure."""
    others = [name for name in available if name not in REFERENCE]
    models = {"τ_max": ("tau_max",), "τ_avg": ("tau_avg",), "τ_max + τ_avg": REFERENCE}
    models.update({f"τ_max + τ_avg + {name}": REFERENCE + (name,) for name in others})
    models["all measures"] = REFERENCE + tuple(others)
    return models


def feature_matrix(rows: list[dict], names, rounds: int) -> np.ndarray:
    """(traces, features): each measure of ``rows`` transformed as :data:`TRANSFORMS` says."""
    columns = []
    for name in names:
        values = np.minimum(np.array([float(r[name]) for r in rows]), float(rounds))
        kind = TRANSFORMS[name]
        columns.append(np.log1p(values) if kind == "log1p" else np.log(np.maximum(values, 1e-12)) if kind == "log"
                       else values)
    return np.column_stack(columns) if columns else np.zeros((len(rows), 0))


def _fit_predict(X_train, y_train, X_test) -> np.ndarray:
    A = np.column_stack([np.ones(len(X_train)), X_train])
    coef, *_ = np.linalg.lstsq(A, y_train, rcond=None)
    return np.column_stack([np.ones(len(X_test)), X_test]) @ coef


def held_out_errors(X: np.ndarray, y: np.ndarray, samplers) -> np.ndarray:
    """Squared leave-one-sampler-out prediction error of every trace."""
    samplers = np.asarray(samplers)
    errors = np.empty(len(y))
    for s in np.unique(samplers):
        test = samplers == s
        errors[test] = (y[test] - _fit_predict(X[~test], y[~test], X[test])) ** 2
    return errors


@dataclass(frozen=True)
class Comparison:
    """One model's held-out root-mean-square error and its improvement over the reference
    (mean of e_ref − e_model, with the cluster-bootstrap interval)."""

    model: str
    features: tuple
    rmse: float
    improvement: float
    low: float
    high: float

    @property
    def beyond_reference(self) -> bool:
        return self.low > 0


def _cluster_means(diff: np.ndarray, samplers: np.ndarray, draws: int, seed: int) -> np.ndarray:
    """Means of ``diff`` over ``draws`` resamples of the samplers with replacement."""
    names, index = np.unique(samplers, return_inverse=True)
    sums = np.bincount(index, weights=diff, minlength=names.size)
    counts = np.bincount(index, minlength=names.size).astype(float)
    picks = np.random.default_rng(seed).integers(0, names.size, size=(draws, names.size))
    return sums[picks].sum(axis=1) / counts[picks].sum(axis=1)


def compare(rows: list[dict], y, samplers, rounds: int, *, draws: int = 2000, seed: int = 0) -> list[Comparison]:
    """Every model of :func:`candidate_models` (over the measures present in ``rows``) against
    the reference, by held-out error (module docstring)."""
    y = np.asarray(y, dtype=float)
    samplers = np.asarray(samplers)
    available = [name for name in TRANSFORMS if all(name in r for r in rows)]
    models = candidate_models(available)
    errors = {label: held_out_errors(feature_matrix(rows, names, rounds), y, samplers)
              for label, names in models.items()}
    reference = errors["τ_max + τ_avg"]
    out = []
    for label, names in models.items():
        diff = reference - errors[label]
        means = _cluster_means(diff, samplers, draws, seed)
        low, high = np.quantile(means, [0.025, 0.975]) if label != "τ_max + τ_avg" else (0.0, 0.0)
        out.append(Comparison(label, tuple(names), float(math.sqrt(errors[label].mean())), float(diff.mean()),
                              float(low), float(high)))
    return out
