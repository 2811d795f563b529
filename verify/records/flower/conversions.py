"""Model arrays and vectors: a Flower ``ArrayRecord`` flattened to a float64 vector and back, a flat
vector as an ``ArrayRecord``, and the ``measure`` callback that evaluates a fedverify problem at the
arrays of a round.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .dependency import require_flower


def vector_of(arrays) -> np.ndarray:
    """The arrays of a Flower ``ArrayRecord`` flattened and joined in the record's order, float64."""
    parts = [np.asarray(array.numpy(), dtype=np.float64).reshape(-1) for array in arrays.values()]
    return np.concatenate(parts) if parts else np.zeros(0)


def arrays_like(arrays, vector):
    """An ``ArrayRecord`` with the keys, shapes and dtypes of ``arrays`` holding ``vector``."""
    require_flower()
    from flwr.app import Array, ArrayRecord

    vector = np.asarray(vector).reshape(-1)
    out, at = {}, 0
    for key, array in arrays.items():
        shape = tuple(array.shape)
        size = int(np.prod(shape, dtype=np.int64))
        out[key] = Array(np.ascontiguousarray(vector[at:at + size].reshape(shape), dtype=array.dtype))
        at += size
    if at != vector.size:
        raise ValueError(f"the vector has {vector.size} entries, the arrays {at}")
    return ArrayRecord(out)


def arrays_of(x, key: str = "x"):
    """A flat model vector (numpy or torch) as an ``ArrayRecord`` with one float64 array ``key``."""
    require_flower()
    from flwr.app import Array, ArrayRecord

    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    return ArrayRecord({key: Array(np.ascontiguousarray(np.asarray(x, dtype=np.float64).reshape(-1)))})


def problem_measure(problem) -> Callable[[object], dict]:
    """``measure`` for :class:`RecordingStrategy` on a fedverify problem: arrays ↦
    {``grad_norm2``: ‖∇f(x)‖², ``loss``: f(x), ``heterogeneity``: (1/N) Σ_i ‖∇f_i(x) − ∇f(x)‖²,
    ``heterogeneity_max``: max_i ‖∇f_i(x) − ∇f(x)‖²} (and ``accuracy`` where the problem has
    one), x the arrays flattened as :func:`vector_of` does, in the problem's dtype and device.
    The heterogeneity is what the Server momentum (A3) and LOGIT (Assumption 4) theorems read."""
    import torch

    def measure(arrays) -> dict:
        x = torch.as_tensor(vector_of(arrays), dtype=problem.dtype, device=problem.device)
        if x.shape != (problem.dim,):
            raise ValueError(f"the model has {x.numel()} entries, the problem {problem.dim}")
        grads = problem.client_grads(x)
        mean = grads.mean(dim=0)
        spread = (grads - mean).square().sum(dim=1)
        values = {"grad_norm2": float(problem.full_grad(x).square().sum()), "loss": float(problem.loss(x)),
                  "heterogeneity": float(spread.mean()), "heterogeneity_max": float(spread.max())}
        accuracy = problem.accuracy(x) if hasattr(problem, "accuracy") else None
        if accuracy is not None:
            values["accuracy"] = float(accuracy)
        return values

    return measure
