"""A neural-network classifier split across clients: the non-convex test problem.

The network is an MLP, logits(a) = W₂·act(W₁a + b₁) + b₂ (act = tanh or ReLU), or one of
the CNNs of FedSUM Table 2 (App. H; ``models``). Its
parameters are one flat vector x in ``named_parameters`` order (``torch.nn`` layouts).
Following FedSUM eq. (1),

    f_i(x) = (1/n_i) Σ_{j∈D_i} CE(logits(a_j), y_j) + (reg/2)‖x‖²,    f = (1/N) Σ_i f_i.

Many client models are evaluated at once with ``torch.func.functional_call`` under
``torch.func.vmap`` (clients on the vmapped axis; samples, where many, in chunks of
``chunk_size`` padded positions per client); the local steps' mini-batch gradients run the
copies as one grouped network instead (``grouped``: the same numbers; ``fedverify bench`` times both),
and f and ∇f at one point are one weighted pass over the real samples (no padding).
Stochastic gradients use mini-batches of
``batch_size`` samples drawn uniformly **with replacement** from the client's data, at
positions from the uniforms of the run's noise at (round, step, client)
(``ClientData.minibatch``). The network runs in eval mode: Table 2's dropout
(MNIST net) is the identity, so f_i is a deterministic function of x and the mini-batch is
the only noise, as Assumption 1.2 has it; the table has no batch norm,
so no state is shared across clients. Since f is non-convex, the constants are estimates
(see ``constants``), except F_0.
"""
from __future__ import annotations

import math

import numpy as np
import torch
from torch.func import functional_call, grad, vmap

from . import grouped, models
from .base import ProblemConstants
from .client_data import ClientData, ClientDataProblem, digits, dirichlet_partition, synthetic_classification
from .logistic import _check_batch, _check_nonneg
from participation.validation import integer

__all__ = ["Classifier"]

MODELS = ("mlp", "cnn")
_EVAL_ROWS = 1024            # samples per forward pass in ``accuracy``
_GRAD_FLOATS = 2**27         # per-sample gradient floats held at once in ``gradient_variance``
_GROUPED_PASS = 16           # on a CPU, mini-batches above twice this run through the grouped network in passes of it
#: Padded sample positions (clients × positions per client) one vmapped pass of a full-data
#: evaluation holds at most when ``chunk_size`` is set (the CNNs). A pass is one autograd call,
#: which a Ctrl-C cannot stop; Python sees the interrupt between passes, so they are kept short.
_PASS_POSITIONS = 512
#: ``constants()`` effort by model: (power iterations, L-BFGS iterations for f*, samples per client for L, σ²).
_EFFORT = {"mlp": (50, 300, None), "cnn": (10, 0, 64)}


def _count(value, name: str, low: int = 1) -> int:
    return integer(value, name, low)


def _as_array(x) -> np.ndarray:
    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


def _flatten_clients(features_per_client):
    """Images (n_i, C, H, W) as rows (n_i, C·H·W), C-order; 2-D arrays pass unchanged."""
    if not isinstance(features_per_client, (list, tuple)):
        return features_per_client, None
    arrays = [_as_array(x) for x in features_per_client]
    shape = arrays[0].shape[1:] if arrays and arrays[0].ndim == 4 else None
    return [x.reshape(x.shape[0], -1) if x.ndim > 2 else x for x in arrays], shape


def _infer_dataset(image_shape) -> str:
    """The data set whose images have ``image_shape``, when that is unambiguous."""
    matches = [name for name, shape in models.IMAGE_SHAPES.items() if shape == tuple(image_shape)]
    if len(matches) != 1:
        raise ValueError(f"dataset must be given for model='cnn' with image_shape {tuple(image_shape)} "
                         f"(one of {list(models.DATASETS)})")
    return matches[0]


class Classifier(ClientDataProblem):
    """A ``model`` ("mlp" or "cnn") network on N clients' data.

    MLP: ``hidden`` units, ``activation`` "tanh" or "relu". CNN: the network of ``dataset``
    ("mnist", "svhn", "cifar10": Table 2; "digits": ``models.digits_cnn``) on images of
    ``image_shape`` (C, H, W); features are given as (n_i, C, H, W) images or their C-order
    rows. ``test_features``/``test_labels``: a held-out split on which ``accuracy`` is
    measured (else on the training data). ``chunk_size``: padded sample positions per client
    per vmapped call in full-data evaluations (default: all for the MLP, 256 for CNNs).

    ``x0`` is a seeded PyTorch-style initialisation (every weight and bias
    ~ U(−1/√fan_in, 1/√fan_in), the default bound of ``nn.Linear`` and ``nn.Conv2d``, drawn
    with numpy from ``init_seed``): the zero vector is a stationary set of these networks
    (hidden units stay identical), so it is no starting point.
    """

    loss_lower_bound = 0.0      # cross-entropy ≥ 0 and reg ≥ 0

    def __init__(self, features_per_client, labels_per_client, hidden: int = 32, activation: str = "tanh",
                 reg: float = 0.0, batch_size: int = 16, n_classes: int | None = None, init_seed=0,
                 dtype=torch.float64, device=None, *, model: str = "mlp", image_shape=None, dataset: str | None = None,
                 test_features=None, test_labels=None, chunk_size: int | None = None):
        self.hidden, self.activation = _count(hidden, "hidden"), activation
        if activation not in ("tanh", "relu"):
            raise ValueError(f"activation must be one of ['relu', 'tanh'], got {activation!r}")
        if model not in MODELS:
            raise ValueError(f"model must be one of {list(MODELS)}, got {model!r}")
        self.model = model
        self.reg = _check_nonneg(reg, "reg")
        self.batch_size = _check_batch(batch_size)
        features_per_client, shape = _flatten_clients(features_per_client)
        self.data = ClientData(features_per_client, labels_per_client, n_classes, dtype, device)
        self.n_clients, self.n_classes = self.data.n_clients, self.data.n_classes
        self.image_shape, self.dataset = self._network_input(shape if image_shape is None else image_shape, dataset)
        default_chunk = None if model == "mlp" else 256
        self.chunk_size = default_chunk if chunk_size is None else _count(chunk_size, "chunk_size")
        with torch.device("meta"):
            self._module = self._build_network().eval()
        self._names = [name for name, _ in self._module.named_parameters()]
        self._shapes = [tuple(t.shape) for _, t in self._module.named_parameters()]
        self._sizes = [math.prod(s) for s in self._shapes]
        self.dim = sum(self._sizes)
        self._grouped = grouped.supports(self._module)
        self._x0 = self._initial_point(init_seed)
        self._test = self._held_out(test_features, test_labels)
        self._cache: dict = {}

    # -- construction helpers ------------------------------------------------------------
    def _network_input(self, image_shape, dataset):
        """(image_shape, dataset) for a CNN, checked against the feature count; (None, None) for the MLP."""
        if self.model == "mlp":
            return None, None
        if image_shape is None:
            if dataset not in models.IMAGE_SHAPES:
                raise ValueError("image_shape (C, H, W) must be given for model='cnn'")
            image_shape = models.IMAGE_SHAPES[dataset]
        image_shape = tuple(_count(s, "image_shape") for s in image_shape)
        if len(image_shape) != 3 or math.prod(image_shape) != self.data.n_features:
            raise ValueError(f"image_shape must be (C, H, W) with C·H·W = {self.data.n_features} features, "
                             f"got {image_shape}")
        dataset = _infer_dataset(image_shape) if dataset is None else dataset
        if dataset not in models.DATASETS:
            raise ValueError(f"dataset must be one of {list(models.DATASETS)}, got {dataset!r}")
        return image_shape, dataset

    def _build_network(self):
        if self.model == "mlp":
            return models.mlp(self.data.n_features, self.hidden, self.n_classes, self.activation)
        return models.cnn(self.dataset, self.image_shape, self.n_classes)

    def _initial_point(self, seed) -> np.ndarray:
        """U(−1/√fan_in, 1/√fan_in) per entry; a bias takes the fan-in of its layer's weight."""
        rng = np.random.default_rng(seed)
        parts, fan_in = [], 1
        for name, shape, size in zip(self._names, self._shapes, self._sizes):
            if name.endswith("weight"):
                fan_in = math.prod(shape[1:])
            parts.append(rng.uniform(-1, 1, size) / math.sqrt(fan_in))
        return np.concatenate(parts)

    def _held_out(self, features, labels):
        """The test split as (features (n, d), labels (n,)) tensors, or None."""
        if features is None and labels is None:
            return None
        if features is None or labels is None:
            raise ValueError("test_features and test_labels must be given together")
        A = _as_array(features).astype(np.float64)
        A = A.reshape(A.shape[0], -1) if A.ndim > 2 else A
        y = _as_array(labels)
        if A.ndim != 2 or A.shape[0] == 0 or A.shape[1] != self.data.n_features or not np.isfinite(A).all():
            raise ValueError(f"test_features must be finite with {self.data.n_features} features per sample, "
                             f"got shape {A.shape}")
        if y.shape != (A.shape[0],) or not np.issubdtype(y.dtype, np.integer) or y.min() < 0 or y.max() >= self.n_classes:
            raise ValueError(f"test_labels must be {A.shape[0]} integers in 0..{self.n_classes - 1}")
        return (torch.as_tensor(A, dtype=self.dtype, device=self.device),
                torch.as_tensor(y.astype(np.int64), device=self.device))

    # -- constructors ----------------------------------------------------------------------
    @classmethod
    def from_arrays(cls, X, y, n_clients: int, alpha: float, model: str = "cnn", dataset: str | None = None,
                    test=None, seed=0, batch_size: int = 128, min_size: int = 1, hidden: int = 32,
                    activation: str = "tanh", reg: float = 0.0, n_classes: int | None = None,
                    dtype=torch.float64, device=None, chunk_size: int | None = None) -> "Classifier":
        """A classifier on images X (n, C, H, W) (or rows (n, d) for the MLP) with labels y,
        Dirichlet(α)-split over ``n_clients`` (``dirichlet_partition``; FedSUM uses α = 0.1,
        §5). ``test``: a held-out (X_test, y_test) for ``accuracy``. ``seed``
        drives the split and the initialisation. ``batch_size`` 128 is Table 2's."""
        X, y = _as_array(X), _as_array(y)
        if X.ndim not in (2, 4) or X.shape[0] != y.shape[0]:
            raise ValueError(f"X must be (n, C, H, W) images or (n, d) rows matching y, got {X.shape} and {y.shape}")
        image_shape = X.shape[1:] if X.ndim == 4 else None
        if model == "mlp":
            X = X.reshape(X.shape[0], -1)
        test_X, test_y = (None, None) if test is None else test
        if n_classes is None:
            labels = [y] if test_y is None else [y, _as_array(test_y)]
            n_classes = max(2, int(max(lab.max() for lab in labels)) + 1)
        parts = dirichlet_partition(y, n_clients, alpha, seed, min_size)
        return cls([X[q] for q in parts], [y[q] for q in parts], hidden, activation, reg, batch_size, n_classes,
                   seed, dtype, device, model=model, image_shape=image_shape, dataset=dataset,
                   test_features=test_X, test_labels=test_y, chunk_size=chunk_size)

    @classmethod
    def digits(cls, n_clients: int = 10, alpha: float = 0.5, hidden: int = 32, batch_size: int = 16, seed=0,
               activation: str = "tanh", reg: float = 0.0, min_size: int = 10,
               dtype=torch.float64, device=None, *, model: str = "mlp", test_fraction: float = 0.0,
               chunk_size: int | None = None) -> "Classifier":
        """An MLP or the digits CNN on scikit-learn's digits (8×8), Dirichlet(α)-split; ``seed``
        drives split and init. ``test_fraction`` > 0 holds out a stratified, seeded share as
        the test split of ``accuracy``."""
        X, y = digits()
        test = None
        if test_fraction:
            from sklearn.model_selection import train_test_split

            X, Xt, y, yt = train_test_split(X, y, test_size=test_fraction, stratify=y, random_state=seed)
            test = (Xt.reshape(-1, 1, 8, 8), yt)
        return cls.from_arrays(X.reshape(-1, 1, 8, 8), y, n_clients, alpha, model=model, dataset="digits",
                               test=test, seed=seed, batch_size=batch_size, min_size=min_size, hidden=hidden,
                               activation=activation, reg=reg, n_classes=10, dtype=dtype, device=device,
                               chunk_size=chunk_size)

    @classmethod
    def synthetic(cls, n_clients: int = 10, alpha: float = 0.5, n_samples: int = 1000, dim: int = 10,
                  n_classes: int = 3, hidden: int = 16, batch_size: int = 16, seed=0, activation: str = "tanh",
                  reg: float = 0.0, min_size: int = 1, dtype=torch.float64, device=None) -> "Classifier":
        """An MLP on a Gaussian mixture (``synthetic_classification``), Dirichlet(α)-split."""
        X, y = synthetic_classification(n_samples, dim, n_classes, seed)
        parts = dirichlet_partition(y, n_clients, alpha, seed, min_size)
        return cls([X[q] for q in parts], [y[q] for q in parts], hidden, activation, reg, batch_size, n_classes,
                   seed, dtype, device)

    # -- tensors ----------------------------------------------------------------------
    @property
    def x0(self) -> torch.Tensor:
        """The seeded initial point x^(0) at which Δ_f and F_0 are evaluated."""
        return torch.as_tensor(self._x0, dtype=self.dtype, device=self.device)

    @property
    def network(self) -> torch.nn.Module:
        """The network (on the meta device: a layout only; parameters come from x)."""
        return self._module

    def unflatten(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """The flat vector as ``{name: tensor}`` views for ``functional_call``."""
        return {n: t.view(s) for n, t, s in zip(self._names, torch.split(x, self._sizes), self._shapes)}

    def to(self, device=None, dtype=None) -> "Classifier":
        new = super().to(device, dtype)
        if self._test is not None:
            A, y = self._test
            new._test = (A.to(device=new.device, dtype=new.dtype), y.to(new.device))
        return new

    def _check_x(self, x) -> torch.Tensor:
        if not isinstance(x, torch.Tensor) or x.shape != (self.dim,):
            raise ValueError(f"x must be a tensor of shape ({self.dim},), got {getattr(x, 'shape', type(x).__name__)}")
        return x

    def _check_X(self, X, clients) -> torch.Tensor:
        if not isinstance(X, torch.Tensor) or X.ndim != 2 or X.shape[1] != self.dim:
            raise ValueError(f"X must be a tensor of shape (m, {self.dim}), got {getattr(X, 'shape', type(X).__name__)}")
        return self.data.check_clients(clients, X.shape[0])

    # -- one model on one client's (weighted) samples; vmapped below --------------------
    def _logits(self, x: torch.Tensor, A: torch.Tensor) -> torch.Tensor:
        """Logits of rows A (n, d); a CNN sees them as images (n, C, H, W)."""
        if self.image_shape is not None:
            A = A.unflatten(-1, self.image_shape)
        return functional_call(self._module, self.unflatten(x), (A,))

    def _sample_losses(self, x, A, y):
        Z = self._logits(x, A)
        return torch.logsumexp(Z, -1) - Z.gather(-1, y[..., None])[..., 0]

    def _data_loss(self, x, A, y, w):
        """Σ_j w_j CE_j(x): the data part of f_i with w = 1/n_i on real rows, 0 on padding."""
        return (w * self._sample_losses(x, A, y)).sum()

    def _over_samples(self, fn, args, arg_dims, data: ClientData | None = None, rows=None):
        """Σ over chunks of ``chunk_size`` padded positions of vmap(fn)(*args, A, y, w), clients
        (``rows`` of ``data``, default all) on the vmapped axis. Exact for any fn linear in w
        (losses, their gradients and Hessian-vector products). With ``chunk_size`` set, a pass
        takes as many clients as fit in ``_PASS_POSITIONS`` positions (one at least): the
        clients' rows (and the rows of the arguments mapped on axis 0) go in further passes."""
        d = self.data if data is None else data
        n = d.X.shape[1]
        step = self.chunk_size or n
        batched = vmap(fn, in_dims=(*arg_dims, 0, 0, 0))
        count = d.X.shape[0] if rows is None else len(rows)
        per_pass = count if self.chunk_size is None else max(1, _PASS_POSITIONS // min(step, n))
        parts = []
        for first in range(0, max(count, 1), max(per_pass, 1)):
            part = slice(first, first + per_pass) if per_pass < count else slice(None)
            which = part if rows is None else rows[part]
            mapped = [a[part] if dim == 0 else a for a, dim in zip(args, arg_dims)]
            total = 0
            for start in range(0, n, step):
                cut = slice(start, start + step)
                total = total + batched(*mapped, d.X[which, cut], d.y[which, cut], d.weights[which, cut])
            parts.append(total)
        return parts[0] if len(parts) == 1 else torch.cat(parts)

    # -- FederatedProblem -------------------------------------------------------------
    def loss(self, x: torch.Tensor) -> torch.Tensor:
        x = self._check_x(x)
        return self._pooled_loss(x) + 0.5 * self.reg * (x @ x)

    def full_grad(self, x: torch.Tensor) -> torch.Tensor:
        """∇f(x) = (1/N) Σ_i ∇f_i(x), from one backward pass of the pooled loss."""
        x = self._check_x(x)
        return grad(self._pooled_loss)(x) + self.reg * x

    def _pooled(self):
        """The real samples of all clients in one array, with weights 1/(N·n_i): f's data part is
        Σ_j w_j CE_j, one sample at a time, instead of a mean over padded clients."""
        d = self.data
        cached = d.__dict__.get("_pooled")
        if cached is None or cached[0] is not d.X:      # built for these tensors (``to`` makes new ones)
            real = d.weights > 0
            cached = d._pooled = (d.X, (d.X[real], d.y[real], d.weights[real] / self.n_clients))
        return cached[1]

    def _pooled_loss(self, x: torch.Tensor) -> torch.Tensor:
        """(1/N) Σ_i (1/n_i) Σ_{j∈D_i} CE_j(x), in passes of ``_EVAL_ROWS`` samples."""
        A, y, w = self._pooled()
        return sum(self._data_loss(x, A[s:s + _EVAL_ROWS], y[s:s + _EVAL_ROWS], w[s:s + _EVAL_ROWS])
                   for s in range(0, y.shape[0], _EVAL_ROWS))

    def client_grads(self, x: torch.Tensor) -> torch.Tensor:
        x = self._check_x(x)
        return self._over_samples(grad(self._data_loss), (x,), (None,)) + self.reg * x

    def grads_at(self, X: torch.Tensor, clients) -> torch.Tensor:
        clients = self._check_X(X, clients)
        return self._over_samples(grad(self._data_loss), (X,), (0,), rows=clients) + self.reg * X

    def stochastic_grads(self, X: torch.Tensor, clients, draws) -> torch.Tensor:
        """∇ of (1/B) Σ_b CE_{j_b}(X[k]) + (reg/2)‖X[k]‖², j_b uniform with replacement on
        the client's data, at the positions ``ClientData.batch_positions`` takes from ``draws``."""
        clients = self._check_X(X, clients)
        A, y = self.data.minibatch(clients, draws, self.batch_size)
        if self._grouped:
            B = self.batch_size
            step = _GROUPED_PASS if self.device.type == "cpu" and B > 2 * _GROUPED_PASS else B
            G = None
            with torch.enable_grad():
                Xg = X.detach().requires_grad_()
                for s in range(0, B, step):          # passes over the batch (a CPU's caches), not over clients
                    Z = grouped.grouped_logits(self._module, self._shapes, Xg, A[:, s:s + step], self.image_shape)
                    ce = torch.logsumexp(Z, -1) - Z.gather(-1, y[:, s:s + step, None])[..., 0]
                    g, = torch.autograd.grad(ce.sum() / B, Xg)
                    G = g if G is None else G + g
            return G + self.reg * X
        w = torch.full(y.shape, 1.0 / self.batch_size, dtype=self.dtype, device=self.device)
        return vmap(grad(self._data_loss))(X, A, y, w) + self.reg * X

    def noise_draws(self) -> tuple[str, int]:
        """B uniforms per row: the mini-batch positions."""
        return ("uniform", self.batch_size)

    def accuracy(self, x: torch.Tensor) -> float:
        """Fraction of the held-out samples classified correctly when a test split was given,
        else of all clients' training samples (each sample counts once)."""
        x = self._check_x(x)
        if self._test is not None:
            A, y = self._test
        else:
            real = self.data.weights > 0
            A, y = self.data.X[real], self.data.y[real]
        correct = sum(int((self._logits(x, A[s:s + _EVAL_ROWS]).argmax(-1) == y[s:s + _EVAL_ROWS]).sum())
                      for s in range(0, y.shape[0], _EVAL_ROWS))
        return correct / y.shape[0]

    # -- estimated constants ------------------------------------------------------------
    def subsample(self, max_samples: int | None, seed: int = 0) -> ClientData:
        """The clients' data cut to at most ``max_samples`` each, drawn without replacement
        (seeded); all of it when None."""
        d = self.data
        if max_samples is None or _count(max_samples, "max_samples") >= d.sizes.max():
            return d
        rng = np.random.default_rng(seed)
        keep = [rng.choice(np.flatnonzero(d.owner == i), min(int(n), max_samples), replace=False)
                for i, n in enumerate(d.sizes)]
        return ClientData([d.features[q] for q in keep], [d.labels[q] for q in keep], self.n_classes,
                          self.dtype, self.device)

    def gradient_variance(self, x: torch.Tensor, chunk: int | None = None, data: ClientData | None = None) -> torch.Tensor:
        """(N,): E‖g_i(x) − ∇f_i(x)‖² of the mini-batch gradient, exactly over D_i (or over
        ``data``, e.g. a ``subsample``): (1/B)·[(1/n_i) Σ_j ‖∇CE_j‖² − ‖(1/n_i) Σ_j ∇CE_j‖²] from
        per-sample gradients (vmap over samples, ``chunk`` at a time)."""
        x = self._check_x(x)
        d = self.data if data is None else data
        chunk = max(1, min(2048, _GRAD_FLOATS // self.dim)) if chunk is None else _count(chunk, "chunk")
        A = torch.as_tensor(d.features, dtype=self.dtype, device=self.device)
        y = torch.as_tensor(d.labels, device=self.device)
        owner = torch.as_tensor(d.owner, device=self.device)
        sq = torch.zeros(self.n_clients, dtype=self.dtype, device=self.device)
        total = torch.zeros(self.n_clients, self.dim, dtype=self.dtype, device=self.device)
        one = lambda z, a, t: self._sample_losses(z, a[None], t[None])[0]  # noqa: E731 (a single sample)
        per_sample = vmap(grad(one), in_dims=(None, 0, 0))
        for start in range(0, A.shape[0], chunk):
            G = per_sample(x, A[start:start + chunk], y[start:start + chunk])
            sq.index_add_(0, owner[start:start + chunk], (G * G).sum(1))
            total.index_add_(0, owner[start:start + chunk], G)
        n = torch.as_tensor(d.sizes, device=self.device).to(self.dtype)
        return (sq / n - ((total / n[:, None]) ** 2).sum(1)).clamp_min(0) / self.batch_size

    def hessian_norms(self, x: torch.Tensor, iters: int = 50, seed: int = 0,
                      data: ClientData | None = None) -> torch.Tensor:
        """(N,): estimates of ‖∇²f_i(x)‖ (f_i over ``data`` when given) by ``iters`` power
        iterations on Hessian-vector products (reverse-over-reverse: ∇ of ⟨∇f_i, v⟩), all
        clients under one vmap. Power iteration approaches the largest |eigenvalue| from below."""
        x = self._check_x(x)
        directional = grad(lambda z, v, A, y, w: grad(self._data_loss)(z, A, y, w) @ v)
        gen = torch.Generator(device="cpu").manual_seed(seed)
        V = torch.randn(self.n_clients, self.dim, generator=gen, dtype=torch.float64).to(self.device, self.dtype)
        norms = torch.zeros(self.n_clients, dtype=self.dtype, device=self.device)
        for _ in range(iters):
            V = V / V.norm(dim=1, keepdim=True).clamp_min(torch.finfo(self.dtype).tiny)
            HV = self._over_samples(directional, (x, V), (None, 0), data=data) + self.reg * V
            norms, V = HV.norm(dim=1), HV
        return norms

    def _f_star(self, ref: "Classifier", iters: int):
        """(f̂*, x̂, note): the best f of ``iters`` full-batch L-BFGS iterations from x0, or, for
        iters = 0, the lower bound 0 (CE ≥ 0) at x̂ = x0."""
        f0 = float(ref.loss(ref.x0))
        if iters == 0:
            return 0.0, self._x0, "estimated: not searched (fstar_iters=0); the bound f* ≥ 0 (CE ≥ 0) is used"
        from scipy.optimize import minimize

        value_and_grad = torch.func.grad_and_value(ref.loss)

        def fun(v):
            g, f = value_and_grad(torch.as_tensor(v, device=ref.device))
            return float(f), g.cpu().numpy()

        res = minimize(fun, self._x0, jac=True, method="L-BFGS-B", options=dict(maxiter=iters, gtol=1e-10))
        note = f"estimated: best f of {res.nit} full-batch L-BFGS iterations from x0 (a local value)"
        return (float(res.fun), res.x, note) if res.fun < f0 else (f0, self._x0, note)

    def constants(self, power_iters: int | None = None, fstar_iters: int | None = None,
                  max_samples: int | None = None, seed: int = 0) -> ProblemConstants:
        """**Estimates** of L, σ², f*, Δ_f and the exact F_0 at ``x0`` (FedSUM Assumptions
        1.1–1.2 and Theorem 4.1), in float64.
        Only F_0 is in ``exact``. Defaults (None) by model: MLP 50 power iterations, 300
        L-BFGS iterations, all samples; CNN 10, 0 and 64 samples per client (cheap).

        * f*: the lowest f found by ``fstar_iters`` full-batch L-BFGS iterations from x0
          (a local value, an upper bound on inf f); x̂ is where it was reached. With 0
          iterations f̂* = 0 ≤ inf f (CE ≥ 0) and x̂ = x0.
        * L: max over clients and x ∈ {x0, x̂} of ``hessian_norms`` (power iteration), on
          ``max_samples`` samples per client (``subsample``; all when None).
        * σ²: max over clients and x ∈ {x0, x̂} of the exact mini-batch variance
          (``gradient_variance``) on the same samples: not a sup over x.
        * Δ_f = f(x0) − f̂*; since f ≥ 0, Δ_f ≤ f(x0) holds rigorously.
        * F_0 = (1/N) Σ_i ‖∇f_i(x0)‖², exact.
        """
        default = _EFFORT[self.model]
        power_iters = default[0] if power_iters is None else _count(power_iters, "power_iters")
        fstar_iters = default[1] if fstar_iters is None else _count(fstar_iters, "fstar_iters", 0)
        max_samples = default[2] if max_samples is None else _count(max_samples, "max_samples")
        key = ("constants", power_iters, fstar_iters, max_samples, seed)
        if key in self._cache:
            return self._cache[key]
        ref = self.to(dtype=torch.float64)
        x0 = ref.x0
        f0 = float(ref.loss(x0))
        f_star, x_hat, f_note = self._f_star(ref, fstar_iters)
        points = (x0,) if fstar_iters == 0 else (x0, torch.as_tensor(x_hat, device=ref.device))
        sub = ref.subsample(max_samples, seed)
        L = max(ref.hessian_norms(x, power_iters, seed, sub).max().item() for x in points)
        var = [ref.gradient_variance(x, data=sub).max().item() for x in points]
        F0 = (ref.client_grads(x0) ** 2).sum(1).mean().item()
        on = "all samples" if sub is ref.data else f"≤ {max_samples} samples per client"
        at = "x0" if len(points) == 1 else "x0 and x̂"
        notes = {
            "L": f"estimated: max_i ‖∇²f_i‖ by {power_iters} power iterations on Hessian-vector products at {at} "
                 f"on {on}; a lower estimate of the sup over x",
            "sigma2": f"estimated: exact mini-batch variance (B={self.batch_size}, with replacement) at {at} "
                      f"({', '.join(f'{v:.6g}' for v in var)}) on {on}, max over clients; not a sup over x",
            "f_star": f_note,
            "delta_f": f"estimated: f(x0) − f̂*; rigorous upper bound f(x0) = {f0:.6g} since f ≥ 0",
            "F0": "(1/N) Σ_i ‖∇f_i(x0)‖² at x0, exact",
        }
        out = ProblemConstants(L=L, sigma2=max(var), f_star=f_star, delta_f=f0 - f_star, F0=F0,
                               exact=frozenset({"F0"}), notes=notes)
        self._cache[key] = out
        return out

    def __repr__(self) -> str:
        net = (f"hidden={self.hidden}, activation={self.activation!r}" if self.model == "mlp"
               else f"dataset={self.dataset!r}, image_shape={self.image_shape}")
        test = "" if self._test is None else f", n_test={self._test[1].shape[0]}"
        return (f"Classifier(model={self.model!r}, {net}, n_clients={self.n_clients}, "
                f"n_samples={self.data.sizes.sum()}{test}, dim={self.dim}, batch_size={self.batch_size}, "
                f"dtype={self.dtype})")
