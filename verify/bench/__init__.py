"""Throughput ratios, each measured within one run against a baseline on the same input.

Ratios (not seconds) are what the project tracks: both sides run on the same machine,
on the same input, one after the other, and the best of several repetitions is kept.
The rows: delay metrics against the plain numpy form; Monte-Carlo E[τ_max] against a
loop over freshly drawn traces; checks, paper tables, a conformance search and rounds per
second with runs in batches against the same runs one at a time (``verify.bench.checks``);
training rounds against a per-client loop with a torch
module and optimiser per client; FedAvg against Flower (its Simulation Runtime, by flwr run) on the same
workload (when ``fedverify[flower]`` is installed); worst-case programmes handed to Clarabel
directly against PEPit's cvxpy path (``verify.bench.worst_case``); the time a mistyped command
line takes to be answered against ``fedverify --help`` (``verify.bench.mistakes``); and, where a
CUDA device is present, delay metrics and training rounds on it against the same code on the CPU.
``report`` prints them as one table.
"""
from __future__ import annotations

import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from functools import partial

import numpy as np

import participation
from participation.delays import per_round_delay
from participation.expected import monte_carlo
from participation.expected.montecarlo import clear_table_caches
from participation.patterns import Bernoulli, ReshuffledCyclic, Selected, Sine, Uniform

from . import checks, mistakes, worst_case
from .rows import Ratio, Skipped, duration

FLOWER_HINT = "install fedverify[flower]"


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
    return Ratio("delay metrics", f"dense {rounds}x{clients} trace, density {density}", base, fast,
                 baseline="plain numpy")


def _straightforward_monte_carlo(rounds: int, n_clients: int, p: float, reps: int, seed: int = 0) -> np.ndarray:
    """A fresh Bernoulli matrix per replicate, then the straightforward delay form."""
    rng = np.random.default_rng(seed)
    return np.array([straightforward_per_round_delay(rng.random((rounds, n_clients)) < p).max() for _ in range(reps)])


def _straightforward_pattern_monte_carlo(pattern, rounds: int, reps: int, seed: int = 0) -> np.ndarray:
    """The pattern's own trace one replicate at a time, then the straightforward delay form."""
    return np.array([straightforward_per_round_delay(pattern.sample_batch(rounds, 1, seed, first_replicate=r)[0]).max()
                     for r in range(reps)])


def _first_call(pattern, rounds: int, reps: int, method: str):
    """``monte_carlo`` as a first call pays it: the tables the methods keep between calls
    (gap laws, chain CDFs, periodic laws) are forgotten first and built again."""
    clear_table_caches()
    return monte_carlo(pattern, rounds, reps, seed=0, progress=False, method=method)


def _family_ratio(title: str, workload: str, pattern, method: str, quick: bool) -> Ratio:
    """Monte-Carlo E[τ_max] of ``pattern`` over T = 2000 rounds and 200 replicates (T = 500 and
    20 replicates with ``quick``, a smoke run) by ``method``, against the pattern's own traces one
    replicate at a time. The ratio is that of a first call (tables built inside the time); the
    note gives a repeated call (tables kept) and method "trace"."""
    rounds, reps = (500, 20) if quick else (2000, 200)
    runs = {
        "straightforward": lambda: _straightforward_pattern_monte_carlo(pattern, rounds, reps),
        method: lambda: _first_call(pattern, rounds, reps, method),
        "repeated": lambda: monte_carlo(pattern, rounds, reps, seed=0, progress=False, method=method),
        "trace": lambda: monte_carlo(pattern, rounds, reps, seed=0, progress=False, method="trace"),
    }
    timings = {name: _best_time(run) for name, run in runs.items()}
    return Ratio(title, f"{workload}, N={pattern.n_clients}, T={rounds}, {reps} replicates", timings["straightforward"],
                 timings[method], note=f"a repeated call (tables kept) {duration(timings['repeated'])}; "
                                       f"method 'trace' {duration(timings['trace'])}")


def markov_gaps_ratio(quick: bool = False) -> Ratio:
    """CA-Fed's temporal mix (Markov clients, N = 100) by method "gaps"."""
    return _family_ratio("Monte-Carlo E[tau_max], Markov clients (gaps)", "cafed-temporal",
                         participation.preset("cafed-temporal", n_clients=100), "gaps", quick)


def varying_gaps_ratio(quick: bool = False) -> Ratio:
    """FedSUM P3 (p_t shared by N = 100 clients, period 10) by method "gaps" (long absences only,
    laws indexed by the phase: :mod:`participation.expected.samplers.periodic`)."""
    return _family_ratio("Monte-Carlo E[tau_max], time-varying p (P3, periodic gaps)", "P3", participation.preset("P3"),
                         "gaps", quick)


def reshuffled_ratio(quick: bool = False) -> Ratio:
    """Case 4 (N = 100, S = 20) by method "shifts" (E − 1 chain draws an epoch)."""
    return _family_ratio("Monte-Carlo E[tau_max], reshuffled cyclic (shifts)", "Case 4, S=20", ReshuffledCyclic(100, 20),
                         "shifts", quick)


def uniform_ratio(quick: bool = False) -> Ratio:
    """Case 1 / P1 (N = 100, S = 20) by method "subsets" (the S ids of each round, not an
    N-wide mask)."""
    return _family_ratio("Monte-Carlo E[tau_max], uniform sampling (P1, subsets)", "Case 1 (P1), S=20",
                         Uniform(100, 20), "subsets", quick)


def sine_ratio(quick: bool = False) -> Ratio:
    """FedAWE's sine trajectory, p_i(t) = clip((a sin(2πt/20) + b) p_i, 0, 1), for N = 100 clients
    with base probabilities p_i evenly spaced in [0.1, 0.5] and a = b = 0.5 (chosen here), by
    the method "auto" picks: whole traces, since 100 distinct sequences of period 20 are 2000
    phase rows, past ``periodic.MAX_PHASE_ROWS`` (the periodic gap sampler would build a table
    per row before the first draw), and every presence drawn by inverting Λ would cost a pass per
    distinct sequence."""
    pattern = Sine.fedawe(np.linspace(0.1, 0.5, 100), 0.5, 0.5)
    return _family_ratio("Monte-Carlo E[tau_max], FedAWE sine (auto)", "Sine.fedawe p_i in [0.1, 0.5], a=b=0.5",
                         pattern, "auto", quick)


def on_off_cycles_ratio(quick: bool = False) -> Ratio:
    """FedAU's cyclic participation (on/off cycles of C = 100 rounds, random phases) by method
    "cycles" (each replicate's delays from its N phases)."""
    return _family_ratio("Monte-Carlo E[tau_max], on/off cycles (FedAU cyclic, cycles)", "fedau-cyclic",
                         participation.preset("fedau-cyclic"), "cycles", quick)


def deterministic_ratio(quick: bool = False) -> Ratio:
    """Case 3 (deterministic cyclic, N = 100, S = 20): one trace serves every replicate."""
    return _family_ratio("Monte-Carlo E[tau_max], deterministic cyclic (Case 3, one trace)", "Case 3, S=20",
                         participation.preset("case3"), "auto", quick)


def diurnal_ratio(quick: bool = False) -> Ratio:
    """Zhu et al.'s diurnal day/night groups (S = 20 of N = 100) by the method "auto" picks:
    whole traces (each round's two uniform subsets need every id, as Case 1 does)."""
    return _family_ratio("Monte-Carlo E[tau_max], diurnal groups (auto)", "diurnal", participation.preset("diurnal"),
                         "auto", quick)


def selected_ratio(rule: str, quick: bool = False) -> Ratio:
    """Server selection of S = 20 among clients available with p = 0.5 (N = 100), ``rule``
    "uniform" or "reshuffled", by the method "auto" picks (whole traces)."""
    return _family_ratio(f"Monte-Carlo E[tau_max], selection among available ({rule}, auto)",
                         f"Selected(Bernoulli(0.5), S=20, {rule})", Selected(Bernoulli(0.5, 100), 20, rule), "auto", quick)


def biased_ratio(quick: bool = False) -> Ratio:
    """FedSUM App. H.8's biased groups (N = 100) by method "gaps"."""
    return _family_ratio("Monte-Carlo E[tau_max], biased groups (H.8, gaps)", "H8", participation.preset("H8"),
                         "gaps", quick)


def clustered_markov_ratio(quick: bool = False) -> Ratio:
    """CA-Fed's spatial correlation (10 clusters of 10 clients sharing a chain) by method "gaps"."""
    return _family_ratio("Monte-Carlo E[tau_max], clustered Markov (gaps)", "cafed-spatial",
                         participation.preset("cafed-spatial"), "gaps", quick)


def monte_carlo_ratios(quick: bool = False, workers: int = 1) -> list[Ratio]:
    """Replicate throughput of Monte-Carlo E[τ_max], one row per pattern family: Case 2
    (N=100, p=0.2, T=2000), Case 1 (N=100, S=20, T=2000) by subsets (:func:`uniform_ratio`),
    Case 4 by shifts (:func:`reshuffled_ratio`), Markov clients per client and clustered,
    P3's and FedAWE's time-varying p, H.8's biased groups, on/off cycles, a deterministic
    pattern, diurnal groups and server selection among available clients."""
    rounds, n, p = 2000, 100, 0.2
    reps = 100 if quick else 400
    pattern = Bernoulli(p, n)
    timings = {}
    for name, run in {
        "straightforward": lambda: _straightforward_monte_carlo(rounds, n, p, reps),
        "gaps": lambda: _first_call(pattern, rounds, reps, "gaps"),
        "repeated": lambda: monte_carlo(pattern, rounds, reps, seed=0, progress=False, method="gaps"),
        "trace": lambda: monte_carlo(pattern, rounds, reps, seed=0, progress=False, method="trace"),
    }.items():
        timings[name] = _best_time(run)
    workload = f"Case 2, N={n}, p={p}, T={rounds}, {reps} replicates"
    ratios = [Ratio("Monte-Carlo E[tau_max], gap sampling", workload, timings["straightforward"], timings["gaps"],
                    note=f"first call (tables built); repeated call {duration(timings['repeated'])}"),
              Ratio("Monte-Carlo E[tau_max], whole traces", workload, timings["straightforward"], timings["trace"]),
              uniform_ratio(quick), reshuffled_ratio(quick), markov_gaps_ratio(quick), clustered_markov_ratio(quick),
              varying_gaps_ratio(quick), sine_ratio(quick), biased_ratio(quick), on_off_cycles_ratio(quick),
              deterministic_ratio(quick), diurnal_ratio(quick), selected_ratio("uniform", quick),
              selected_ratio("reshuffled", quick)]
    if workers > 1:
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


@dataclass(frozen=True)
class TrainingWorkload:
    """The training rows' workload: ``problem`` (float32 CPU), ``trace``, FedAvg's η_l and K,
    and ``factory``, a picklable zero-argument callable that rebuilds ``problem`` (how the
    Flower side loads the clients' data)."""

    problem: object
    trace: object
    eta_l: float
    local_steps: int
    batch_size: int
    description: str
    factory: object = None

    @property
    def rounds(self) -> int:
        return self.trace.n_rounds


def training_workload(quick: bool = False, rounds: int | None = None, n_clients: int = 100,
                      active: int = 20) -> TrainingWorkload:
    """Logistic on digits (Dirichlet(1) split over N = ``n_clients`` clients, at least 8
    samples each), ``active`` clients a round drawn uniformly, K = 5 local steps of
    mini-batch 16, η_l = 0.05, float32 on the CPU; ``rounds`` rounds (default 20 with
    ``quick``, else 100)."""
    import torch

    from algorithms.problems import Logistic

    steps, batch = 5, 16
    rounds = rounds or (20 if quick else 100)
    factory = partial(Logistic.digits, n_clients=n_clients, alpha=1.0, batch_size=batch, seed=0, min_size=8,
                      dtype=torch.float32)
    trace = Uniform(n_clients, active).sample(rounds, seed=0)
    return TrainingWorkload(factory(), trace, 0.05, steps, batch,
                            f"Logistic on digits, N={n_clients}, {active} active, K={steps}, B={batch}, "
                            f"{rounds} rounds, float32 CPU", factory)


def _engine_fedavg(work: TrainingWorkload, problem=None):
    from algorithms import get, run

    problem = work.problem if problem is None else problem
    return run(get("fedavg", eta_l=work.eta_l, local_steps=work.local_steps), problem, work.trace, seed=0,
               record_every=work.rounds)


def training_round_ratios(quick: bool = False, work: TrainingWorkload | None = None) -> list[Ratio]:
    """FedAvg and FedSUM rounds on the training workload (``work``, default
    ``training_workload(quick)``), against a per-client loop with a torch module and
    optimiser per client."""
    import torch

    from algorithms import get, run

    work = work or training_workload(quick)
    problem, trace, rounds, n = work.problem, work.trace, work.rounds, work.problem.n_clients
    data = problem.data
    clients_data = [(torch.as_tensor(data.features[data.owner == i], dtype=torch.float32),
                     torch.as_tensor(data.labels[data.owner == i])) for i in range(n)]
    features = clients_data[0][0].shape[1]
    corrections = [[torch.zeros(10, features), torch.zeros(10)] for _ in range(n)]
    torch.manual_seed(0)

    def loop(correction):
        model = torch.nn.Linear(features, 10)
        for t in range(rounds):
            _per_client_loop_round(clients_data, model, np.flatnonzero(trace.mask[t]), work.eta_l, work.local_steps,
                                   work.batch_size, problem.reg, correction)

    timings = {}
    for name, fn in {
        "loop fedavg": lambda: loop(None),
        "loop fedsum": lambda: loop(corrections),
        "fedavg": lambda: _engine_fedavg(work),
        "fedsum": lambda: run(get("fedsum", eta_l=work.eta_l * n, eta_g=1.0, local_steps=work.local_steps), problem,
                              trace, seed=0, record_every=rounds),
    }.items():
        timings[name] = min(_timed(fn) for _ in range(3))
    return [Ratio("training rounds, FedAvg", work.description, timings["loop fedavg"], timings["fedavg"],
                  baseline="per-client loop"),
            Ratio("training rounds, FedSUM", work.description, timings["loop fedsum"], timings["fedsum"],
                  baseline="per-client loop")]


def cnn_local_step_ratio(quick: bool = False, clients: int = 20, batch: int = 10, steps: int | None = None) -> Ratio:
    """One local step of FedSUM Table 2's MNIST CNN for ``clients`` active clients at once, on
    the embedded MNIST subset (mini-batch ``batch``, float32 CPU): the clients' copies run as
    one grouped network (``algorithms.problems.grouped``, what the engine does; mini-batches
    above 32 in passes of 16 samples) against ``vmap(grad)`` over ``functional_call`` (the
    general path), best of 3 runs of ``steps`` steps (default 3 with ``quick``, else 10). The
    note gives the largest difference of the gradients, which shows that the work is equal."""
    import torch

    from algorithms.data import load
    from algorithms.noise import NoiseStream
    from algorithms.problems import Classifier

    steps = steps or (3 if quick else 10)
    X, y = load("mnist-5k", limit=1000)
    problem = Classifier.from_arrays(X, y, 100, 0.1, model="cnn", dataset="mnist", seed=0, batch_size=batch,
                                     dtype=torch.float32)
    active = torch.arange(0, 100, 100 // clients)[:clients]
    params = problem.x0 + 0.01 * torch.randn(active.numel(), problem.dim, generator=torch.Generator().manual_seed(0))
    grads = {}

    noise = NoiseStream(1)

    def timed_steps(grouped: bool) -> float:
        problem._grouped = grouped
        best = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            for k in range(steps):
                grads[grouped] = problem.stochastic_grads(params, active, noise.draws(0, k, active))
            best = min(best, time.perf_counter() - start)
        return best

    vmapped, grouped = timed_steps(False), timed_steps(True)
    gap = float((grads[True] - grads[False]).abs().max())
    return Ratio(f"local steps, MNIST CNN, batch {batch}", f"FedSUM Table 2 CNN, {clients} clients x batch {batch}, {steps} steps, "
                 "float32 CPU", vmapped, grouped, baseline="vmap(grad)",
                 note=f"largest gradient difference {gap:.1e} (float32)")


def flower_ratio(quick: bool = False, work: TrainingWorkload | None = None) -> Ratio | Skipped:
    """FedAvg on the training workload in the engine against the bench's Flower App run by
    ``flwr run`` in Flower's Simulation Runtime (``verify.bench.flower_baseline``: same clients
    and data, model, batches, participation, K, B, η_l and aggregation, float32 CPU), each side
    from x_0 = 0 for all rounds.

    Flower's time is that of its rounds alone, timed inside the ServerApp (``flwr run``'s
    start-up of the SuperLink, Ray and the SuperNodes, and its shutdown, are in the note); the
    engine's is its whole ``run``,
    best of 3. The note gives both final losses f(x_T) (float64) and the largest
    difference of the final parameters, which show that the ratio is one of equal work.
    Skipped, with the reason, when Flower is not installed or its simulation cannot start.
    """
    name = "FedAvg vs Flower"
    try:
        from . import flower_baseline
    except ImportError as err:
        missing = err.name or "flwr"
        what = "Flower is" if missing.split(".")[0] == "flwr" else f"{missing} (Flower's simulation extra) is"
        return Skipped(name, f"{what} not installed; {FLOWER_HINT}")
    import torch

    work = work or training_workload(quick)
    try:
        flower = flower_baseline.run_flower(work.factory, work.trace, work.eta_l, work.local_steps, seed=0)
    except Exception as err:  # Ray or Flower failing to start: say why, carry on with the bench
        reason = (str(err).strip().splitlines() or [type(err).__name__])[-1]
        return Skipped(name, f"Flower's simulation did not run: {reason}")
    history = _engine_fedavg(work)
    engine = min(_timed(lambda: _engine_fedavg(work)) for _ in range(3))
    reference = work.problem.to(dtype=torch.float64)
    loss = {side: float(reference.loss(torch.as_tensor(x))) for side, x in
            (("fedverify", history.final_params), ("Flower", flower.params))}
    gap = float(np.abs(history.final_params - flower.params).max())
    rounds = work.rounds
    note = (f"final loss fedverify {loss['fedverify']:.6f}, Flower {loss['Flower']:.6f} (max |Δx| {gap:.1e});"
            f" per round Flower {duration(flower.round_seconds / rounds)}, fedverify {duration(engine / rounds)};"
            f" Flower start-up {duration(flower.startup_seconds)} and shutdown {duration(flower.shutdown_seconds)}"
            " (flwr run), not counted")
    return Ratio(name, work.description, flower.round_seconds, engine, baseline=f"Flower {flower_baseline.version()}",
                 note=note)


def gpu_delay_ratio(device, rounds: int, clients: int, density: float = 0.2, seed: int = 0) -> Ratio:
    """Delay metrics τ_t on a (rounds × clients) Bernoulli(density) trace held on ``device``
    (the torch kernel of ``participation.expected``), against ``per_round_delay`` on the
    CPU on the same trace; both results must agree. The note gives cells/s on each."""
    import torch

    from participation.expected.samplers._torch_delay import per_round_delay_torch

    generator = torch.Generator(device=device).manual_seed(seed)
    mask = torch.rand((rounds, clients), generator=generator, device=device) < density
    host = mask.cpu().numpy()
    fast, got = _best_of(lambda m: per_round_delay_torch(m, device), mask, 3)
    base, expected = _best_of(per_round_delay, host, 2)
    if not np.array_equal(expected, got):
        raise AssertionError(f"delay metrics on {device} disagree with the CPU path")
    cells = rounds * clients
    return Ratio(f"delay metrics on {device}", f"dense {rounds}x{clients} trace, density {density}", base, fast,
                 baseline="fedverify CPU",
                 note=f"{cells / fast:.3g} cells/s on {device}, {cells / base:.3g} cells/s on the CPU")


def gpu_training_ratio(device, rounds: int, n_clients: int = 1000, active: int = 200, n_samples: int = 100_000,
                       dim: int = 100) -> Ratio:
    """FedAvg rounds with the problem on ``device`` against the same run on the CPU: Logistic
    on a Gaussian mixture (``n_samples`` points, ``dim`` features, 10 classes, Dirichlet(1)
    over ``n_clients``), ``active`` clients a round, K = 5, B = 64, float32. The note gives
    rounds/s on each."""
    import torch

    from algorithms.problems import Logistic

    steps, batch = 5, 64
    problem = Logistic.synthetic(n_clients=n_clients, alpha=1.0, n_samples=n_samples, dim=dim, n_classes=10,
                                 batch_size=batch, seed=0, min_size=8, dtype=torch.float32)
    work = TrainingWorkload(problem, Uniform(n_clients, active).sample(rounds, seed=0), 0.05, steps, batch, "")
    on_device = problem.to(device)
    fast = min(_timed(lambda: _engine_fedavg(work, on_device)) for _ in range(3))
    base = min(_timed(lambda: _engine_fedavg(work)) for _ in range(2))
    workload = (f"Logistic on a Gaussian mixture, {n_samples} samples, dim {dim}, 10 classes, N={n_clients}, "
                f"{active} active, K={steps}, B={batch}, {rounds} rounds, float32")
    return Ratio(f"training rounds on {device}, FedAvg", workload, base, fast, baseline="fedverify CPU",
                 note=f"{rounds / fast:.3g} rounds/s on {device}, {rounds / base:.3g} rounds/s on the CPU")


def gpu_ratios(quick: bool = False) -> list[Ratio | Skipped]:
    """The GPU rows on ``cuda`` (10^4 × 10^5 trace and 50 rounds; 2000 × 10^5 and 10 with
    ``quick``), or one skipped row when no CUDA device is present."""
    import torch

    if not torch.cuda.is_available():
        return [Skipped("GPU", "no CUDA device present: delay metrics (cells/s) and training rounds/s on the GPU "
                               "not measured")]
    return [gpu_delay_ratio("cuda", 2_000 if quick else 10_000, 100_000),
            gpu_training_ratio("cuda", 10 if quick else 50)]


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _best_time(fn, repeats: int = 3, enough: float = 2.0) -> float:
    """The best of ``repeats`` runs, stopping after a run that took more than ``enough`` seconds."""
    best = float("inf")
    for _ in range(repeats):
        best = min(best, _timed(fn))
        if best > enough:
            break
    return best


def run_all(quick: bool = False, workers: int = 1) -> list[Ratio | Skipped]:
    return [delay_metrics_ratio(quick=quick), *monte_carlo_ratios(quick=quick, workers=workers),
            *checks.batch_ratios(quick), *training_round_ratios(quick=quick), cnn_local_step_ratio(quick=quick),
            cnn_local_step_ratio(quick=quick, batch=128), flower_ratio(quick=quick),
            *worst_case.worst_case_ratios(quick=quick), mistakes.mistake_latency_ratio(quick=quick),
            *gpu_ratios(quick=quick)]


def format_table(rows: list[Ratio | Skipped]) -> str:
    """One line per row: ``name:``, speed-up, baseline and its time, fedverify's time and the
    workload, in aligned columns; a skipped row gives its reason, a note follows its row on
    an indented line."""
    measured = [row for row in rows if isinstance(row, Ratio)]
    columns = {id(row): (f"{row.speedup:.1f}x", f"{row.baseline} {duration(row.baseline_seconds)}",
                         f"fedverify {duration(row.fast_seconds)}") for row in measured}
    name_width = max(len(row.name) + 1 for row in rows)
    widths = [max((len(c[k]) for c in columns.values()), default=0) for k in range(3)]
    widths[0] = max(widths[0], len("skipped") if len(measured) < len(rows) else 0)
    lines = []
    for row in rows:
        name = f"{row.name + ':':<{name_width}}"
        if isinstance(row, Skipped):
            lines.append(f"{name}  {'skipped':>{widths[0]}}  ({row.reason})")
            continue
        ratio, base, fast = columns[id(row)]
        lines.append(f"{name}  {ratio:>{widths[0]}}  {base:<{widths[1]}}  {fast:<{widths[2]}}  {row.workload}")
        if row.note:
            lines.append(f"{'':<{name_width}}  {row.note}")
    return "\n".join(lines)


def report(quick: bool = False, workers: int = 1) -> str:
    """The bench as printed by ``fedverify bench``."""
    head = (f"fedverify bench{' --quick' if quick else ''}: speed-up = baseline time / fedverify time, "
            "measured in this run")
    return head + "\n" + format_table(run_all(quick=quick, workers=workers))
