"""The algorithms of the worst-case engine, written once over an abstract vector algebra.

A transcription runs one algorithm along a participation trace with deterministic client
gradients, given by an oracle ``grad(i, x)`` (σ² = 0: the mean of K identical stochastic
gradients is the gradient). Its vectors need only ``+``, ``−``, multiplication by a float and
``0 * v``, so the same code runs on numpy arrays (where ``tests`` hold it to
``algorithms.run`` to 1e-12 on quadratic problems, empty rounds included) and on PEPit's
symbolic points (where it builds the performance-estimation programme). Each follows the
arithmetic of the engine's round (``algorithms.fedsum``, ``fedavg``, ``scaffold``, ``fedgm``)
operation for operation, with the engine's conventions: FedSUM's server steps in every round,
also when S_t is empty; FedAvg, SCAFFOLD and the momentum family skip a round with S_t = ∅.

``iterates(algorithm, active_sets, grad, x0)`` returns the global iterates x_0, …, x_T.
"""
from __future__ import annotations

from typing import Callable, Sequence

__all__ = ["iterates", "SUPPORTED", "supported"]


def _local_sgd(x, grad, i, eta, steps, correction=None):
    """K steps X ← X − η(∇f_i(X) + correction) from X = x; returns (X_K, (1/K) Σ_k ∇f_i(X_k))
    (``algorithms.base.local_sgd`` with exact gradients)."""
    X, total = x, None
    for _ in range(steps):
        g = grad(i, X)
        total = g if total is None else total + g
        X = X - eta * (g + correction if correction is not None else g)
    return X, total * (1.0 / steps)


def _model_moves(x, grad, active, alg):
    """Σ_{i∈S_t} (x − X_i^K): the clients' K local SGD steps from x, as FedAvg and the momentum
    family send them (``Δ_t^i`` of Server momentum Algorithm 2)."""
    total = None
    for i in active:
        X, _ = _local_sgd(x, grad, i, alg.eta_l, alg.local_steps)
        total = (x - X) if total is None else total + (x - X)
    return total


def _fedsum_family(kind: str, alg, sets, grad, x0, n):
    """FedSUM-B, FedSUM and FedSUM-CR (FedSUM Algorithms 1–3): y^(t) = y^(t−1) + Σ_{i∈S_t}
    (h_i^(t+1) − h_i^(t)), x^(t+1) = x^(t) − (η_g η_l K/N) y^(t), every round."""
    K, eta_l, eta_g = alg.local_steps, alg.eta_l, alg.eta_g
    zero = 0.0 * x0
    x, y = x0, zero
    h = [zero] * n
    z = [x0] * n
    a = [-1] * n
    xs = [x0]
    for t, active in enumerate(sets):
        new_h = {}
        for i in active:
            if kind == "fedsum-b":
                total = None
                for _ in range(K):
                    g = grad(i, x)
                    total = g if total is None else total + g
                new_h[i] = total * (1.0 / K)
            else:
                if kind == "fedsum":
                    correction = y - h[i]
                else:
                    scale = n / (eta_g * eta_l * K)
                    correction = (z[i] - x) * (scale / (t - a[i])) - h[i]
                _, new_h[i] = _local_sgd(x, grad, i, eta_l / n, K, correction)
        for i in active:
            y = y + (new_h[i] - h[i])
        for i in active:
            h[i] = new_h[i]
            if kind == "fedsum-cr":
                z[i], a[i] = x, t
        x = x - (eta_g * eta_l * K / n) * y
        xs.append(x)
    return xs


def _fedavg(alg, sets, grad, x0, n):
    """FedAvg: x ← x − η_g w Σ_{i∈S_t} (x − X_i^K), w = 1/|S_t| ("active") or 1/N ("all")."""
    x, xs = x0, [x0]
    for active in sets:
        if active:
            weight = 1.0 / len(active) if alg.aggregate == "active" else 1.0 / n
            x = x - _model_moves(x, grad, active, alg) * (alg.eta_g * weight)
        xs.append(x)
    return xs


def _scaffold(alg, sets, grad, x0, n):
    """SCAFFOLD option II: local steps with correction c − c_i, c_i⁺ = (1/K) Σ_k ∇f_i(y_k),
    x ← x + η_g (1/|S|) Σ (y_i − x), c ← c + (1/N) Σ (c_i⁺ − c_i)."""
    zero = 0.0 * x0
    x, c, ci, xs = x0, zero, [zero] * n, [x0]
    for active in sets:
        if active:
            moved, changed, new_c = None, None, {}
            for i in active:
                Y, new_c[i] = _local_sgd(x, grad, i, alg.eta_l, alg.local_steps, c - ci[i])
                moved = (Y - x) if moved is None else moved + (Y - x)
                changed = (new_c[i] - ci[i]) if changed is None else changed + (new_c[i] - ci[i])
            x = x + moved * (alg.eta_g / len(active))
            c = c + changed * (1.0 / n)
            for i in active:
                ci[i] = new_c[i]
        xs.append(x)
    return xs


def _momentum(kind: str, alg, sets, grad, x0, n):
    """Server momentum (Server momentum eq. (2)): Δ = (1/|S_t|) Σ (x − X_i^K); FedGM/QHM
    d ← βd + (1−β)Δ, x ← x − η((1−ν)Δ + νd); FedAvgM v ← βv + Δ, x ← x − η'v; FedNAG
    x ← x − η'(Δ + βv)."""
    if getattr(alg, "schedule", None) is not None:
        raise ValueError(f"{alg.name}: a multistage schedule is not transcribed for worst cases; "
                         "give one stage's (eta_g, beta, nu) as the algorithm's own")
    zero = 0.0 * x0
    x, d, xs = x0, zero, [x0]
    beta = alg.beta
    for active in sets:
        if active:
            delta = _model_moves(x, grad, active, alg) * (1.0 / len(active))
            if kind in ("fedgm", "qhm"):
                d = d * beta + delta * (1 - beta)
                x = x - (delta * (1 - alg.nu) + d * alg.nu) * alg.eta_g
            else:
                d = d * beta + delta
                step = delta + d * beta if kind == "fednag" else d
                x = x - step * alg.eta_g
        xs.append(x)
    return xs


_FAMILY = ("fedsum-b", "fedsum", "fedsum-cr")
_MOMENTUM = ("fedgm", "qhm", "fedavgm", "fednag")
#: The registered names with a transcription.
SUPPORTED = _FAMILY + ("fedavg", "scaffold") + _MOMENTUM


def supported(name: str) -> bool:
    return name in SUPPORTED


def iterates(algorithm, active_sets: Sequence[Sequence[int]], grad: Callable, x0, n_clients: int) -> list:
    """x_0, …, x_T of ``algorithm`` (an ``algorithms.Algorithm`` of a supported name, its own
    η_l, η_g, K and hyper-parameters) along the active sets S_0, …, S_{T−1} (clients in
    increasing order), with client gradients ``grad(i, x)``."""
    name = algorithm.name
    sets = [sorted(int(i) for i in s) for s in active_sets]
    if name in _FAMILY:
        return _fedsum_family(name, algorithm, sets, grad, x0, n_clients)
    if name == "fedavg":
        return _fedavg(algorithm, sets, grad, x0, n_clients)
    if name == "scaffold":
        return _scaffold(algorithm, sets, grad, x0, n_clients)
    if name in _MOMENTUM:
        return _momentum(name, algorithm, sets, grad, x0, n_clients)
    raise ValueError(f"no worst-case transcription of {name!r}; the engine covers {', '.join(SUPPORTED)}")
