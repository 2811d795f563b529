"""Run an algorithm on a problem along participation traces, many runs as one program.

``run_batch`` runs B independent runs of one algorithm on one problem as one tensor program:
each run has its own trace, seed and step sizes (η_l, η_g), every other hyper-parameter is
shared, and the state carries a leading batch axis (``algorithms.rounds``). Noise is keyed by
(seed, round, step, client) (``algorithms.noise``), so a run gives the same numbers alone or
in a batch of any size. ``run`` is a batch of one; ``iterate`` yields the states of one run.

A run stops with a report as soon as its model or a recorded value stops being finite; the
others go on. Round t hands the algorithm a :class:`~algorithms.rounds.Round`.
"""
from __future__ import annotations

from typing import Iterator

import numpy as np
import torch

from participation import Trace

from .base import Algorithm, template
from .devices import resolve_device
from .history import History
from .noise import NoiseStream
from .rounds import Round, run_of
from .schedules import checked_factor, local_rate_factor
from participation.budget import require_memory
from participation.validation import integer

__all__ = ["run", "run_batch", "iterate", "batch_key"]

#: Rounds whose noise is computed together (one Philox call), memory permitting.
PREFETCH_ROUNDS = 64


def _trace(trace, n_clients: int) -> Trace:
    if not isinstance(trace, Trace):
        try:
            trace = Trace(trace)
        except ValueError as err:
            raise ValueError(f"trace: {err}") from None
    if trace.n_clients != n_clients:
        raise ValueError(f"trace has {trace.n_clients} clients but the problem has {n_clients}")
    return trace


def _check_algorithm(algorithm) -> None:
    if not isinstance(algorithm, Algorithm):
        raise ValueError(f"algorithm must be an algorithms.Algorithm (see algorithms.get), got {type(algorithm).__name__}")


def _check_problem(problem) -> None:
    if not hasattr(problem, "n_clients") or not hasattr(problem, "to"):
        raise ValueError(f"problem must be an algorithms problem (algorithms.problems), got {type(problem).__name__}")


def _start(problem, x0) -> torch.Tensor:
    if x0 is None:   # the problem's own start (where its constants are taken), else zeros
        x0 = getattr(problem, "x0", None)
        x0 = torch.zeros(problem.dim) if x0 is None else x0
    try:
        x0 = x0.detach() if isinstance(x0, torch.Tensor) else torch.as_tensor(np.asarray(x0, dtype=np.float64))
    except (TypeError, ValueError) as err:
        raise ValueError(f"x0 must be a numeric vector ({err})") from None
    x0 = x0.to(device=problem.device, dtype=problem.dtype)
    if x0.shape != (problem.dim,):
        raise ValueError(f"x0 must have shape ({problem.dim},), got {tuple(x0.shape)}")
    if not torch.isfinite(x0).all():
        raise ValueError("x0 must be finite")
    return x0


def batch_key(algorithm: Algorithm) -> tuple:
    """What runs of one batch must share: the algorithm's class and every hyper-parameter but
    η_l and η_g."""
    return (type(algorithm),) + tuple((k, repr(v)) for k, v in algorithm.hparams.items() if k not in ("eta_l", "eta_g"))


def _batch_bytes(template_algorithm, problem, start: torch.Tensor, size: int, traces) -> int:
    """Bytes a batch holds at once, estimated before it is built: per run, the state of one run
    (measured on a batch of one) twice (a round's input and output) and three (N, d) blocks of a
    round's local models and gradients; per run and round, the stacked participation masks and
    the indices of the active rows."""
    state = template_algorithm.init(problem, start[None, :])
    per_run = sum(v.numel() * v.element_size() for v in vars(state).values() if isinstance(v, torch.Tensor))
    block = problem.n_clients * problem.dim * start.element_size()
    rounds, n = traces[0].n_rounds, problem.n_clients
    active = sum(int(t.mask.sum()) for t in traces) * (size if len(traces) == 1 else 1)
    return size * (2 * per_run + 3 * block + rounds * n) + 24 * active


def _as_list(value, name: str, n: int | None) -> list:
    items = list(value) if isinstance(value, (list, tuple, range)) else [value]
    if n is not None and len(items) not in (1, n):
        raise ValueError(f"{name}: {len(items)} given for a batch of {n} runs")
    return items


class _Batch:
    """The validated inputs of a batch: algorithms, traces (B, T, N), seeds, start points."""

    def __init__(self, algorithms, problem, traces, seeds, device, x0, dtype):
        algs = _as_list(algorithms, "algorithms", None)
        trs = _as_list(traces, "traces", None)
        sds = _as_list(seeds, "seeds", None)
        size = max(len(algs), len(trs), len(sds))
        for items, name in ((algs, "algorithms"), (trs, "traces"), (sds, "seeds")):
            if len(items) not in (1, size):
                raise ValueError(f"{name}: {len(items)} given for a batch of {size} runs")
        if not size:
            raise ValueError("a batch needs at least one run")
        for a in algs:
            _check_algorithm(a)
        keys = {batch_key(a) for a in algs}
        if len(keys) > 1:
            raise ValueError("the runs of one batch share the algorithm and every hyper-parameter but eta_l, eta_g; "
                             f"got {sorted({repr(a) for a in algs})[:2]}")
        _check_problem(problem)
        device = resolve_device(device)
        if device is not None or dtype is not None:
            problem = problem.to(device, dtype)
        self.problem = problem
        self.traces = [_trace(t, problem.n_clients) for t in trs]
        if len({t.n_rounds for t in self.traces}) > 1:
            raise ValueError(f"the traces of one batch must have the same number of rounds, got "
                             f"{sorted({t.n_rounds for t in self.traces})}")
        self.size = size
        start = _start(problem, x0)
        self.template = template(algs[0])
        require_memory(_batch_bytes(self.template, problem, start, size, self.traces),
                       f"a batch of {size} run{'s' if size > 1 else ''} of {algs[0].name} on {problem.n_clients} clients "
                       f"in dimension {problem.dim} over {self.traces[0].n_rounds} rounds")
        self.algorithms = algs * size if len(algs) == 1 else algs
        self.seeds = sds * size if len(sds) == 1 else sds
        self.noise = NoiseStream(self.seeds, problem.device)
        if len(self.traces) == 1:
            self.traces = self.traces * size
        self.n_rounds = self.traces[0].n_rounds
        self.x0 = start.expand(size, -1).clone()
        dtype, dev = problem.dtype, problem.device
        self.eta_l = torch.tensor([[a.eta_l] for a in self.algorithms], dtype=dtype, device=dev)
        self.eta_g = torch.tensor([[a.eta_g] for a in self.algorithms], dtype=dtype, device=dev)
        self._masks = [t.mask for t in self.traces]

    def round_rows(self):
        """Per round: (runs, clients, count per run) as tensors, computed for all rounds at once."""
        masks = np.stack(self._masks, axis=1)                       # (T, B, N)
        t_idx, b_idx, i_idx = np.nonzero(masks)
        starts = np.searchsorted(t_idx, np.arange(self.n_rounds + 1))
        dev = self.problem.device
        runs = torch.as_tensor(b_idx, dtype=torch.long, device=dev)
        clients = torch.as_tensor(i_idx, dtype=torch.long, device=dev)
        counts = torch.as_tensor(masks.sum(axis=2), dtype=self.problem.dtype, device=dev)   # (T, B)
        return [(runs[starts[t]:starts[t + 1]], clients[starts[t]:starts[t + 1]], counts[t])
                for t in range(self.n_rounds)]


def _noise_kind(problem):
    """(kind, width) of the draws one stochastic gradient takes, or None."""
    declare = getattr(problem, "noise_draws", None)
    return declare() if callable(declare) else None


def _rounds(batch: _Batch, factor) -> Iterator[Round]:
    problem, noise = batch.problem, batch.noise
    per_round = batch.round_rows()
    kind = _noise_kind(problem)
    steps = batch.algorithms[0].noise_steps
    covered = 0
    for t, (runs, clients, count) in enumerate(per_round):
        if kind is not None and t >= covered:
            block = [(s, per_round[s][0], per_round[s][1]) for s in range(t, min(t + PREFETCH_ROUNDS, batch.n_rounds))]
            covered = t + max(1, noise.prefetch(block, steps, kind[0], kind[1]))
        eta_l = batch.eta_l if factor is None else batch.eta_l * checked_factor(factor, t)
        yield Round(t=t, run=runs, client=clients, n_runs=batch.size, n_clients=problem.n_clients, count=count,
                    eta_l=eta_l, eta_g=batch.eta_g, noise=noise)


def iterate(algorithm: Algorithm, problem, trace, seed=0, device=None, x0=None, dtype=None,
            local_schedule=None) -> Iterator:
    """The states s_0, s_1, …, s_T of one run (s_t holds x_t, without the batch axis); same
    inputs as ``run``."""
    factor = local_rate_factor(local_schedule)
    batch = _Batch(algorithm, problem, trace, seed, device, x0, dtype)
    state = batch.template.init(batch.problem, batch.x0)
    yield run_of(state, 0)
    for r in _rounds(batch, factor):
        state = batch.template.round(state, batch.problem, r)
        yield run_of(state, 0)


_STOPS = ("", "params", "params", "loss", "grad_norm2", "accuracy")


def run_batch(algorithms, problem, traces, seeds=0, device=None, x0=None, record_every: int = 1,
              dtype=None, local_schedule=None, observe: bool = False) -> list[History]:
    """B runs as one program; returns their ``History`` in order.

    ``algorithms``, ``traces``, ``seeds``: one each, or a list of B (a single one is shared by
    every run). The algorithms must be of one class and agree on every hyper-parameter but
    ``eta_l`` and ``eta_g``; the traces must have the same number of rounds. Other arguments
    as in :func:`run`. Each returned History equals that of ``run`` on the same inputs.
    """
    factor = local_rate_factor(local_schedule)
    integer(record_every, "record_every")
    batch = _Batch(algorithms, problem, traces, seeds, device, x0, dtype)
    problem, B, T = batch.problem, batch.size, batch.n_rounds
    alg = batch.template
    dev = problem.device
    state = alg.init(problem, batch.x0)
    alive = torch.ones(B, dtype=torch.bool, device=dev)
    stop_round = torch.full((B,), T + 1, dtype=torch.long, device=dev)
    stop_kind = torch.zeros(B, dtype=torch.long, device=dev)
    final = batch.x0.clone()
    weighted = torch.zeros_like(batch.x0)
    weight = torch.zeros((B, 1), dtype=problem.dtype, device=dev)
    recorded, losses, grads, accs = [], [], [], []
    observed: dict[str, list] = {}
    rounds = _rounds(batch, factor)
    every_alive = True
    t = 0
    while True:
        x = state.x
        ok = torch.isfinite(x).all(dim=1)
        record = t < T and t % record_every == 0
        if record:
            if observe:
                _observe_problem(problem, x, observed)
            loss, grad = problem.loss_and_grad_batch(x)
            grad2 = grad.square().sum(dim=1)
            acc = problem.accuracy_batch(x)
            values = [loss, grad2] + ([acc] if acc is not None else [])
            recorded.append(t)
            losses.append(loss)
            grads.append(grad2)
            accs.append(acc)
            finite = torch.isfinite(torch.stack(values)).all(dim=0)
        if not bool(ok.all()) or (record and not bool(finite.all())):
            # rare: some run stops here (its model, or else a recorded value, stopped being finite)
            bad = alive & ~ok
            stop_round = torch.where(bad, t, stop_round)
            stop_kind = torch.where(bad, torch.where(torch.isnan(x).any(dim=1), 1, 2), stop_kind)
            alive = alive & ok
            if record:
                for code, value in enumerate(values, start=3):
                    bad = alive & ~torch.isfinite(value)
                    stop_round = torch.where(bad, t, stop_round)
                    stop_kind = torch.where(bad, code, stop_kind)
                    alive = alive & ~bad
            every_alive = bool(alive.all())
        final = x if every_alive else torch.where(alive[:, None], x, final)
        if t == T or not bool(alive.any()):
            break
        r = next(rounds)
        if every_alive:
            weighted = weighted + r.eta_l * x
            weight = weight + r.eta_l
        else:
            weighted = weighted + torch.where(alive[:, None], r.eta_l * x, 0.0)
            weight = weight + torch.where(alive[:, None], r.eta_l, 0.0)
        new = alg.round(state, problem, r)
        if observe:
            for name, value in alg.observe(state, new, problem, r).items():
                observed.setdefault(name, []).append(value)
        state = new
        t += 1
    return _histories(batch, record_every, recorded, losses, grads, accs, observed, final, weighted, weight,
                      stop_round, stop_kind)


def _observe_problem(problem, x: torch.Tensor, observed: dict) -> None:
    """Per recorded round: (1/N) Σ_i ‖∇f_i(x) − ∇f(x)‖², max_i of it and ‖x‖, per run."""
    G = problem.client_grads_batch(x)                          # (B, N, d)
    spread = (G - G.mean(dim=1, keepdim=True)).square().sum(dim=2)
    observed.setdefault("heterogeneity", []).append(spread.mean(dim=1))
    observed.setdefault("heterogeneity_max", []).append(spread.max(dim=1).values)
    observed.setdefault("param_norm", []).append(x.norm(dim=1))


def _numpy(x: torch.Tensor) -> np.ndarray:
    return x.detach().cpu().to(torch.float64).numpy()


def _per_run(values: list, b: int) -> np.ndarray | tuple:
    """Run b's entries of per-round observations ((B, ...) tensors or lists of B arrays)."""
    arrays = [np.asarray(v[b], dtype=np.float64) if isinstance(v, (list, tuple)) else _numpy(v[b]) for v in values]
    if len({a.shape for a in arrays}) <= 1:
        return np.stack(arrays) if arrays else np.zeros(0)
    return tuple(arrays)


def _histories(batch, record_every, recorded, losses, grads, accs, observed, final, weighted, weight,
               stop_round, stop_kind) -> list[History]:
    problem, T = batch.problem, batch.n_rounds
    rounds = np.asarray(recorded, dtype=np.int64)
    loss = _numpy(torch.stack(losses, dim=1)) if losses else np.zeros((batch.size, 0))
    grad2 = _numpy(torch.stack(grads, dim=1)) if grads else np.zeros((batch.size, 0))
    has_acc = bool(accs) and accs[0] is not None
    acc = _numpy(torch.stack(accs, dim=1)) if has_acc else None
    stop_round, stop_kind = stop_round.cpu().numpy(), stop_kind.cpu().numpy()
    final, averaged, weight = _numpy(final), _numpy(weighted / weight.clamp(min=torch.finfo(weight.dtype).tiny)), \
        _numpy(weight)[:, 0]
    out = []
    for b in range(batch.size):
        alg = batch.algorithms[b]
        end = int(stop_round[b])
        keep = rounds < end
        kind = int(stop_kind[b])
        stopped = None
        if kind in (1, 2):
            stopped = f"params became {'nan' if kind == 1 else 'inf'} at round {end}"
        elif kind:
            column = {3: loss, 4: grad2, 5: acc}[kind]
            at = int(np.searchsorted(rounds, end))
            stopped = f"{_STOPS[kind]} became {column[b, at]} at round {end}"
        executed = min(end, T)
        sizes = batch.traces[b].mask.sum(axis=1)[:executed]
        down = np.array([alg.communication(problem.dim, int(m))[0] for m in sizes], dtype=np.float64)
        up = np.array([alg.communication(problem.dim, int(m))[1] for m in sizes], dtype=np.float64)
        obs = {}
        for name, values in observed.items():
            if name in ("heterogeneity", "heterogeneity_max", "param_norm"):
                obs[name] = _per_run(values, b)[keep] if values else np.zeros(0)
            else:
                obs[name] = _per_run(values[:executed], b)
        out.append(History(
            algorithm=alg.name, hparams=alg.hparams, seed=batch.noise.entropies[b], rounds=rounds[keep],
            grad_norm2=grad2[b, keep], loss=loss[b, keep], accuracy=acc[b, keep] if acc is not None else None,
            uplink=up, downlink=down, final_params=final[b], stopped=stopped, n_rounds=T,
            averaged_params=averaged[b] if weight[b] > 0 else None, observed=obs,
            meta={"device": str(problem.device), "dtype": str(problem.dtype).replace("torch.", ""),
                  "record_every": int(record_every)}))
    return out


def run(algorithm: Algorithm, problem, trace, seed=0, device=None, x0=None, record_every: int = 1,
        dtype=None, local_schedule=None, observe: bool = False) -> History:
    """Run ``algorithm`` on ``problem`` for the T rounds of ``trace`` (a Trace or a (T, N) 0/1 mask).

    ``seed``: None, an int ≥ 0 or a numpy Generator (noise of round t, step k, client i comes
    from (seed, t, k, i)); ``device``/``dtype``: where and in which precision to run (default:
    the problem's); ``x0``: the start (default ``problem.x0`` where the problem has one, else
    zeros); ``record_every``: record rounds 0, r, 2r, … < T; ``local_schedule``: round t runs
    with η_l·factor(t) (None: constant; "sqrt": FedSUM §5's 1/√(t/10+1); or a callable, see
    ``algorithms.schedules``); ``observe``: also record what the theorems of other papers measure
    (``History.observed``): per recorded round the client heterogeneity (1/N) Σ_i ‖∇f_i(x_t) −
    ∇f(x_t)‖², max_i ‖∇f_i(x_t) − ∇f(x_t)‖² and ‖x_t‖, and per round what the algorithm's
    ``observe`` reports (LOGIT's generator error, autonomous clients' local steps and delays,
    CA-Fed's weights). Returns a ``History``; its ``averaged_params`` is the step-weighted
    average Σ_t η_t x_t / Σ_t η_t over t < T, η_t the local step size of round t.
    A batch of one of :func:`run_batch`.
    """
    if isinstance(seed, (list, tuple)):
        raise ValueError("seed must be one seed; run_batch runs several")
    return run_batch(algorithm, problem, trace, seed, device=device, x0=x0, record_every=record_every, dtype=dtype,
                     local_schedule=local_schedule, observe=observe)[0]
