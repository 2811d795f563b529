"""The traces of the measures study: every participation sampler fedverify has, at one rate.

Each :class:`Member` is one sampler configuration; :func:`traces` draws ``design.trace_seeds``
traces of each (a fixed trace, the MobiPerf fleet's, gives a different random subset of devices
per seed). The family spans τ_max from a few rounds (cyclic blocks) to the length of the run
(the fleet, long on/off cycles), with and without empty rounds:

* sampling without availability: uniform S of N (FedSUM Case 1), Bernoulli p (Case 2),
  deterministic and reshuffled cyclic blocks (Cases 3, 4), FedSUM P3's sine-modulated p_t
  (App. H.2), App. H.8's biased groups, FedAWE's per-client sine trajectories;
* availability: independent two-state Markov chains at one stationary π and several second
  eigenvalues λ (CA-Fed, App. F3), per-client on/off cycles of several periods (FedAU's cyclic
  participation), groups that hand over without empty rounds (``OnOffCycles.periodic_groups``),
  diurnal day/night groups, server-side selection of S among Markov-available clients, and
  random subsets of the shipped MobiPerf fleet.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from participation.datasets import mobiperf

__all__ = ["Member", "TraceCase", "members", "traces"]


@dataclass(frozen=True)
class Member:
    """One sampler configuration: ``label`` names it, ``sampler`` is its family (the unit that
    leave-one-sampler-out holds out), ``make(seed)`` gives a pattern or a fixed (T, N) mask."""

    label: str
    sampler: str
    make: object


@dataclass(frozen=True)
class TraceCase:
    """One trace of the study: its member's label and sampler, the trace seed and the mask."""

    label: str
    sampler: str
    seed: int
    mask: np.ndarray

    @property
    def key(self) -> str:
        return f"{self.label} #{self.seed}"


def members(n_clients: int, rounds: int, rate: float) -> list[Member]:
    """The family at ``n_clients`` clients and about ``rate`` of them a round."""
    from participation.patterns import (Bernoulli, BiasedGroups, Cyclic, Diurnal, Markov, OnOffCycles,
                                        ReshuffledCyclic, Selected, Sine, Uniform)

    n = int(n_clients)
    s = max(1, round(rate * n))
    groups = max(2, round(1 / rate))
    size = -(-n // groups)
    step = 2 * rate / groups
    fixed = lambda pattern: (lambda seed: pattern)          # noqa: E731 - a pattern that ignores the seed
    out = [
        Member(f"uniform S={s}", "uniform", fixed(Uniform(n, s))),
        Member(f"bernoulli p={rate:g}", "bernoulli", fixed(Bernoulli(rate, n_clients=n))),
        Member(f"cyclic S={s}", "cyclic", fixed(Cyclic(n, s))),
        Member(f"reshuffled S={s}", "reshuffled", fixed(ReshuffledCyclic(n, s))),
        Member("P3 sine", "P3", fixed(Sine.p3(n, s))),
        Member("H8 biased groups", "H8", fixed(BiasedGroups(n, size, p_first=rate + step * (groups - 1) / 2,
                                                              step=step))),
        Member("FedAWE sine", "FedAWE sine", fixed(Sine.fedawe(np.linspace(0.5 * rate, 1.5 * rate, n), 0.5, 1.0))),
    ]
    out += [Member(f"markov λ={lam:g}", "markov", fixed(Markov(rate, lam, n_clients=n))) for lam in (0.5, 0.8, 0.95)]
    out += [Member(f"on/off C={c}", "on/off", fixed(OnOffCycles.from_probability(n, c, rate)))
            for c in (10, 20, 40, 80)]
    out += [Member(f"groups hand over every {r}", "handover", fixed(OnOffCycles.periodic_groups(n, groups, r)))
            for r in (1, 4)]
    out += [Member("diurnal", "diurnal", fixed(Diurnal(n, s, 24))),
            Member(f"selected S={s} of markov", "selected", fixed(Selected(Markov(2.5 * rate, 0.8, n_clients=n), s)))]
    if _fleet_fits(n, rounds):
        out.append(Member("fleet subset", "fleet", lambda seed: _fleet_subset(n, rounds, seed)))
    return out


def _fleet_fits(n: int, rounds: int) -> bool:
    fleet = mobiperf()
    return rounds <= fleet.n_rounds and int(np.asarray(fleet.mask)[:rounds].any(axis=0).sum()) >= n


def _fleet_subset(n: int, rounds: int, seed: int) -> np.ndarray:
    """``n`` random devices of the MobiPerf fleet available at least once in its first ``rounds``
    10-minute rounds (a device never available would never train)."""
    window = np.asarray(mobiperf().mask)[:rounds]
    seen = np.flatnonzero(window.any(axis=0))
    devices = np.sort(np.random.default_rng(seed).choice(seen, size=n, replace=False))
    return window[:, devices]


def traces(n_clients: int, rounds: int, rate: float, trace_seeds: int) -> list[TraceCase]:
    """``trace_seeds`` traces of every member, member by member, seed by seed."""
    out = []
    for member in members(n_clients, rounds, rate):
        for seed in range(int(trace_seeds)):
            made = member.make(seed)
            mask = np.asarray(made if isinstance(made, np.ndarray) else made.sample(rounds, seed=seed).mask, dtype=bool)
            out.append(TraceCase(member.label, member.sampler, seed, mask))
    return out
