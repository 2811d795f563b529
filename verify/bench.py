"""Throughput ratios, each measured within one run against a straightforward form.

Ratios (not seconds) are what the project tracks: both sides run on the same machine,
on the same input, interleaved, and the best of several repetitions is kept.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from participation.delays import per_round_delay
from participation.expected import monte_carlo
from participation.patterns import Bernoulli


@dataclass(frozen=True)
class Ratio:
    name: str
    workload: str
    baseline_seconds: float
    fast_seconds: float

    @property
    def speedup(self) -> float:
        return self.baseline_seconds / self.fast_seconds

    def report(self) -> str:
        return (f"{self.name}: {self.speedup:.1f}x  ({self.workload}; straightforward {self.baseline_seconds * 1e3:.1f} ms,"
                f" fedverify {self.fast_seconds * 1e3:.1f} ms)")


def straightforward_per_round_delay(mask: np.ndarray) -> np.ndarray:
    """τ_t via a masked index array and ``np.maximum.accumulate`` (the plain numpy form)."""
    rounds = np.arange(mask.shape[-2])
    last = np.maximum.accumulate(np.where(mask, rounds[:, None], -1), axis=-2)
    return rounds - last.min(axis=-1)


def _best_of(fn, arg, repeats: int) -> tuple[float, np.ndarray]:
    best, result = np.inf, None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn(arg)
        best = min(best, time.perf_counter() - start)
    return best, result


def delay_metrics_ratio(quick: bool = False, density: float = 0.2, seed: int = 0) -> Ratio:
    """Delay metrics on a dense trace (10^4 × 10^4; 2000 × 1000 with ``quick``)."""
    rounds, clients = (2000, 1000) if quick else (10_000, 10_000)
    mask = np.random.default_rng(seed).random((rounds, clients)) < density
    repeats = 3
    base, expected = _best_of(straightforward_per_round_delay, mask, repeats)
    fast, got = _best_of(per_round_delay, mask, repeats)
    if not np.array_equal(expected, got):
        raise AssertionError("per_round_delay disagrees with the straightforward form")
    return Ratio("delay metrics", f"dense {rounds}x{clients} trace, density {density}", base, fast)


def _straightforward_monte_carlo(rounds: int, n_clients: int, p: float, reps: int, seed: int = 0) -> np.ndarray:
    """A fresh Bernoulli matrix per replicate, then the straightforward delay form."""
    rng = np.random.default_rng(seed)
    return np.array([straightforward_per_round_delay(rng.random((rounds, n_clients)) < p).max() for _ in range(reps)])


def monte_carlo_ratios(quick: bool = False, workers: int = 1) -> list[Ratio]:
    """Replicate throughput of Monte-Carlo E[τ_max], Case 2 (N=100, p=0.2, T=2000)."""
    rounds, n, p = 2000, 100, 0.2
    reps = 100 if quick else 400
    pattern = Bernoulli(p, n)
    timings = {}
    for name, run in {
        "straightforward": lambda: _straightforward_monte_carlo(rounds, n, p, reps),
        "gaps": lambda: monte_carlo(pattern, rounds, reps, seed=0, progress=False, method="gaps"),
        "trace": lambda: monte_carlo(pattern, rounds, reps, seed=0, progress=False, method="trace"),
    }.items():
        timings[name] = min(_timed(run) for _ in range(3))
    workload = f"Case 2, N={n}, p={p}, T={rounds}, {reps} replicates"
    ratios = [Ratio("Monte-Carlo E[tau_max], gap sampling", workload, timings["straightforward"], timings["gaps"]),
              Ratio("Monte-Carlo E[tau_max], whole traces", workload, timings["straightforward"], timings["trace"])]
    if workers > 1:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(workers) as pool:
            parallel = min(_timed(lambda: monte_carlo(pattern, rounds, reps, seed=0, progress=False, executor=pool,
                                                      )) for _ in range(2))
        ratios.append(Ratio(f"Monte-Carlo E[tau_max], gap sampling, {workers} processes", workload, timings["straightforward"], parallel))
    return ratios


def _per_client_loop_round(clients_data, global_model, active, eta_l, local_steps, batch_size, reg, correction=None):
    """One FedAvg round the way most research code writes it: a module and an optimiser
    per active client, ``local_steps`` SGD steps each, then the average of the updates.
    With ``correction`` (client → flat vector) each step adds it to the gradient first,
    as FedSUM's local step does."""
    import torch
    import torch.nn.functional as F

    updates = []
    for i in active:
        features, labels = clients_data[i]
        model = torch.nn.Linear(features.shape[1], global_model.out_features, dtype=features.dtype)
        model.load_state_dict(global_model.state_dict())
        optimiser = torch.optim.SGD(model.parameters(), lr=eta_l, weight_decay=reg)
        for _ in range(local_steps):
            rows = torch.randint(0, features.shape[0], (batch_size,))
            optimiser.zero_grad()
            F.cross_entropy(model(features[rows]), labels[rows]).backward()
            if correction is not None:
                for param, extra in zip(model.parameters(), correction[i]):
                    param.grad.add_(extra)
            optimiser.step()
        updates.append([p.detach() - q.detach() for p, q in zip(model.parameters(), global_model.parameters())])
    with torch.no_grad():
        for k, param in enumerate(global_model.parameters()):
            param.add_(torch.stack([u[k] for u in updates]).mean(dim=0))


def training_round_ratios(quick: bool = False) -> list[Ratio]:
    """FedAvg and FedSUM rounds on Logistic (digits, N=100, 20 active, K=5), float32 CPU,
    against a per-client loop with a torch module and optimiser per client."""
    import torch

    from algorithms import get, run
    from algorithms.problems import Logistic
    from participation.patterns import Uniform

    n, active, steps, batch = 100, 20, 5, 16
    rounds = 20 if quick else 100
    problem = Logistic.digits(n_clients=n, alpha=1.0, batch_size=batch, seed=0, min_size=8, dtype=torch.float32)
    trace = Uniform(n, active).sample(rounds, seed=0)
    data = problem.data
    clients_data = [(torch.as_tensor(data.features[data.owner == i], dtype=torch.float32),
                     torch.as_tensor(data.labels[data.owner == i])) for i in range(n)]
    features = clients_data[0][0].shape[1]
    corrections = [[torch.zeros(10, features), torch.zeros(10)] for _ in range(n)]
    torch.manual_seed(0)

    def loop(correction):
        model = torch.nn.Linear(features, 10)
        for t in range(rounds):
            _per_client_loop_round(clients_data, model, np.flatnonzero(trace.mask[t]), 0.05, steps, batch,
                                   problem.reg, correction)

    timings = {}
    for name, fn in {
        "loop fedavg": lambda: loop(None),
        "loop fedsum": lambda: loop(corrections),
        "fedavg": lambda: run(get("fedavg", eta_l=0.05, local_steps=steps), problem, trace, seed=0, record_every=rounds),
        "fedsum": lambda: run(get("fedsum", eta_l=0.05 * n, eta_g=1.0, local_steps=steps), problem, trace, seed=0,
                              record_every=rounds),
    }.items():
        timings[name] = min(_timed(fn) for _ in range(3))
    workload = f"Logistic on digits, N={n}, {active} active, K={steps}, {rounds} rounds, float32 CPU"
    return [Ratio("training rounds, FedAvg", workload, timings["loop fedavg"], timings["fedavg"]),
            Ratio("training rounds, FedSUM", workload, timings["loop fedsum"], timings["fedsum"])]


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def run_all(quick: bool = False, workers: int = 1) -> list[Ratio]:
    return [delay_metrics_ratio(quick=quick), *monte_carlo_ratios(quick=quick, workers=workers),
            *training_round_ratios(quick=quick)]
