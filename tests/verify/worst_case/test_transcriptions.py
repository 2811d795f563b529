"""The transcriptions of ``verify.worst_case`` are the engine's algorithms.

The worst-case programme is built by running a transcription on PEPit's symbolic points, so a
worst case is the worst case of the engine's algorithm only if the transcription performs the
engine's arithmetic. Run on numpy vectors with the exact gradients A_i (x − b_i) of a noise-free
quadratic, every transcription must give the global iterates of ``algorithms.engine.iterate`` to
1e-12 relative, on traces with full and partial participation and with empty rounds (the
algorithms differ in what an empty round does), for K = 1 and K = 3.
"""
from __future__ import annotations

import numpy as np
import pytest

import algorithms
from algorithms.engine import iterate
from algorithms.problems import Quadratic
from verify.worst_case import SUPPORTED, iterates
from verify.worst_case import transcriptions

N_CLIENTS, DIM = 3, 4


def _mask(sets, n=N_CLIENTS):
    mask = np.zeros((len(sets), n), dtype=bool)
    for t, active in enumerate(sets):
        mask[t, list(active)] = True
    return mask


TRACES = {
    "full": _mask([[0, 1, 2]] * 5),
    "random": np.random.default_rng(7).random((6, N_CLIENTS)) < 0.5,
    "cyclic": _mask([[t % N_CLIENTS] for t in range(6)]),
    "empty-rounds": _mask([[], [0, 1], [], [], [2], [0, 1, 2], [1]]),
}

#: (label, registered name, hyper-parameters besides the step sizes and K)
ALGORITHMS = [
    ("fedsum-b", "fedsum-b", {}),
    ("fedsum", "fedsum", {}),
    ("fedsum-cr", "fedsum-cr", {}),
    ("fedavg-active", "fedavg", {"aggregate": "active"}),
    ("fedavg-all", "fedavg", {"aggregate": "all"}),
    ("scaffold", "scaffold", {}),
    ("fedgm", "fedgm", {"beta": 0.6, "nu": 0.7}),
    ("qhm", "qhm", {}),
    ("fedavgm", "fedavgm", {"beta": 0.8}),
    ("fednag", "fednag", {"beta": 0.8}),
]


def make_algorithm(name: str, local_steps: int, **extra):
    return algorithms.get(name, eta_l=0.3, eta_g=0.9, local_steps=local_steps, **extra)


def make_problem(seed: int = 0) -> Quadratic:
    return Quadratic.random(N_CLIENTS, DIM, heterogeneity=1.0, noise_std=0.0, seed=seed)


def transcription_mismatch(algorithm, problem: Quadratic, mask: np.ndarray, x0: np.ndarray,
                           rtol: float = 1e-12) -> str | None:
    """None when ``verify.worst_case.iterates`` with the gradients A_i (x − b_i) gives the model x
    of every state of ``algorithms.engine.iterate`` (seed 0, start ``x0``) to ``rtol`` relative
    (to max(1, ‖x_t‖)); otherwise a sentence naming the first iterate that differs."""
    A, b = problem.A.numpy(), problem.b.numpy()

    def grad(i, x):
        return A[i] @ (x - b[i])

    sets = [np.flatnonzero(row).tolist() for row in mask]
    ours = iterates(algorithm, sets, grad, np.array(x0, dtype=np.float64), problem.n_clients)
    engine = [state.x.numpy() for state in iterate(algorithm, problem, mask, seed=0, x0=x0)]
    if len(ours) != len(engine):
        return f"{len(ours)} transcribed iterates, {len(engine)} engine states"
    for t, (mine, theirs) in enumerate(zip(ours, engine)):
        error = float(np.linalg.norm(mine - theirs))
        scale = max(1.0, float(np.linalg.norm(theirs)))
        if not error <= rtol * scale:
            return f"x_{t}: |transcription - engine| = {error:.3g} at |x_t| = {scale:.3g}"
    return None


def test_every_supported_algorithm_is_compared():
    """The comparison below covers every name of SUPPORTED, so a newly transcribed algorithm cannot
    go unchecked against the engine."""
    assert {name for _, name, _ in ALGORITHMS} == set(SUPPORTED)


def test_traces_include_empty_rounds():
    """The traces hold an empty first round and consecutive empty rounds, where the algorithms'
    conventions differ (FedSUM steps, the others keep x)."""
    empty = ~TRACES["empty-rounds"].any(axis=1)
    assert empty[0] and (empty[1:] & empty[:-1]).any()


@pytest.mark.parametrize("trace", sorted(TRACES))
@pytest.mark.parametrize("local_steps", [1, 3])
@pytest.mark.parametrize("label,name,extra", ALGORITHMS, ids=[a[0] for a in ALGORITHMS])
def test_transcription_equals_the_engine(label, name, extra, local_steps, trace):
    """The transcription's iterates are the engine's, to 1e-12 relative, on a random noise-free
    quadratic from a random start."""
    problem = make_problem(seed=local_steps)
    x0 = np.random.default_rng(3).standard_normal(DIM)
    algorithm = make_algorithm(name, local_steps, **extra)
    assert transcription_mismatch(algorithm, problem, TRACES[trace], x0) is None


def _doubled_step(original):
    def local_sgd(x, grad, i, eta, steps, correction=None):
        return original(x, grad, i, 2 * eta, steps, correction)
    return local_sgd


def _flipped_correction(original):
    def local_sgd(x, grad, i, eta, steps, correction=None):
        return original(x, grad, i, eta, steps, None if correction is None else -1.0 * correction)
    return local_sgd


def _server_idle_on_empty_rounds(original):
    """FedSUM whose server skips the rounds with S_t = ∅ (the engine steps in every round)."""
    def family(kind, alg, sets, grad, x0, n):
        busy = original(kind, alg, [s for s in sets if s], grad, x0, n)
        xs, done = [x0], 0
        for s in sets:
            done += bool(s)
            xs.append(busy[done])
        return xs
    return family


#: (label, transcriptions attribute, wrapper, algorithm label, trace)
MUTANTS = [
    ("local step doubled: fedavg", "_local_sgd", _doubled_step, "fedavg-active", "random"),
    ("local step doubled: fedsum", "_local_sgd", _doubled_step, "fedsum", "full"),
    ("local step doubled: fedgm", "_local_sgd", _doubled_step, "fedgm", "cyclic"),
    ("correction sign flipped: fedsum", "_local_sgd", _flipped_correction, "fedsum", "full"),
    ("correction sign flipped: fedsum-cr", "_local_sgd", _flipped_correction, "fedsum-cr", "cyclic"),
    ("correction sign flipped: scaffold", "_local_sgd", _flipped_correction, "scaffold", "random"),
    ("server idle on empty rounds: fedsum-b", "_fedsum_family", _server_idle_on_empty_rounds, "fedsum-b",
     "empty-rounds"),
]


@pytest.mark.parametrize("label,attribute,wrapper,algorithm,trace", MUTANTS, ids=[m[0] for m in MUTANTS])
def test_a_wrong_transcription_is_caught(monkeypatch, label, attribute, wrapper, algorithm, trace):
    """The comparison of ``test_transcription_equals_the_engine`` reports a mismatch when the
    transcription is deliberately wrong (a step size doubled, the sign of a correction flipped, a
    server step skipped on empty rounds), and none for the same case without the fault."""
    _, name, extra = next(a for a in ALGORITHMS if a[0] == algorithm)
    alg = make_algorithm(name, 3 if name != "fedsum-b" else 1, **extra)
    problem, mask = make_problem(seed=5), TRACES[trace]
    x0 = np.random.default_rng(3).standard_normal(DIM)
    assert transcription_mismatch(alg, problem, mask, x0) is None
    monkeypatch.setattr(transcriptions, attribute, wrapper(getattr(transcriptions, attribute)))
    found = transcription_mismatch(alg, problem, mask, x0)
    assert found is not None and "transcription - engine" in found
