"""What the theorems read of a run, measured on your own ``torch.nn.Module``, for ``RunRecorder``.

``ModelMeasure(client_data, loss_fn)`` measures the full objective over every client's data.
Client i holds n_i examples (a_j, y_j), j ∈ D_i, and ``loss_fn(outputs, targets)`` returns the
per-example mean of a batch (``reduction="mean"``, e.g. ``torch.nn.functional.cross_entropy``;
a term that does not depend on the batch, such as (reg/2)‖x‖² read from the model, may be
added). Then

    f_i(x) = (1/n_i) Σ_{j∈D_i} ℓ(x; a_j, y_j),        f(x) = Σ_i w_i f_i(x),

the per-example mean over the client's data (each batch weighted by its size) and, with
w_i = 1/N unless ``weights`` are given, FedSUM's objective (arXiv:2512.18275, eq. (1)).
``measure(model)`` returns, as plain floats ready for ``RunRecorder.record_round(t, S, S,
**measure(model))``:

* ``grad_norm2`` = ‖∇f(x)‖² (the left side of FedSUM's, Server momentum's and LOGIT's theorems);
* ``loss`` = f(x);
* ``heterogeneity`` = Σ_i w_i ‖∇f_i(x) − ∇f(x)‖² (σ_g² of Server momentum, arXiv:2312.12670,
  Assumption A3: (1/N) Σ_i at w_i = 1/N);
* ``heterogeneity_max`` = max_i ‖∇f_i(x) − ∇f(x)‖² (σ₃² of LOGIT, ICLR 2026 submission,
  OpenReview km8rXu0RnF, Assumption 4);

and ``client_losses(model)`` the N values f_i(x) (CA-Fed's F_k, read at the averaged iterate).
The gradients are exact full-data gradients: every batch of a client, each weighted by its
size, accumulated in float64. The model is left unchanged (parameters, ``.grad``, every
submodule's training mode; the measure runs in eval mode, so dropout is off and batch norm
uses its running statistics).

``StepWeightedAverage`` keeps w̄_T = Σ_t η_t x_t / Σ_t η_t (CA-Fed, Rodio et al., IEEE/ACM ToN
2023, doi:10.1109/TNET.2023.3324257, §III-B) with the convention of fedverify's engine
(``algorithms.run``'s ``averaged_params``): x_t is the global model round t starts from and η_t
that round's local step size, t = 0, …, T − 1. So call ``add(model, eta_t)`` at the start of
round t, ahead of the clients' local steps.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping, Sized

import numpy as np
import torch
from participation.validation import finite_real

__all__ = ["ModelMeasure", "StepWeightedAverage"]

#: Tolerance on Σ_i w_i = 1.
_WEIGHT_SUM_TOL = 1e-9


def _parameters(model) -> list:
    """The model's trainable parameters, in ``model.parameters()`` order."""
    if not isinstance(model, torch.nn.Module):
        raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError(f"{type(model).__name__} has no trainable parameters")
    return params


def _is_pair(data) -> bool:
    return isinstance(data, (tuple, list)) and len(data) == 2 and all(isinstance(x, torch.Tensor) for x in data)


def _source(data, i: int):
    """Client i's data as a re-iterable of batches: one (inputs, targets) pair, a list of pairs, a
    ``DataLoader`` (iterated afresh at every measure); a one-pass iterator is read once here.
    Data held in memory are checked here, a loader's batches as they are read."""
    if _is_pair(data):
        data = [tuple(data)]
    elif isinstance(data, torch.utils.data.Dataset) and not isinstance(data, torch.utils.data.IterableDataset):
        raise ValueError(f"client {i}'s data is a {type(data).__name__} of single examples: "
                         f"pass a DataLoader over it (batches of (inputs, targets))")
    elif isinstance(data, (torch.Tensor, str, bytes, Mapping)) or not isinstance(data, Iterable):
        raise ValueError(f"client {i}'s data must be (inputs, targets) or an iterable of such batches, "
                         f"got {type(data).__name__}")
    elif iter(data) is data:
        data = list(data)
    if isinstance(data, (list, tuple)):
        if not sum(_split(batch, i)[2] for batch in data):
            raise ValueError(f"client {i} has no examples")
    elif isinstance(data, Sized) and len(data) == 0:
        raise ValueError(f"client {i} has no examples")
    return data


def _to(x, device):
    """Tensors (also inside dicts, lists, tuples) moved to ``device``; anything else as it is."""
    if isinstance(x, torch.Tensor):
        return x.to(device)
    if isinstance(x, Mapping):
        return {k: _to(v, device) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(_to(v, device) for v in x)
    return x


def _split(batch, i: int):
    """(inputs, targets, n) of one batch of client i; n = the number of targets."""
    if not isinstance(batch, (tuple, list)) or len(batch) != 2:
        raise ValueError(f"client {i}'s batches must be (inputs, targets) pairs, got {type(batch).__name__}"
                         + (f" of length {len(batch)}" if isinstance(batch, Sized) else ""))
    inputs, targets = batch
    if not isinstance(targets, torch.Tensor) or targets.ndim == 0:
        shape = " of shape ()" if isinstance(targets, torch.Tensor) else ""
        raise ValueError(f"client {i}'s targets must be a tensor with a batch dimension, "
                         f"got {type(targets).__name__}{shape}")
    n = targets.shape[0]
    if isinstance(inputs, torch.Tensor) and (inputs.ndim == 0 or inputs.shape[0] != n):
        raise ValueError(f"client {i} has a batch of {n} targets and inputs of shape {tuple(inputs.shape)}")
    return inputs, targets, n


def _batches(source, i: int, device):
    """Client i's non-empty batches (inputs, targets, n), moved to ``device``."""
    for batch in source:
        inputs, targets, n = _split(batch, i)
        if n:
            yield _to(inputs, device), _to(targets, device), n


def _scalar(value, i: int) -> torch.Tensor:
    if not isinstance(value, torch.Tensor) or value.numel() != 1:
        raise ValueError(f"loss_fn must return the batch mean as a one-element tensor, got "
                         f"{tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__} "
                         f"on client {i}")
    return value.reshape(())


@contextlib.contextmanager
def _evaluating(model):
    """Eval mode within the block; every submodule's own training flag put back after."""
    modes = [(m, m.training) for m in model.modules()]
    model.eval()
    try:
        yield
    finally:
        for m, training in modes:
            m.training = training


def _check_weights(weights, n: int) -> np.ndarray:
    if weights is None:
        return np.full(n, 1.0 / n)
    try:
        w = np.asarray(weights, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"weights must be {n} numbers, got {weights!r}") from None
    if w.shape != (n,) or not np.isfinite(w).all() or (w < 0).any() or abs(w.sum() - 1) > _WEIGHT_SUM_TOL:
        raise ValueError(f"weights must be {n} finite numbers ≥ 0 summing to 1, got {weights!r}")
    return w


class ModelMeasure:
    """The measures of the module docstring on ``client_data`` (a sequence of N per-client
    datasets: each one (inputs, targets) pair of tensors, a list of such batches or a
    ``DataLoader``; each example once per pass, so no ``drop_last`` and no random augmentation)
    with ``loss_fn(outputs, targets)`` a batch mean, for whichever model each call is given.
    ``weights``: w_i ≥ 0 with Σ_i w_i = 1 (default 1/N)."""

    def __init__(self, client_data, loss_fn, *, weights=None):
        if isinstance(client_data, (torch.Tensor, str, bytes, Mapping)) or not isinstance(client_data, Iterable) \
                or _is_pair(client_data):
            raise ValueError(f"client_data must be a sequence of N per-client datasets, "
                             f"got {type(client_data).__name__}")
        data = list(client_data)
        if not data:
            raise ValueError("client_data holds no client (N = 0)")
        if not callable(loss_fn):
            raise ValueError(f"loss_fn must be callable, got {type(loss_fn).__name__}")
        self.clients = [_source(d, i) for i, d in enumerate(data)]
        self.loss_fn = loss_fn
        self.weights = _check_weights(weights, len(self.clients))

    @property
    def n_clients(self) -> int:
        return len(self.clients)

    def _client_loss(self, model, i: int, device) -> float:
        """f_i(x) = Σ_b n_b ℓ̄_b / Σ_b n_b, ℓ̄_b the mean loss of batch b."""
        total, count = 0.0, 0
        for inputs, targets, n in _batches(self.clients[i], i, device):
            total += n * float(_scalar(self.loss_fn(model(inputs), targets), i))
            count += n
        if not count:
            raise ValueError(f"client {i} has no examples")
        return total / count

    def _client_loss_and_grad(self, model, params, i: int) -> tuple[float, torch.Tensor]:
        """(f_i(x), ∇f_i(x) flattened, float64): each batch's gradient weighted by its size."""
        device = params[0].device
        grad = torch.zeros(sum(p.numel() for p in params), dtype=torch.float64, device=device)
        total, count = 0.0, 0
        for inputs, targets, n in _batches(self.clients[i], i, device):
            value = _scalar(self.loss_fn(model(inputs), targets), i)
            parts = torch.autograd.grad(value, params, allow_unused=True)
            grad += n * torch.cat([(torch.zeros_like(p) if g is None else g).reshape(-1).to(torch.float64)
                                   for p, g in zip(params, parts)])
            total += n * float(value.detach())
            count += n
        if not count:
            raise ValueError(f"client {i} has no examples")
        return total / count, grad / count

    def client_losses(self, model) -> np.ndarray:
        """f_i(x), i = 1..N (float64), without gradients."""
        device = _parameters(model)[0].device
        with _evaluating(model), torch.no_grad():
            return np.array([self._client_loss(model, i, device) for i in range(self.n_clients)])

    def losses_and_grads(self, model) -> tuple[np.ndarray, np.ndarray]:
        """(f_i(x) (N,), ∇f_i(x) (N, P)) in float64, the trainable parameters flattened in
        ``model.parameters()`` order."""
        params = _parameters(model)
        with _evaluating(model), torch.enable_grad():
            out = [self._client_loss_and_grad(model, params, i) for i in range(self.n_clients)]
        return np.array([v for v, _ in out]), torch.stack([g for _, g in out]).cpu().numpy()

    def measure(self, model) -> dict:
        """``grad_norm2``, ``loss``, ``heterogeneity``, ``heterogeneity_max`` at the model's x."""
        losses, grads = self.losses_and_grads(model)
        w = self.weights
        mean = w @ grads                                  # ∇f = Σ_i w_i ∇f_i
        spread = ((grads - mean) ** 2).sum(axis=1)        # ‖∇f_i − ∇f‖², i = 1..N
        return {"grad_norm2": float(mean @ mean), "loss": float(w @ losses), "heterogeneity": float(w @ spread),
                "heterogeneity_max": float(spread.max())}


def _flat(model_or_params) -> np.ndarray:
    """A module's trainable parameters, a tensor or array, or a list of them (e.g. Flower's
    parameter arrays), as one flat float64 vector."""
    if isinstance(model_or_params, torch.nn.Module):
        return torch.cat([p.detach().reshape(-1).to(torch.float64).cpu() for p in _parameters(model_or_params)]).numpy()
    if isinstance(model_or_params, (list, tuple)):
        parts = [_flat(p) for p in model_or_params]
        x = np.concatenate(parts) if parts else np.zeros(0)
    elif isinstance(model_or_params, torch.Tensor):
        x = model_or_params.detach().to(torch.float64).cpu().numpy().reshape(-1)
    else:
        try:
            x = np.asarray(model_or_params, dtype=float).reshape(-1)
        except (TypeError, ValueError):
            raise ValueError(f"expected a torch.nn.Module or parameter values, got "
                             f"{type(model_or_params).__name__}") from None
    if not x.size:
        raise ValueError("the parameters are empty (0 values)")
    return x


class StepWeightedAverage:
    """w̄ = Σ_t η_t x_t / Σ_t η_t over the models added, in float64: x_t the model round t starts
    from, η_t > 0 its local step size (module docstring; CA-Fed §III-B)."""

    def __init__(self):
        self._weighted = None
        self._total = 0.0

    def add(self, model_or_params, eta: float) -> None:
        """Add x_t (a module's trainable parameters, or their values) with weight η_t > 0."""
        finite_real(eta, "eta", above=0)
        x = _flat(model_or_params)
        if self._weighted is not None and x.shape != self._weighted.shape:
            raise ValueError(f"the model has {x.size} parameters, the average {self._weighted.size}")
        self._weighted = eta * x if self._weighted is None else self._weighted + eta * x
        self._total += float(eta)

    @property
    def total_eta(self) -> float:
        """Σ_t η_t."""
        return self._total

    @property
    def params(self) -> np.ndarray:
        """w̄ as a flat float64 vector (trainable parameters in ``model.parameters()`` order)."""
        if self._weighted is None:
            raise ValueError("no model added to the average yet")
        return self._weighted / self._total

    def apply_to(self, model) -> torch.nn.Module:
        """Load w̄ into the module's trainable parameters (cast to their dtype); returns the module."""
        params = _parameters(model)
        w = self.params
        size = sum(p.numel() for p in params)
        if w.size != size:
            raise ValueError(f"the average has {w.size} parameters, the model {size}")
        with torch.no_grad():
            for p, part in zip(params, np.split(w, np.cumsum([p.numel() for p in params])[:-1])):
                p.copy_(torch.as_tensor(part, device=p.device).reshape(p.shape))
        return model

    @contextlib.contextmanager
    def applied(self, model):
        """Within the block the module's trainable parameters hold w̄; they are put back after."""
        params = _parameters(model)
        saved = [p.detach().clone() for p in params]
        self.apply_to(model)
        try:
            yield model
        finally:
            with torch.no_grad():
                for p, old in zip(params, saved):
                    p.copy_(old)
