"""The runs of the measures study: every trace under every (problem, algorithm, step size).

Problems (:func:`problem`): a heterogeneous noisy quadratic (``Quadratic.random``) and 10-class
logistic regression on scikit-learn's digits split over the clients three ways — Dirichlet(α)
label proportions at α = 0.1 and 0.5 (Hsu, Qi, Brown, arXiv:1909.06335) and an i.i.d. split
(α = ∞: a random permutation cut into equal parts). The logistic problems keep each client's
label counts, from which the label-coverage and group-absence measures are computed.

Step sizes: one grid shared by every trace, η_l = s/(K L) for s in ``Design.step_scales`` with
η_g = 1 (L the problem's smoothness constant), so that no trace is favoured by a rate tuned on it.

Each (problem, algorithm, scale) is a cell: all its traces and noise seeds run as one batch of
the engine (``algorithms.run_batch``) and the per-run measured side (1/T) Σ_{t<T} ‖∇f(x_t)‖² is
saved as a cell of ``verify.studies.cell_store`` (atomically), so a study resumes where it stopped.
A run that stops (non-finite parameters) or whose measured side is not finite counts as diverged.

The skip-empty control (quadratic only): the server does nothing in a round without participants,
so x stays where it is. The run is the engine's run on the trace without its empty rounds, and
each of its iterates is counted once for itself and once more for each empty round that follows
it, so that the measured side is the same average over the T rounds of the trace.
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import asdict, dataclass

import numpy as np

from participation import Trace

from ...report import number

__all__ = ["Design", "PROBLEMS", "CNN", "problem", "label_counts", "cell_config", "run_cell",
           "skip_empty_measured"]

#: Problem names: the quadratic and the digits logistic regression at three label splits.
PROBLEMS = ("quadratic", "logistic α=0.1", "logistic α=0.5", "logistic α=∞")
#: The non-convex problem of the smaller design (:func:`cnn_design`).
CNN = "cnn digits"


@dataclass(frozen=True)
class Design:
    """The study's sizes. ``step_scales``: η_l = s/(K L); ``noise_seeds``: runs per trace and
    cell of the quadratic, ``logistic_noise_seeds`` of the logistic problems, whose runs cost
    most, as does their K, ``logistic_local_steps``."""

    n_clients: int = 20
    rounds: int = 200
    rate: float = 0.2
    trace_seeds: int = 2
    noise_seeds: int = 2
    logistic_noise_seeds: int = 1
    local_steps: int = 5
    logistic_local_steps: int = 2
    algorithms: tuple = ("fedsum-cr", "fedavg", "scaffold")
    problems: tuple = PROBLEMS
    step_scales: tuple = (0.1, 0.3, 1.0)
    quadratic_dim: int = 10
    quadratic_noise: float = 0.5
    skip_empty: bool = True
    #: "scaled": η_l = s/(K L) for s in ``step_scales``; "given": η_l = s (for a problem whose
    #: estimated L makes the scaled steps too small to train it, the CNN).
    step_rule: str = "scaled"

    def as_dict(self) -> dict:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}


def _iid_parts(n_samples: int, n_clients: int, seed: int) -> list[np.ndarray]:
    order = np.random.default_rng(seed).permutation(n_samples)
    return [np.sort(p) for p in np.array_split(order, n_clients)]


def problem(name: str, design: Design):
    """(problem, label counts (N, C) or None, local steps K) of problem ``name``."""
    from algorithms.problems import Classifier, Logistic, Quadratic
    from algorithms.problems.client_data import digits, dirichlet_partition

    n = design.n_clients
    if name == "quadratic":
        return Quadratic.random(n, design.quadratic_dim, heterogeneity=1.0, noise_std=design.quadratic_noise,
                                seed=0), None, design.local_steps
    if name == CNN:
        made = Classifier.digits(n_clients=n, model="cnn", seed=0)
        return made, label_counts([made.data.labels[made.data.owner == i] for i in range(n)], 10), \
            design.logistic_local_steps
    if not name.startswith("logistic α="):
        raise ValueError(f"unknown problem {name!r}; choose from {', '.join(PROBLEMS + (CNN,))}")
    alpha = name.removeprefix("logistic α=")
    X, y = digits()
    parts = _iid_parts(y.size, n, 0) if alpha == "∞" else dirichlet_partition(y, n, float(alpha), 0, 10)
    made = Logistic([X[p] for p in parts], [y[p] for p in parts], 1e-3, 16, 10, True)
    return made, label_counts([y[p] for p in parts], 10), design.logistic_local_steps


def label_counts(labels_per_client, n_classes: int) -> np.ndarray:
    """(N, C): client n's number of samples of each label."""
    return np.stack([np.bincount(np.asarray(lab, dtype=np.int64), minlength=n_classes) for lab in labels_per_client])


def cell_config(design: Design, problem_name: str, algorithm: str, scale: float, traces) -> dict:
    """Everything a cell's numbers depend on, the traces as the digest of their masks."""
    digest = hashlib.sha256()
    for case in traces:
        digest.update(np.packbits(case.mask).tobytes())
        digest.update(repr(case.mask.shape).encode())
    return {"design": design.as_dict(), "problem": problem_name, "algorithm": algorithm, "scale": float(scale),
            "traces": digest.hexdigest(), "keys": [case.key for case in traces]}


def _measured(history) -> float:
    if history.stopped is not None:
        return math.inf
    value = float(np.mean(history.grad_norm2))
    return value if math.isfinite(value) else math.inf


def skip_empty_measured(history, mask: np.ndarray, problem) -> float:
    """The measured side of a server that skips empty rounds. ``history`` is the run on the
    trace without them: its iterate j, the model before the j-th kept round k_j, is the model of
    every round from k_{j−1} + 1 to k_j (k_{−1} = −1), and its final model is that of the rounds
    after the last kept one (its ‖∇f‖² evaluated on ``problem``)."""
    if history.stopped is not None:
        return math.inf
    kept = np.flatnonzero(mask.any(axis=1))
    grad2 = np.asarray(history.grad_norm2, dtype=float)[: kept.size]
    weights = np.diff(np.concatenate([[-1], kept])).astype(float)
    total = float(np.dot(weights, grad2))
    trailing = mask.shape[0] - 1 - (int(kept[-1]) if kept.size else -1)
    if trailing:
        import torch

        final = torch.as_tensor(history.final_params, dtype=problem.dtype, device=problem.device)[None]
        total += trailing * float(problem.loss_and_grad_batch(final)[1].square().sum())
    value = total / mask.shape[0]
    return value if math.isfinite(value) else math.inf


def run_cell(design: Design, problem_name: str, algorithm: str, scale: float, traces, made=None) -> dict:
    """Every trace × noise seed of one cell: ``{"eta_l", "measured": [[per seed] per trace],
    "skip_empty": [[...]] or None}``."""
    import algorithms

    made = made or problem(problem_name, design)
    prob, _, k = made
    if design.step_rule == "given":
        L, eta_l = math.nan, float(scale)
    else:
        L = float(prob.constants().L)
        eta_l = scale / (k * L)
    seeds = range(design.noise_seeds if problem_name == "quadratic" else design.logistic_noise_seeds)
    alg = algorithms.get(algorithm, eta_l=eta_l, eta_g=1.0, local_steps=k)
    masks = [case.mask for case in traces]
    runs = [(m, s) for m in masks for s in seeds]
    histories = algorithms.run_batch(alg, prob, [algorithms_trace(m) for m, _ in runs], seeds=[s for _, s in runs])
    measured = np.array([_measured(h) for h in histories]).reshape(len(masks), len(seeds))
    skip = None
    if design.skip_empty and problem_name == "quadratic":
        skip = np.array(measured, copy=True)
        # traces with empty rounds, batched by the length of their compacted trace
        by_length: dict = {}
        for i, m in enumerate(masks):
            kept = int(m.any(axis=1).sum())
            if 0 < kept < m.shape[0]:
                by_length.setdefault(kept, []).append(i)
        for group in by_length.values():
            compact = algorithms.run_batch(alg, prob, [algorithms_trace(masks[i][masks[i].any(axis=1)])
                                                       for i in group for _ in seeds],
                                           seeds=[s for _ in group for s in seeds])
            for n, i in enumerate(group):
                skip[i] = [skip_empty_measured(h, masks[i], prob)
                           for h in compact[n * len(seeds):(n + 1) * len(seeds)]]
    clean = lambda a: [[number(float(v)) if math.isfinite(v) else "inf" for v in row] for row in a]   # noqa: E731
    return {"eta_l": eta_l, "L": number(L) if math.isfinite(L) else None, "local_steps": k, "measured": clean(measured),
            "skip_empty": None if skip is None else clean(skip)}


def algorithms_trace(mask: np.ndarray):
    return Trace(mask)
