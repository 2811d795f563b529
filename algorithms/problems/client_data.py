"""Data for the classification problems: bundled and synthetic data sets, a Dirichlet
label partition across clients, and :class:`ClientData`, the clients' samples as padded
torch tensors with uniform mini-batch draws.

Nothing is downloaded: ``digits`` is scikit-learn's bundled copy of the UCI handwritten
digits (1797 images, 8×8, 10 classes) and ``synthetic_classification`` is a Gaussian
mixture drawn from a seed.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from .base import FederatedProblem
from participation.validation import finite_real, integer

__all__ = ["digits", "synthetic_classification", "dirichlet_partition", "ClientData"]


def _int(value, name: str, low: int) -> int:
    return integer(value, name, low)


def digits() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's ``load_digits``: features (1797, 64) scaled from 0..16 to [0, 1]
    (float64) and labels (1797,) in 0..9 (int64)."""
    from sklearn.datasets import load_digits

    bunch = load_digits()
    return bunch.data.astype(np.float64) / 16.0, bunch.target.astype(np.int64)


def synthetic_classification(n_samples: int, dim: int, n_classes: int, seed=0,
                             separation: float = 2.0) -> tuple[np.ndarray, np.ndarray]:
    """A Gaussian mixture: label y ~ Uniform{0..n_classes−1}, features x = μ_y + z with
    class means μ_k ~ N(0, separation²·I) and noise z ~ N(0, I), all from ``seed``.
    Returns float64 features (n_samples, dim) and int64 labels."""
    n_samples = _int(n_samples, "n_samples", 1)
    dim = _int(dim, "dim", 1)
    n_classes = _int(n_classes, "n_classes", 2)
    if not np.isfinite(separation) or separation < 0:
        raise ValueError(f"separation must be finite and >= 0, got {separation!r}")
    rng = np.random.default_rng(seed)
    means = separation * rng.standard_normal((n_classes, dim))
    labels = rng.integers(0, n_classes, size=n_samples)
    features = means[labels] + rng.standard_normal((n_samples, dim))
    return features, labels.astype(np.int64)


def dirichlet_partition(labels, n_clients: int, alpha: float, seed=0, min_size: int = 1) -> list[np.ndarray]:
    """Split sample indices across clients with Dirichlet(α) label proportions.

    For each class k, proportions q_k ~ Dirichlet(α·1_N) over the N clients and the
    class's (shuffled) samples are dealt out in Multinomial(n_k, q_k) counts (Hsu, Qi and
    Brown 2019, "Measuring the effects of non-identical data distribution for federated
    visual classification", arXiv:1909.06335). Small α gives skewed label mixes, large α
    near-iid ones. Clients left with fewer than ``min_size`` samples then take random
    samples from the currently largest client, so every sample is assigned exactly once
    and every client holds ≥ min_size. Same seed ⇒ same partition.

    Returns a list of N sorted int64 index arrays.
    """
    labels = np.asarray(labels)
    if labels.ndim != 1 or labels.size == 0 or not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(f"labels must be a non-empty 1-D integer array, got shape {labels.shape} dtype {labels.dtype}")
    n_clients = _int(n_clients, "n_clients", 1)
    min_size = _int(min_size, "min_size", 0)
    finite_real(alpha, "alpha", above=0)
    if n_clients * min_size > labels.size:
        raise ValueError(f"min_size={min_size} is infeasible: {n_clients} clients × {min_size} > {labels.size} samples")
    rng = np.random.default_rng(seed)
    owner = np.empty(labels.size, dtype=np.int64)
    for k in np.unique(labels):
        members = rng.permutation(np.flatnonzero(labels == k))
        counts = rng.multinomial(members.size, rng.dirichlet(np.full(n_clients, float(alpha))))
        owner[members] = np.repeat(np.arange(n_clients), counts)
    sizes = np.bincount(owner, minlength=n_clients)
    for client in np.flatnonzero(sizes < min_size):
        need = min_size - sizes[client]
        while need > 0:
            donor = int(np.argmax(sizes))
            take = min(need, sizes[donor] - min_size)
            moved = rng.choice(np.flatnonzero(owner == donor), size=take, replace=False)
            owner[moved] = client
            sizes[donor] -= take
            sizes[client] += take
            need -= take
    order = np.argsort(owner, kind="stable")
    return [np.sort(part) for part in np.split(order, np.cumsum(sizes)[:-1])]


class ClientData:
    """N clients' samples as padded tensors.

    ``X`` (N, n_max, d) features, ``y`` (N, n_max) labels, ``weights`` (N, n_max) equal to
    1/n_i on client i's real rows and 0 on padding, ``counts`` (N,). Flat float64 numpy
    copies (``features``, ``labels``, ``owner``) serve the solvers. Mini-batches are drawn
    uniformly **with replacement** from each client's own samples.
    """

    def __init__(self, features_per_client: Sequence, labels_per_client: Sequence,
                 n_classes: int | None = None, dtype=torch.float64, device=None):
        feats, labs = self._validate(features_per_client, labels_per_client)
        self.n_clients = len(feats)
        self.n_features = feats[0].shape[1]
        top = int(max(lab.max() for lab in labs)) + 1
        if n_classes is None:
            n_classes = max(top, 2)
        n_classes = _int(n_classes, "n_classes", 2)
        if top > n_classes:
            raise ValueError(f"labels must lie in 0..n_classes-1 = 0..{n_classes - 1}, got label {top - 1}")
        self.n_classes = n_classes
        self.features = np.concatenate(feats)
        self.labels = np.concatenate(labs)
        self.owner = np.repeat(np.arange(self.n_clients), [len(lab) for lab in labs])
        self.sizes = np.array([len(lab) for lab in labs], dtype=np.int64)
        self.dtype = dtype
        self.device = torch.device(device) if device is not None else torch.device("cpu")
        self._build()

    @staticmethod
    def _validate(features_per_client, labels_per_client):
        if isinstance(features_per_client, np.ndarray) or len(features_per_client) == 0:
            raise ValueError("features_per_client must be a non-empty list of 2-D arrays, one per client")
        if len(labels_per_client) != len(features_per_client):
            raise ValueError(f"labels_per_client has {len(labels_per_client)} entries, features_per_client {len(features_per_client)}")
        feats, labs = [], []
        for i, (x, y) in enumerate(zip(features_per_client, labels_per_client)):
            x = np.asarray(x.cpu() if isinstance(x, torch.Tensor) else x, dtype=np.float64)
            y = np.asarray(y.cpu() if isinstance(y, torch.Tensor) else y)
            if x.ndim != 2 or x.shape[0] == 0:
                raise ValueError(f"features_per_client[{i}] must be a non-empty 2-D array, got shape {x.shape}")
            if not np.isfinite(x).all():
                raise ValueError(f"features_per_client[{i}] has non-finite entries")
            if x.shape[1] != np.shape(feats[0] if feats else x)[1]:
                raise ValueError(f"features_per_client[{i}] has {x.shape[1]} columns, client 0 has {feats[0].shape[1]}")
            if y.shape != (x.shape[0],) or not np.issubdtype(y.dtype, np.integer):
                raise ValueError(f"labels_per_client[{i}] must be a 1-D integer array of length {x.shape[0]}, got shape {y.shape} dtype {y.dtype}")
            if y.min() < 0:
                raise ValueError(f"labels_per_client[{i}] has negative label {y.min()}")
            feats.append(x)
            labs.append(y.astype(np.int64))
        return feats, labs

    def _build(self) -> None:
        n, n_max = self.n_clients, int(self.sizes.max())
        X = np.zeros((n, n_max, self.n_features))
        y = np.zeros((n, n_max), dtype=np.int64)
        w = np.zeros((n, n_max))
        for i, start in enumerate(np.concatenate([[0], np.cumsum(self.sizes)[:-1]])):
            size = self.sizes[i]
            X[i, :size] = self.features[start:start + size]
            y[i, :size] = self.labels[start:start + size]
            w[i, :size] = 1.0 / size
        kw = dict(dtype=self.dtype, device=self.device)
        self.X = torch.as_tensor(X, **kw)
        self.y = torch.as_tensor(y, device=self.device)
        self.weights = torch.as_tensor(w, **kw)
        self.counts = torch.as_tensor(self.sizes, device=self.device)
        self._counts64 = torch.as_tensor(self.sizes, dtype=torch.float64, device=self.device)

    def to(self, device=None, dtype=None) -> "ClientData":
        """A copy with tensors on ``device`` in ``dtype`` (None keeps the current one)."""
        new = object.__new__(ClientData)
        new.__dict__.update(self.__dict__)
        new.dtype = dtype if dtype is not None else self.dtype
        new.device = torch.device(device) if device is not None else self.device
        new._build()
        return new

    def check_clients(self, clients, m: int | None = None) -> torch.Tensor:
        """``clients`` as a 1-D int64 tensor on this device (length m when given)."""
        clients = torch.as_tensor(clients, device=self.device)
        if clients.ndim != 1 or clients.dtype.is_floating_point or clients.dtype == torch.bool:
            raise ValueError(f"clients must be a 1-D integer tensor, got shape {tuple(clients.shape)} dtype {clients.dtype}")
        if m is not None and clients.shape[0] != m:
            raise ValueError(f"clients has {clients.shape[0]} entries but X has {m} rows")
        # Range check only where it costs no device synchronisation.
        if clients.device.type == "cpu" and clients.numel() and (clients.min() < 0 or clients.max() >= self.n_clients):
            raise ValueError(f"clients must lie in 0..{self.n_clients - 1}, got {clients.tolist()}")
        return clients.long()

    def batch_positions(self, clients: torch.Tensor, draws, batch_size: int) -> torch.Tensor:
        """(m, B) positions, uniform with replacement in 0..n_i−1 for client i = ``clients[j]``:
        ⌊u·n_i⌋ (at most n_i − 1) with u the B float64 uniforms in [0, 1) of ``draws`` (an
        ``algorithms.noise.Draws`` for the rows of ``clients``) for row j, so a client's
        mini-batch depends on (seed, round, step, client) alone: not on the other rows or
        on the dtype."""
        if not callable(getattr(draws, "uniform", None)):
            raise ValueError(f"draws must be an algorithms.noise.Draws, got {type(draws).__name__}")
        u = draws.uniform(batch_size, torch.float64)
        if u.shape[0] != clients.shape[0]:
            raise ValueError(f"draws has {u.shape[0]} rows but clients has {clients.shape[0]}")
        counts = self._counts64[clients][:, None]
        return torch.minimum((u * counts).long(), counts.long() - 1)

    def minibatch(self, clients: torch.Tensor, draws, batch_size: int):
        """Features (m, B, d) and labels (m, B) of one fresh mini-batch per row of ``clients``,
        at the positions ``batch_positions(clients, draws, batch_size)``."""
        pos = self.batch_positions(clients, draws, batch_size)
        rows = clients[:, None]
        return self.X[rows, pos], self.y[rows, pos]


class ClientDataProblem(FederatedProblem):
    """A problem whose tensors live in ``self.data`` (a :class:`ClientData`)."""

    data: ClientData

    @property
    def dtype(self) -> torch.dtype:
        return self.data.dtype

    @property
    def device(self) -> torch.device:
        return self.data.device

    def to(self, device=None, dtype=None):
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new.data = self.data.to(device, dtype)  # constants cache is shared: it holds floats only
        return new
