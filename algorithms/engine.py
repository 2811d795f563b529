"""Run an algorithm on a problem along a participation trace.

``iterate`` yields the states s_0 (before round 0), s_1, …, s_T; ``run`` records the metrics
of x_0 … x_{T−1} (every ``record_every``-th round), the floats communicated per round and
x_T, and stops with a report as soon as a recorded value or the model stops being finite.
Round t hands the algorithm S_t as a sorted long tensor and the generators of (seed, t, k)
(``noise.NoiseStream``).
"""
from __future__ import annotations

import dataclasses
import numbers
from typing import Iterator

import numpy as np
import torch

from participation import Trace

from .devices import resolve_device
from .base import Algorithm
from .history import History
from .noise import NoiseStream
from .schedules import checked_factor, local_rate_factor

__all__ = ["run", "iterate", "prepare"]


def _trace(trace, n_clients: int) -> Trace:
    if not isinstance(trace, Trace):
        try:
            trace = Trace(trace)
        except ValueError as err:
            raise ValueError(f"trace: {err}") from None
    if trace.n_clients != n_clients:
        raise ValueError(f"trace has {trace.n_clients} clients but the problem has {n_clients}")
    return trace


def prepare(algorithm, problem, trace, device=None, x0=None, dtype=None):
    """Validate the inputs of a run; returns (problem on device/dtype, Trace, x0 tensor)."""
    if not isinstance(algorithm, Algorithm):
        raise ValueError(f"algorithm must be an algorithms.Algorithm (see algorithms.get), got {type(algorithm).__name__}")
    if not hasattr(problem, "n_clients") or not hasattr(problem, "to"):
        raise ValueError(f"problem must be an algorithms problem (algorithms.problems), got {type(problem).__name__}")
    device = resolve_device(device)
    if device is not None or dtype is not None:
        problem = problem.to(device, dtype)
    trace = _trace(trace, problem.n_clients)
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
    return problem, trace, x0


def iterate(algorithm: Algorithm, problem, trace, seed=0, device=None, x0=None, dtype=None,
            local_schedule=None) -> Iterator:
    """The states s_0, s_1, …, s_T of a run (s_t holds x_t); same inputs as ``run``."""
    factor = local_rate_factor(local_schedule)
    problem, trace, x0 = prepare(algorithm, problem, trace, device, x0, dtype)
    noise = NoiseStream(seed, problem.device)
    yield from _states(algorithm, problem, trace, x0, noise, factor)


def _states(algorithm, problem, trace, x0, noise, factor=None) -> Iterator:
    for state, _ in _transitions(algorithm, problem, trace, x0, noise, factor):
        yield state


def _transitions(algorithm, problem, trace, x0, noise, factor=None) -> Iterator:
    """(s_0, None), then (s_{t+1}, (s_t, S_t, the algorithm as run in round t)) for t < T."""
    state = algorithm.init(problem, x0)
    yield state, None
    for t in range(trace.n_rounds):
        active = torch.as_tensor(np.flatnonzero(trace.mask[t]), dtype=torch.long, device=problem.device)
        at_t = algorithm if factor is None else dataclasses.replace(algorithm, eta_l=algorithm.eta_l * checked_factor(factor, t))
        new = at_t.round(state, problem, active, t, noise.for_round(t))
        yield new, (state, active, at_t)
        state = new


def run(algorithm: Algorithm, problem, trace, seed=0, device=None, x0=None, record_every: int = 1,
        dtype=None, local_schedule=None, observe: bool = False) -> History:
    """Run ``algorithm`` on ``problem`` for the T rounds of ``trace`` (a Trace or a (T, N) 0/1 mask).

    ``seed``: None, an int ≥ 0 or a numpy Generator (noise of round t, step k comes from
    (seed, t, k)); ``device``/``dtype``: where and in which precision to run (default: the
    problem's); ``x0``: the start (default ``problem.x0`` where the problem has one, else zeros); ``record_every``: record rounds
    0, r, 2r, … < T; ``local_schedule``: round t runs with η_l·factor(t) (None: constant; "sqrt":
    FedSUM §5's 1/√(t/10+1); or a callable, see ``algorithms.schedules``); ``observe``: also record
    what the theorems of other papers measure (``History.observed``): per recorded round the client
    heterogeneity (1/N) Σ_i ‖∇f_i(x_t) − ∇f(x_t)‖², max_i ‖∇f_i(x_t) − ∇f(x_t)‖² and ‖x_t‖, and per round
    what the algorithm's ``observe`` reports (LOGIT's generator error, autonomous clients' local
    steps and delays, CA-Fed's weights). Returns a ``History``; its ``averaged_params`` is the
    step-weighted average Σ_t η_t x_t / Σ_t η_t over t < T, η_t the local step size of round t.
    """
    factor = local_rate_factor(local_schedule)
    if isinstance(record_every, bool) or not isinstance(record_every, numbers.Integral) or record_every < 1:
        raise ValueError(f"record_every must be an integer ≥ 1, got {record_every!r}")
    problem, trace, x0 = prepare(algorithm, problem, trace, device, x0, dtype)
    noise = NoiseStream(seed, problem.device)
    rounds, grad2, losses, accs = [], [], [], []
    stopped, final = None, x0
    observed: dict[str, list] = {}
    weighted, weight = torch.zeros_like(x0), 0.0
    for t, (state, step) in enumerate(_transitions(algorithm, problem, trace, x0, noise, factor)):
        executed = t                                   # rounds run so far
        if step is not None:
            before, active, at_t = step
            weighted, weight = weighted + at_t.eta_l * before.x, weight + at_t.eta_l
            if observe:
                for name, value in at_t.observe(before, state, problem, active, t - 1).items():
                    observed.setdefault(name, []).append(value)
        if not torch.isfinite(state.x).all():
            stopped = f"params became {_bad(state.x)} at round {t}"
            break
        final = state.x
        if t == trace.n_rounds or t % record_every:
            continue
        if observe:
            G = problem.client_grads(state.x)
            spread = (G - G.mean(dim=0)).square().sum(dim=1)
            observed.setdefault("heterogeneity", []).append(float(spread.mean()))
            observed.setdefault("heterogeneity_max", []).append(float(spread.max()))
            observed.setdefault("param_norm", []).append(float(state.x.norm()))
        values = {"loss": float(problem.loss(state.x)), "grad_norm2": float(problem.full_grad(state.x).square().sum()),
                  "accuracy": problem.accuracy(state.x)}
        bad = [name for name, v in values.items() if v is not None and not np.isfinite(v)]
        if bad:
            stopped = f"{bad[0]} became {values[bad[0]]} at round {t}"
            break
        rounds.append(t)
        losses.append(values["loss"])
        grad2.append(values["grad_norm2"])
        accs.append(values["accuracy"])
    sizes = trace.mask.sum(axis=1)[:executed]
    down = np.array([algorithm.communication(problem.dim, int(m))[0] for m in sizes], dtype=np.float64)
    up = np.array([algorithm.communication(problem.dim, int(m))[1] for m in sizes], dtype=np.float64)
    has_acc = any(a is not None for a in accs)
    return History(algorithm=algorithm.name, hparams=algorithm.hparams, seed=noise.entropy,
                   rounds=np.array(rounds, dtype=np.int64), grad_norm2=np.array(grad2, dtype=np.float64),
                   loss=np.array(losses, dtype=np.float64),
                   accuracy=np.array([np.nan if a is None else a for a in accs], dtype=np.float64) if has_acc else None,
                   uplink=up, downlink=down, final_params=final.detach().cpu().to(torch.float64).numpy(),
                   stopped=stopped, n_rounds=trace.n_rounds,
                   averaged_params=(weighted / weight).detach().cpu().to(torch.float64).numpy() if weight > 0 else None,
                   observed={name: _stack(values) for name, values in observed.items()},
                   meta={"device": str(problem.device), "dtype": str(problem.dtype).replace("torch.", ""),
                         "record_every": int(record_every)})


def _stack(values: list):
    """Per-round observations as one float64 array (T, ...) when their shapes agree, else a tuple of arrays."""
    arrays = [v.detach().cpu().to(torch.float64).numpy() if isinstance(v, torch.Tensor) else np.asarray(v, dtype=np.float64)
              for v in values]
    if len({a.shape for a in arrays}) <= 1:
        return np.stack(arrays) if arrays else np.zeros(0)
    return tuple(arrays)


def _bad(x: torch.Tensor) -> str:
    return "nan" if torch.isnan(x).any() else "inf"
