"""What the theorems read of a run, measured on your own ``torch.nn.Module``, for ``RunRecorder``.

``ModelMeasure(client_data, loss_fn)`` measures the full objective over every client's
data. With f_i(x) the mean loss over client i's examples and f = Σ_i w_i f_i (w_i = 1/N unless
``weights`` are given; FedSUM eq. (1)), ``measure(model)`` returns, as plain floats ready for
``RunRecorder.record_round(t, S, S, **measure(model))``:

* ``grad_norm2`` = ‖∇f(x)‖² (the left side of FedSUM's, Server momentum's and LOGIT's theorems);
* ``loss`` = f(x);
* ``heterogeneity`` = Σ_i w_i ‖∇f_i(x) − ∇f(x)‖² (σ_g² of Server momentum, arXiv:2312.12670,
  Assumption A3, at w_i = 1/N);
* ``heterogeneity_max`` = max_i ‖∇f_i(x) − ∇f(x)‖² (σ₃² of LOGIT Assumption 4);

and ``client_losses(model)`` the N values f_i(x) (CA-Fed's F_k at the averaged iterate). The
gradients are exact full-data gradients: each client's batches are summed weighted by their
sizes and accumulated in float64. The model is left as it was (parameters, ``.grad`` and its
training mode; the measure runs in eval mode).

``StepWeightedAverage`` keeps w̄_T = Σ_t η_t x_t / Σ_t η_t (CA-Fed, Rodio et al., IEEE/ACM ToN
2023, doi:10.1109/TNET.2023.3324257, §III-B) with fedverify's convention (``algorithms.run``'s
``averaged_params``): x_t the model round t starts from and η_t that round's local step size,
so call ``add(model, eta_t)`` at the start of round t, before training.
"""
from __future__ import annotations

import contextlib
import math
import numbers

import numpy as np
import torch

__all__ = ["ModelMeasure", "StepWeightedAverage"]


def _parameters(model) -> list:
    if not isinstance(model, torch.nn.Module):
        raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError(f"{type(model).__name__} has no trainable parameters")
    return params


def _batches(data, i: int) -> list:
    """Client i's data as a list of (inputs, targets): one pair of tensors, or an iterable of pairs."""
    if isinstance(data, (tuple, list)) and len(data) == 2 and all(isinstance(x, torch.Tensor) for x in data):
        batches = [tuple(data)]
    else:
        try:
            batches = [tuple(b) for b in data]
        except TypeError:
            raise ValueError(f"client {i}'s data must be (inputs, targets) or an iterable of such batches, "
                             f"got {type(data).__name__}") from None
    batches = [b for b in batches if len(b[0])]
    if not batches:
        raise ValueError(f"client {i} has no examples")
    return batches


class ModelMeasure:
    """The measures of the module docstring on ``client_data`` (N per-client datasets) with
    ``loss_fn(outputs, targets)`` a batch mean (e.g. ``torch.nn.functional.cross_entropy``), for
    whichever model each call is given."""

    def __init__(self, client_data, loss_fn, *, weights=None):
        data = list(client_data)
        if not data:
            raise ValueError("client_data holds no client (N = 0)")
        self.clients = [_batches(d, i) for i, d in enumerate(data)]
        self.loss_fn = loss_fn
        n = len(self.clients)
        w = np.full(n, 1.0 / n) if weights is None else np.asarray(weights, dtype=float)
        if w.shape != (n,) or not np.isfinite(w).all() or (w < 0).any() or not w.sum() > 0:
            raise ValueError(f"weights must be {n} finite numbers ≥ 0, not all 0, got {weights!r}")
        self.weights = w

    @property
    def n_clients(self) -> int:
        return len(self.clients)

    @contextlib.contextmanager
    def _evaluating(self, model):
        training = model.training
        model.eval()
        try:
            yield
        finally:
            model.train(training)

    def _client(self, model, params, batches, grads: bool):
        total = sum(len(b[0]) for b in batches)
        loss = 0.0
        grad = [torch.zeros(p.shape, dtype=torch.float64, device=p.device) for p in params] if grads else None
        for inputs, targets in batches:
            share = len(inputs) / total
            if grads:
                value = self.loss_fn(model(inputs), targets)
                for g, part in zip(grad, torch.autograd.grad(value, params)):
                    g += share * part.to(torch.float64)
            else:
                with torch.no_grad():
                    value = self.loss_fn(model(inputs), targets)
            loss += share * float(value.detach())
        flat = torch.cat([g.reshape(-1) for g in grad]).cpu().numpy() if grads else None
        return loss, flat

    def client_losses(self, model) -> np.ndarray:
        """f_i(x), i = 1..N (float64)."""
        params = _parameters(model)
        with self._evaluating(model):
            return np.array([self._client(model, params, b, grads=False)[0] for b in self.clients])

    def losses_and_grads(self, model) -> tuple[np.ndarray, np.ndarray]:
        """(f_i(x) (N,), ∇f_i(x) (N, P)), the parameters flattened in ``model.parameters()`` order."""
        params = _parameters(model)
        with self._evaluating(model):
            out = [self._client(model, params, b, grads=True) for b in self.clients]
        return np.array([v for v, _ in out]), np.stack([g for _, g in out])

    def measure(self, model) -> dict:
        """``grad_norm2``, ``loss``, ``heterogeneity``, ``heterogeneity_max`` at the model's x."""
        losses, grads = self.losses_and_grads(model)
        w = self.weights
        mean = w @ grads
        spread = ((grads - mean) ** 2).sum(axis=1)
        return {"grad_norm2": float(mean @ mean), "loss": float(w @ losses), "heterogeneity": float(w @ spread),
                "heterogeneity_max": float(spread.max())}


def _flat(model_or_params) -> np.ndarray:
    if isinstance(model_or_params, torch.nn.Module):
        return torch.cat([p.detach().reshape(-1).to(torch.float64).cpu()
                          for p in _parameters(model_or_params)]).numpy()
    return np.asarray(model_or_params.detach().cpu() if isinstance(model_or_params, torch.Tensor) else model_or_params,
                      dtype=float).reshape(-1)


class StepWeightedAverage:
    """w̄ = Σ_t η_t x_t / Σ_t η_t over the models added (module docstring), in float64."""

    def __init__(self):
        self._weighted = None
        self._total = 0.0

    def add(self, model_or_params, eta: float) -> None:
        """Add x_t (a module's trainable parameters, or a flat vector) with weight η_t > 0."""
        if isinstance(eta, bool) or not isinstance(eta, numbers.Real) or not math.isfinite(eta) or eta <= 0:
            raise ValueError(f"eta must be a finite number > 0, got {eta!r}")
        x = _flat(model_or_params)
        if self._weighted is not None and x.shape != self._weighted.shape:
            raise ValueError(f"the model has {x.size} parameters, the average {self._weighted.size}")
        self._weighted = eta * x if self._weighted is None else self._weighted + eta * x
        self._total += float(eta)

    @property
    def params(self) -> np.ndarray:
        """w̄ as a flat float64 vector."""
        if self._weighted is None:
            raise ValueError("no model was added to the average")
        return self._weighted / self._total

    @contextlib.contextmanager
    def applied(self, model):
        """Within the block the module's trainable parameters hold w̄; they are put back after."""
        params = _parameters(model)
        w = self.params
        if w.size != sum(p.numel() for p in params):
            raise ValueError(f"the average has {w.size} parameters, the model {sum(p.numel() for p in params)}")
        saved = [p.detach().clone() for p in params]
        with torch.no_grad():
            start = 0
            for p in params:
                p.copy_(torch.as_tensor(w[start:start + p.numel()], dtype=p.dtype, device=p.device).reshape(p.shape))
                start += p.numel()
        try:
            yield model
        finally:
            with torch.no_grad():
                for p, old in zip(params, saved):
                    p.copy_(old)
