"""Monte-Carlo estimates of E[τ_max] and E[τ_avg] for any participation pattern.

Replicate r is the trace ``pattern.sample_batch(rounds, 1, seed, first_replicate=r)``:
its randomness is keyed by (seed, r) alone, so the result is the same whatever the chunk
size, the executor or its number of workers, and any replicate can be regenerated on
its own. Each chunk of replicates is generated in one vectorised call and its delays
computed by the bit-packed kernel of :func:`participation.delays.per_round_delay`. The
specialised samplers (``SAMPLERS``: "gaps", "shifts", "epochs", "subsets", "cycles") key their
own streams by (seed, r) in the same way; each implements :class:`.sampler.Sampler`, and
``monte_carlo`` reaches them only through it.
"""
from __future__ import annotations

import warnings
from concurrent.futures import Executor
from dataclasses import dataclass, field

import math

import numpy as np
from scipy import stats

from .._random import BLOCK, seed_sequence
from ..delays import per_round_delay
from ..patterns import Pattern
from ..patterns.base import require_pattern
from ..budget import require_memory
from .samplers import cycles as _cycles
from .samplers import epochs as _epochs
from .samplers import gaps as _gaps
from .samplers import markov_gaps as _markov_gaps
from .samplers import periodic as _periodic
from .samplers import shifts as _shifts
from .samplers import subsets as _subsets
from .samplers import varying_gaps as _varying_gaps
from .samplers.sampler import CHUNK_CELLS, Sampler
from ..validation import integer


@dataclass(frozen=True)
class Estimate:
    """A Monte-Carlo mean with its standard error, a two-sided ``confidence`` interval
    (Student t on reps − 1 degrees of freedom) and sample quantiles."""

    mean: float
    stderr: float
    ci_low: float
    ci_high: float
    quantiles: dict[float, float]
    confidence: float

    @classmethod
    def from_samples(cls, samples: np.ndarray, confidence: float, quantiles) -> "Estimate":
        samples = np.asarray(samples, dtype=float)
        mean = float(samples.mean())
        stderr = float(samples.std(ddof=1) / np.sqrt(samples.size)) if samples.size > 1 else float("nan")
        half = float(stats.t.ppf(0.5 + confidence / 2, samples.size - 1) * stderr) if samples.size > 1 else float("nan")
        qs = {float(q): float(v) for q, v in zip(quantiles, np.quantile(samples, quantiles))}
        return cls(mean, stderr, mean - half, mean + half, qs, confidence)

    def __str__(self) -> str:
        if math.isnan(self.stderr):
            return f"{self.mean:.4g} (one replicate: no standard error or interval)"
        return f"{self.mean:.4g} ± {self.stderr:.2g} ({self.confidence:.0%} CI [{self.ci_low:.4g}, {self.ci_high:.4g}])"


@dataclass(frozen=True)
class MonteCarloResult:
    tau_max: Estimate
    tau_avg: Estimate
    reps: int
    rounds: int
    samples: dict[str, np.ndarray] | None = field(default=None, repr=False)
    #: The method that drew the replicates ("auto" resolved: "gaps", "shifts", "subsets", ...).
    method: str = "trace"


def _raise_allocator_threshold() -> None:
    """Free one 16 MiB block. glibc's malloc hands blocks above a threshold (128 KiB at start)
    back to the system as soon as they are freed, and raises the threshold to the size of such a
    block (up to 32 MiB) once one is freed: afterwards each chunk's arrays reuse memory instead of
    being page-faulted in again. Elsewhere it costs one allocation."""
    np.empty(1 << 24, dtype=np.uint8)


# ---------------------------------------------------------------------------- whole traces


@dataclass(frozen=True)
class _Traces:
    """What method "trace" draws from: the pattern's own traces, their delays computed on
    ``device`` (a torch device) or with numpy (None)."""

    pattern: Pattern
    device: object = None


class _TraceSampler(Sampler):
    """Method "trace": whole traces from ``pattern.sample_batch``, for any pattern (replicate r
    is exactly the trace ``sample_batch(..., first_replicate=r)``). About ``CHUNK_CELLS`` cells
    a chunk; a chunk larger than that streams its traces a window of rounds at a time; a
    deterministic pattern's one trace serves every replicate."""

    method, needs = "trace", "a pattern"

    def applies(self, pattern, rounds, *, auto, device=None):
        return _Traces(pattern, device)

    def chunk_size(self, law, rounds, reps):
        pattern = law.pattern
        if pattern.deterministic:
            return reps
        return max(1, CHUNK_CELLS // (rounds * pattern.n_clients))

    def chunk_bytes(self, law, rounds, count):
        pattern = law.pattern
        n = pattern.n_clients
        if pattern.deterministic:
            count = 1  # one replicate's trace, whatever the chunk
        if law.device is None and streamed(pattern, rounds, count):
            # streamed: one window of masks (1 byte a cell), its a_{i,t} (4), the uniforms of a block, the carry
            return stream_window(n, count) * n * count * (1 + 4 + 8) + count * BLOCK * n * 8 + count * n * 8
        # the masks of a chunk, their uniforms (one block of rounds) and the delay kernel's packed copies
        return count * rounds * (n + 32 * -(-n // 64) + 16) + count * BLOCK * n * 8

    def draw_chunk(self, law, rounds, root, first, count, on_window=None):
        pattern, device = law.pattern, law.device
        if pattern.deterministic and count > 1:  # every replicate is the same trace
            tau_max, tau_avg = self.draw_chunk(law, rounds, root, first, 1, on_window)
            return np.repeat(tau_max, count), np.repeat(tau_avg, count)
        if device is not None:
            from .samplers._torch_delay import generate, per_round_delay_torch

            tau = per_round_delay_torch(generate(pattern, rounds, root, first, count, device), device)
        elif rounds * pattern.n_clients * count > CHUNK_CELLS:
            return _streamed_trace_delays(pattern, rounds, root, first, count, on_window)
        else:
            tau = per_round_delay(_batch(pattern, rounds, count, root, first_replicate=first))
        return tau.max(axis=1), tau.mean(axis=1)

    def streams_windows(self, law, rounds, size):
        return law.device is None and _streams_windows(law.pattern, rounds, size)


#: Method "trace", which "auto" falls back on when no sampler of ``SAMPLERS`` applies.
TRACE = _TraceSampler()


def _batch(pattern: Pattern, rounds: int, count: int, root, **where) -> np.ndarray:
    """``pattern.sample_batch`` checked to be what it promises (a user's pattern may not be): a
    bool array (count, rounds, n_clients)."""
    mask = pattern.sample_batch(rounds, count, root, **where)
    want = (count, rounds, pattern.n_clients)
    if not isinstance(mask, np.ndarray) or mask.shape != want or mask.dtype != bool:
        got = f"shape {getattr(mask, 'shape', None)}, dtype {getattr(mask, 'dtype', type(mask).__name__)}"
        raise ValueError(f"{type(pattern).__name__}.sample_batch returned {got}; it must return a bool array "
                         f"of shape {want} (replicates, rounds, clients)")
    return mask


def stream_window(n_clients: int, count: int = 1) -> int:
    """Rounds per window when the traces of a chunk are too large to hold at once: a
    multiple of ``BLOCK`` with at most ``CHUNK_CELLS`` cells per window (at least one block)."""
    return max(BLOCK, CHUNK_CELLS // (n_clients * count) // BLOCK * BLOCK)


def streamed(pattern: Pattern, rounds: int, count: int) -> bool:
    """Whether method "trace" streams the traces of a chunk of ``count`` replicates in windows."""
    return rounds * pattern.n_clients * count > CHUNK_CELLS


def _streams_windows(pattern: Pattern, rounds: int, size: int) -> bool:
    """Whether a chunk of ``size`` replicates of method "trace" streams windows of rounds (one
    trace for a deterministic pattern, whatever the chunk)."""
    return streamed(pattern, rounds, 1 if pattern.deterministic else size)


def _streamed_trace_delays(pattern: Pattern, rounds: int, root, first: int, count: int, on_window=None):
    """τ_max and τ_avg of replicates first..first+count−1, their traces generated and consumed
    a window of rounds at a time (``pattern.sample_batch(..., start=)`` gives the same rounds
    as one call), carrying a_{i,t} (FedSUM eqs. (2)–(3)) across windows: memory O(N·count +
    one window) instead of O(T·N·count), the same numbers as the whole traces. ``on_window``
    (if given) is called with the number of rounds of each window once it is done."""
    n = pattern.n_clients
    window = stream_window(n, count)
    last = np.full((count, n), -1, dtype=np.int32)
    tau_max = np.zeros(count, dtype=np.int64)
    tau_sum = np.zeros(count, dtype=np.int64)
    for start in range(0, rounds, window):
        stop = min(rounds, start + window)
        mask = _batch(pattern, stop - start, count, root, start=start, first_replicate=first)
        t = np.arange(start, stop, dtype=np.int32)
        a = np.where(mask, t[None, :, None], np.int32(-1))
        del mask
        np.maximum(a[:, 0], last, out=a[:, 0])
        np.maximum.accumulate(a, axis=1, out=a)
        tau = t[None, :].astype(np.int64) - a.min(axis=2)
        np.maximum(tau_max, tau.max(axis=1), out=tau_max)
        tau_sum += tau.sum(axis=1)
        last = a[:, -1].copy()
        if on_window is not None:
            on_window(stop - start)
    return tau_max, tau_sum / rounds


#: The specialised samplers, in the order "auto" tries them (the first that applies draws;
#: ``TRACE`` when none does). An explicit ``method`` takes the first of its own that applies.
SAMPLERS = (_gaps.SAMPLER, _markov_gaps.SAMPLER, _periodic.SAMPLER, _varying_gaps.SAMPLER, _shifts.SAMPLER,
            _epochs.SAMPLER, _subsets.SAMPLER, _cycles.SAMPLER)

#: The values of ``monte_carlo``'s ``method``: "auto", "trace", then each sampler's method once.
METHODS = ("auto", TRACE.method, *dict.fromkeys(sampler.method for sampler in SAMPLERS))


def clear_table_caches() -> None:
    """Forget the tables the samplers keep between calls (gap laws and plans, Markov plans, the
    reshuffled chain's CDFs, the periodic laws), so that the next call builds them again: what
    a first call costs."""
    for sampler in (*SAMPLERS, TRACE):
        sampler.clear_caches()


def _draw(job, on_window=None):
    """(τ_max, τ_avg) of one chunk: ``job`` is (sampler, law, rounds, root, first, count)."""
    sampler, law, rounds, root, first, count = job
    _raise_allocator_threshold()
    return sampler.draw_chunk(law, rounds, root, first, count, on_window)


def _run_chunk(job):
    return _draw(job)


#: With a target precision, the replicate counts at which the standard errors are looked at:
#: FIRST_CHECK, 2·FIRST_CHECK, 4·FIRST_CHECK, … (fixed, so the stopping point, and hence the
#: result, does not depend on the chunk size or the workers).
FIRST_CHECK = 64


def _choose(pattern: Pattern, rounds: int, method: str, device):
    """(sampler, law) that draws for ``method``: for "auto" the first of ``SAMPLERS`` that
    applies, else ``TRACE``; for a named method the first of its samplers that applies (a
    one-line ValueError, the method's needs, where none does)."""
    auto = method == "auto"
    named = [sampler for sampler in (*SAMPLERS, TRACE) if auto or sampler.method == method]
    for sampler in named:
        law = sampler.applies(pattern, rounds, auto=auto, device=device)
        if law is not None:
            return sampler, law
    raise ValueError(named[0].refusal())


def monte_carlo(pattern: Pattern, rounds: int, reps: int | None = None, seed=None, *, target_stderr: float | None = None,
                max_reps: int = 1 << 20, executor: Executor | None = None,
                chunk_size: int | None = None, device=None, confidence: float = 0.95,
                quantiles=(0.05, 0.5, 0.95), keep_samples: bool = False, progress: bool | None = None,
                method: str = "auto", stderr: float | None = None, _first: int = 0) -> MonteCarloResult:
    """Estimate E[τ_max] and E[τ_avg] over ``reps`` independent traces of ``rounds`` rounds.

    ``target_stderr`` (instead of ``reps``): run until the standard errors of both estimates are at
    most this, looking at them after 64, 128, 256, … replicates (at most ``max_reps``; reaching it
    first is a ValueError that names the precision reached). The checkpoints are fixed, so the
    same seed gives the same replicates and the same answer whatever the chunking or the number
    of workers; the progress bar shows the current estimates and their standard errors.

    ``stderr`` is ``target_stderr``'s deprecated name (a DeprecationWarning; it goes in the next release).

    ``executor`` (any ``concurrent.futures.Executor``) runs chunks of replicates in
    parallel; ``device`` (a torch device, e.g. ``"cuda"``) computes the delays with torch.
    ``keep_samples`` adds the per-replicate τ_max and τ_avg; ``progress`` shows a bar
    (default: when more than one chunk is run).

    ``method`` (the samplers, :data:`SAMPLERS`, each in its own module; ``fedverify bench``
    measures each against whole traces):

    ============  ===========================================  ==========================================
    method        applies to                                    draws
    ============  ===========================================  ==========================================
    ``trace``     every pattern                                 whole traces, ``pattern.sample_batch``
                                                                (replicate r is ``sample_batch(...,
                                                                first_replicate=r)``)
    ``gaps``      independent clients (constant, periodic or    each client's long absences exactly, the
                  time-varying p) and ``Markov`` chains         short gaps where they matter (:mod:`.samplers.gaps`,
                                                                :mod:`.samplers.markov_gaps`, :mod:`.samplers.periodic`,
                                                                :mod:`.samplers.varying_gaps`); same law
    ``epochs``    ``ReshuffledCyclic``                          each epoch's order only (:mod:`.samplers.epochs`);
                                                                the replicates of ``trace``
    ``shifts``    ``ReshuffledCyclic``, every client once an    E − 1 values an epoch from an exact Markov
                  epoch                                         chain (:mod:`.samplers.shifts`); same law
    ``subsets``   ``Uniform`` (FedSUM Case 1)                   the S ids of each round, O(T·S) a
                                                                replicate (:mod:`.samplers.subsets`); same law
    ``cycles``    ``OnOffCycles``                               each client's phase, O(N + C) a replicate
                                                                (:mod:`.samplers.cycles`); the replicates of
                                                                ``trace``
    ``auto``      every pattern                                 the first sampler of :data:`SAMPLERS` that
                                                                applies, else ``trace``
    ============  ===========================================  ==========================================

    Every sampler but ``trace`` runs on the CPU and refuses a ``device``. ``auto`` takes a
    periodic ``gaps`` only within ``samplers.periodic.MAX_PHASE_ROWS`` rows and
    ``samplers.periodic.AUTO_STEPS_PER_ROUND`` steps a round, and a time-varying one only
    within ``samplers.varying_gaps.VARYING_AUTO_DENSITY`` points a cell,
    ``samplers.varying_gaps.VARYING_AUTO_GROUPS`` distinct sequences and half the memory limit.
    A deterministic pattern (``pattern.deterministic``: Cyclic, Replay, OnOffCycles with fixed
    phases, ...) has one trace, whose delays are computed once and serve every replicate.

    The memory of the results (``RESULT_BYTES`` a replicate) and of one chunk is estimated
    before anything is drawn; more than ``participation.budget.memory_limit()``
    (``FEDVERIFY_MEMORY_GB``, else half the machine's memory) is refused with a one-line
    ValueError. :func:`check_monte_carlo` makes these checks without drawing.
    """
    require_pattern(pattern)
    if executor is not None and not callable(getattr(executor, "submit", None)):
        raise TypeError(f"executor must be a concurrent.futures.Executor (or None), got {type(executor).__name__}")
    rounds = _check_rounds(pattern, rounds)
    if stderr is not None:
        warnings.warn("monte_carlo(stderr=) is named target_stderr= (a target precision, not a result); "
                      "stderr= goes in the next release", DeprecationWarning, stacklevel=2)
        if target_stderr is not None:
            raise ValueError("give target_stderr only (stderr is its deprecated name)")
        target_stderr = stderr
    if target_stderr is not None:
        if reps is not None:
            raise ValueError("give reps or target_stderr, not both")
        if (isinstance(target_stderr, bool) or not isinstance(target_stderr, (int, float))
                or not 0 < target_stderr < float("inf")):
            raise ValueError(f"target_stderr must be a positive number, got {target_stderr!r}")
        max_reps = integer(max_reps, "max_reps")
        if max_reps < 2:
            raise ValueError(f"max_reps must be at least 2 (a standard error needs two replicates), got {max_reps}")
        require_memory(RESULT_BYTES * max_reps, f"{max_reps} replicates' τ_max and τ_avg (max_reps)")
        return _to_precision(pattern, rounds, float(target_stderr), max_reps, seed,
                             executor=executor, chunk_size=chunk_size, device=device, confidence=confidence,
                             quantiles=quantiles, keep_samples=keep_samples, progress=progress, method=method)
    if reps is None:
        raise ValueError("give reps (a replicate count) or target_stderr (a target standard error)")
    reps = integer(reps, "reps")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    quantiles = tuple(float(q) for q in quantiles)
    if any(not 0 <= q <= 1 for q in quantiles):
        raise ValueError(f"quantiles must lie in [0, 1], got {quantiles}")
    root = seed_sequence(seed)
    sampler, law, size = _plan(pattern, rounds, reps, method, chunk_size, device)
    windows = sampler.streams_windows(law, rounds, size)
    tau_max, tau_avg = _replicates(sampler, law, rounds, root, _first, _first + reps, size, executor,
                                   progress if progress is not None else reps > size or windows, "Monte-Carlo chunks")
    samples = {"tau_max": tau_max, "tau_avg": tau_avg} if keep_samples else None
    return MonteCarloResult(Estimate.from_samples(tau_max, confidence, quantiles),
                            Estimate.from_samples(tau_avg, confidence, quantiles), reps, rounds, samples,
                            sampler.method)


def _check_rounds(pattern: Pattern, rounds) -> int:
    """``rounds`` checked: a positive integer within the pattern's horizon (as ``sample`` refuses it,
    whichever sampler runs)."""
    rounds = integer(rounds, "rounds")
    horizon = getattr(pattern, "horizon", None)
    if horizon is not None and rounds > horizon:
        raise ValueError(f"this pattern defines probabilities for {horizon} rounds, {rounds} requested")
    return rounds


#: Bytes a replicate keeps to the end: its τ_max and τ_avg, their concatenated and sorted copies
#: (the quantiles), as ``fedverify mc`` counts them.
RESULT_BYTES = 64


def _plan(pattern: Pattern, rounds: int, reps: int, method: str, chunk_size, device):
    """(sampler, what it draws from, replicates per chunk) of ``monte_carlo``, "auto" resolved,
    once the results of ``reps`` replicates and the largest chunk are known to fit the memory
    limit (a one-line ValueError naming the need and the limit otherwise)."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(map(repr, METHODS))}, got {method!r}")
    if device is not None:
        from participation.devices import resolve_device

        device = resolve_device(device)
    require_memory(RESULT_BYTES * reps, f"{reps} replicates' τ_max and τ_avg")
    sampler, law = _choose(pattern, rounds, method, device)
    if chunk_size is not None:
        size = integer(chunk_size, "chunk_size")
    else:
        size = sampler.chunk_size(law, rounds, reps)
    largest = min(size, reps)
    require_memory(sampler.chunk_bytes(law, rounds, largest),
                   f"Monte-Carlo over {rounds} rounds × {pattern.n_clients} clients "
                   f"({largest} replicate{'s' if largest > 1 else ''} at a time, method {sampler.method!r})")
    return sampler, law, size


def check_monte_carlo(pattern: Pattern, rounds: int, reps: int, *, method: str = "auto", device=None,
                      chunk_size: int | None = None) -> str:
    """The checks ``monte_carlo`` makes before drawing anything, without drawing: the sizes, the
    method, and the memory of the results and of the largest chunk (the tables of the specialised
    methods are built, and kept for the run). Returns the method that would run ("auto"
    resolved); a size that cannot fit is a one-line ValueError naming the need and the limit."""
    require_pattern(pattern)
    rounds, reps = _check_rounds(pattern, rounds), integer(reps, "reps")
    return _plan(pattern, rounds, reps, method, chunk_size, device)[0].method


def _replicates(sampler, law, rounds, root, first, last, size, executor, show, desc):
    """τ_max and τ_avg of replicates first..last−1, in chunks of ``size`` (aligned to multiples of it).

    Without an executor, traces streamed in windows (long horizons) move the bar a window of
    rounds at a time, so that a run of a few huge replicates shows its progress and time left."""
    starts = list(range(first, last, size))
    jobs = [(sampler, law, rounds, root, a, min(size, last - a)) for a in starts]
    if show and executor is None and sampler.streams_windows(law, rounds, size):
        from tqdm.auto import tqdm

        with tqdm(total=len(jobs) * rounds, desc=desc, unit="round", unit_scale=True, leave=False) as bar:
            parts = [_draw(job, on_window=bar.update) for job in jobs]
    else:
        results = executor.map(_run_chunk, jobs) if executor is not None else map(_run_chunk, jobs)
        if show:
            from tqdm.auto import tqdm

            results = tqdm(results, total=len(jobs), desc=desc, leave=False)
        parts = list(results)
    return np.concatenate([a for a, _ in parts]), np.concatenate([b for _, b in parts])


def _to_precision(pattern, rounds, target, max_reps, seed, *, executor, chunk_size, device, confidence, quantiles,
                  keep_samples, progress, method) -> MonteCarloResult:
    """``monte_carlo`` with a target standard error (see its docstring)."""
    tau_max, tau_avg = np.zeros(0), np.zeros(0)
    done, check = 0, FIRST_CHECK
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(desc=f"Monte-Carlo to stderr ≤ {target:g}", unit="rep", leave=False)
    try:
        while True:
            check = min(check, max_reps)
            part = monte_carlo(pattern, rounds, check - done, seed, executor=executor, chunk_size=chunk_size,
                               device=device, confidence=confidence, quantiles=quantiles, keep_samples=True,
                               progress=False, method=method, _first=done)
            tau_max = np.concatenate([tau_max, part.samples["tau_max"]])
            tau_avg = np.concatenate([tau_avg, part.samples["tau_avg"]])
            done = check
            errors = [float(x.std(ddof=1) / np.sqrt(x.size)) for x in (tau_max, tau_avg)]
            if bar is not None:
                bar.update(check - bar.n)
                bar.set_postfix_str(f"E[τ_max] ≈ {tau_max.mean():.4g} ± {errors[0]:.2g}, "
                                    f"E[τ_avg] ≈ {tau_avg.mean():.4g} ± {errors[1]:.2g}")
            if max(errors) <= target:
                break
            if done >= max_reps:
                raise ValueError(f"stderr {target:g} not reached in max_reps = {max_reps} replicates (τ_max ± "
                                 f"{errors[0]:.3g}, τ_avg ± {errors[1]:.3g}); raise max_reps or the target")
            check *= 2
    finally:
        if bar is not None:
            bar.close()
    samples = {"tau_max": tau_max, "tau_avg": tau_avg} if keep_samples else None
    return MonteCarloResult(Estimate.from_samples(tau_max, confidence, quantiles),
                            Estimate.from_samples(tau_avg, confidence, quantiles), done, rounds, samples, part.method)
