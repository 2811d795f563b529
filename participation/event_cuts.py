"""Cutting availability events into rounds: the part of :mod:`participation.events` that
``participation.trace.Trace.from_events`` needs (no loaders, no ``Trace``), so that the two
modules do not import each other. The rules are described in :mod:`participation.events`."""
from __future__ import annotations

import math
import numbers
from typing import Mapping, Sequence

import numpy as np

from .validation import quote

__all__ = ["RULES", "events_to_mask", "as_event_lists"]

RULES = ("start", "whole", "fraction")


def _client_events(value, name: str) -> np.ndarray:
    """One client's events as a float (k, 2) array of (time, state), validated."""
    name = quote(str(name))
    try:
        array = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"client {name}: events must be [time, state] pairs of numbers") from None
    if array.size == 0:
        return np.zeros((0, 2))
    if array.ndim != 2 or array.shape[1] != 2:
        raise ValueError(f"client {name}: events must be [time, state] pairs, got shape {array.shape}")
    times, states = array[:, 0], array[:, 1]
    if not np.isfinite(times).all():
        raise ValueError(f"client {name}: event time {times[~np.isfinite(times)][0]} is not finite")
    bad = (states != 0) & (states != 1)
    if bad.any():
        raise ValueError(f"client {name}: state {states[bad][0]:g} at t={times[bad][0]:g} is not 0 or 1")
    back = np.flatnonzero(times[1:] < times[:-1])            # no subtraction: times may span the float range
    if back.size:
        k = int(back[0]) + 1
        raise ValueError(f"client {name}: events are not in time order (t={times[k]:g} after t={times[k - 1]:g})")
    return array


def _check_round_seconds(round_seconds) -> float:
    if isinstance(round_seconds, bool) or not isinstance(round_seconds, numbers.Real) \
            or not math.isfinite(round_seconds) or round_seconds <= 0:
        raise ValueError(f"round_seconds must be a positive number of seconds, got {round_seconds!r}")
    return float(round_seconds)


def events_to_mask(events: Sequence, round_seconds: float, *, rule: str = "whole", fraction: float | None = None,
                   start: float = 0.0, end: float | None = None, initial: int = 0,
                   names: Sequence[str] | None = None) -> np.ndarray:
    """The boolean mask (rounds, clients) of ``events`` (per client, (time, state) pairs in
    time order) cut into rounds of ``round_seconds`` by ``rule`` (see the module docstring).

    Every client's availability is the step function s_i(t) of its events; the time it is
    available in round r is A_i(r) = ∫_{b_r}^{b_r+Δ} s_i(t) dt, computed for all clients and
    rounds at once from the cumulative available time at the round boundaries.
    """
    delta = _check_round_seconds(round_seconds)
    if rule not in RULES:
        raise ValueError(f"rule must be one of {', '.join(RULES)}, got {rule!r}")
    if rule == "fraction":
        if isinstance(fraction, bool) or not isinstance(fraction, numbers.Real) or not 0 < fraction <= 1:
            raise ValueError(f"rule='fraction' needs fraction in (0, 1], got {fraction!r}")
    elif fraction is not None:
        raise ValueError(f"fraction is used only with rule='fraction', got rule={rule!r}")
    if initial not in (0, 1):
        raise ValueError(f"initial must be 0 or 1, got {initial!r}")
    names = list(names) if names is not None else [str(i) for i in range(len(events))]
    arrays = [_client_events(e, n) for e, n in zip(events, names)]
    if not arrays:
        raise ValueError("no clients in the event log")
    if isinstance(start, bool) or not isinstance(start, numbers.Real) or not math.isfinite(start):
        raise ValueError(f"start must be a finite time in seconds, got {start!r}")
    latest = max((a[-1, 0] for a in arrays if len(a)), default=None)
    end = latest if end is None else float(end)
    if end is None or not math.isfinite(end):
        raise ValueError("no events to end the trace at; give end=")
    first = min((a[0, 0] for a in arrays if len(a)), default=float(start))
    with np.errstate(over="ignore"):
        span = (end - float(start)) / delta
        reach = float(np.float64(max(end, float(start))) - np.float64(min(first, float(start))))
    if not math.isfinite(span) or not math.isfinite(reach) or span > 2.0 ** 62:
        raise ValueError(f"from start={float(start):g} s to end={end:g} s in rounds of {delta:g} s is "
                         f"{span:.3g} rounds, more than any trace can hold")
    rounds = int(math.floor(span + 1e-9))
    if rounds < 1:
        raise ValueError(f"from start={start:g} s to end={end:g} s there is no complete round of {delta:g} s")
    n = len(arrays)
    from .budget import require_memory

    # the mask, the cumulative times at every boundary and the search keys, per client and round
    require_memory(rounds * n * 41.0, f"cutting {n} clients into {rounds} rounds of {delta:g} s")
    bounds = float(start) + delta * np.arange(rounds + 1)               # b_0 .. b_R
    if initial:          # available before the first event: an event (state 1) just before everything
        arrays = [np.vstack([[min(bounds[0], a[0, 0] if len(a) else bounds[0]) - 1.0, 1.0], a]) for a in arrays]
    # One sorted key per event: client i's events shifted by i·span keep each client apart.
    counts = np.array([len(a) for a in arrays])
    allev = np.concatenate([a for a in arrays if len(a)]) if counts.sum() else np.zeros((0, 2))
    owner = np.repeat(np.arange(n), counts)
    lo = min(float(allev[:, 0].min()) if allev.size else 0.0, bounds[0]) - 1.0
    span = max(float(allev[:, 0].max()) if allev.size else 0.0, bounds[-1]) - lo + 2.0
    keys = owner * span + (allev[:, 0] - lo)
    times, states = allev[:, 0], allev[:, 1]
    # available time accumulated before each event, within its client: C_e = Σ_{e' < e} s_e' (t_{e'+1} − t_e')
    ends = np.cumsum(counts)
    nxt = np.append(times[1:], np.inf)
    last_of_client = np.zeros(len(times), dtype=bool)
    last_of_client[ends[counts > 0] - 1] = True
    seg = (np.where(last_of_client, times, nxt) - times) * states
    before = np.cumsum(seg) - seg
    first_index = (ends - counts)[owner]
    cum_at_event = before - before[first_index] if len(times) else before

    def last_event(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For every client and time in ``x``: the index of its last event at or before it,
        and whether there is one; shape (n·len(x),)."""
        query = (np.arange(n)[:, None] * span + (x[None, :] - lo)).ravel()
        idx = np.searchsorted(keys, query, side="right") - 1
        client = np.repeat(np.arange(n), x.size)
        has = (idx >= 0) & (owner[np.maximum(idx, 0)] == client) if len(times) else np.zeros(query.size, bool)
        return np.maximum(idx, 0), has

    if rule == "start":
        idx, has = last_event(bounds[:-1])
        state = np.where(has, states[idx] if len(times) else 0.0, 0.0).reshape(n, rounds)
        return (state == 1).T.copy()
    idx, has = last_event(bounds)
    cumulative = np.where(has, (cum_at_event[idx] + (np.tile(bounds, n) - times[idx]) * states[idx]) if len(times)
                          else 0.0, 0.0).reshape(n, rounds + 1)
    per_round = np.diff(cumulative, axis=1)                               # A_i(r), (n, rounds)
    need = delta if rule == "whole" else float(fraction) * delta
    return (per_round >= need * (1 - 1e-9)).T.copy()


def as_event_lists(events) -> tuple[list[str], list]:
    """(names, per-client event lists) from a mapping id → events or a sequence of them."""
    if hasattr(events, "clients") and hasattr(events, "events"):      # a participation.events.EventLog
        return list(events.clients), list(events.events)
    if isinstance(events, Mapping):
        return [str(k) for k in events], list(events.values())
    events = list(events)
    return [str(i) for i in range(len(events))], events
