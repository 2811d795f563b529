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
    state = algorithm.init(problem, x0)
    yield state
    for t in range(trace.n_rounds):
        active = torch.as_tensor(np.flatnonzero(trace.mask[t]), dtype=torch.long, device=problem.device)
        at_t = algorithm if factor is None else dataclasses.replace(algorithm, eta_l=algorithm.eta_l * checked_factor(factor, t))
        state = at_t.round(state, problem, active, t, noise.for_round(t))
        yield state


def run(algorithm: Algorithm, problem, trace, seed=0, device=None, x0=None, record_every: int = 1,
        dtype=None, local_schedule=None) -> History:
    """Run ``algorithm`` on ``problem`` for the T rounds of ``trace`` (a Trace or a (T, N) 0/1 mask).

    ``seed``: None, an int ≥ 0 or a numpy Generator (noise of round t, step k comes from
    (seed, t, k)); ``device``/``dtype``: where and in which precision to run (default: the
    problem's); ``x0``: the start (default ``problem.x0`` where the problem has one, else zeros); ``record_every``: record rounds
    0, r, 2r, … < T; ``local_schedule``: round t runs with η_l·factor(t) (None: constant; "sqrt":
    FedSUM §5's 1/√(t/10+1); or a callable, see ``algorithms.schedules``). Returns a ``History``.
    """
    factor = local_rate_factor(local_schedule)
    if isinstance(record_every, bool) or not isinstance(record_every, numbers.Integral) or record_every < 1:
        raise ValueError(f"record_every must be an integer ≥ 1, got {record_every!r}")
    problem, trace, x0 = prepare(algorithm, problem, trace, device, x0, dtype)
    noise = NoiseStream(seed, problem.device)
    rounds, grad2, losses, accs = [], [], [], []
    stopped, final = None, x0
    for t, state in enumerate(_states(algorithm, problem, trace, x0, noise, factor)):
        executed = t                                   # rounds run so far
        if not torch.isfinite(state.x).all():
            stopped = f"params became {_bad(state.x)} at round {t}"
            break
        final = state.x
        if t == trace.n_rounds or t % record_every:
            continue
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
                   meta={"device": str(problem.device), "dtype": str(problem.dtype).replace("torch.", ""),
                         "record_every": int(record_every)})


def _bad(x: torch.Tensor) -> str:
    return "nan" if torch.isnan(x).any() else "inf"
