"""The papers' participation settings by name."""
from __future__ import annotations

from typing import Callable

from .availability import Diurnal, OnOffCycles
from .base import Pattern
from .independent import Bernoulli, BiasedGroups, Sine
from .markov_availability import Markov
from .sampling import Cyclic, ReshuffledCyclic, Uniform

_PRESETS: dict[str, tuple[str, Callable[..., Pattern]]] = {
    "P1": ("FedSUM P1: uniform S=20 of N=100 per round (Case 1; §5)",
           lambda n_clients=100, per_round=20: Uniform(n_clients, per_round)),
    "P2": ("FedSUM P2: each client independently with p = S/N = 0.2 (Case 2; §5)",
           lambda n_clients=100, per_round=20: Bernoulli(per_round / n_clients, n_clients)),
    "P3": ("FedSUM P3: p_t = (S/N)(0.3 sin(πt/5) + 0.7) for all clients (App. H.2)",
           lambda n_clients=100, per_round=20: Sine.p3(n_clients, per_round)),
    "case1": ("FedSUM Case 1: uniform sampling of S of N", lambda n_clients=100, per_round=20: Uniform(n_clients, per_round)),
    "case2": ("FedSUM Case 2 with p = S/N (the paper does not give p for Fig. 9; p = S/N is chosen here)",
              lambda n_clients=100, per_round=20: Bernoulli(per_round / n_clients, n_clients)),
    "case3": ("FedSUM Case 3: deterministic cyclic blocks of S", lambda n_clients=100, per_round=20: Cyclic(n_clients, per_round)),
    "case4": ("FedSUM Case 4: reshuffled cyclic blocks of S", lambda n_clients=100, per_round=20: ReshuffledCyclic(n_clients, per_round)),
    "H8": ("FedSUM App. H.8 biased groups: p = 0.5, 0.45, ..., 0.05 in groups of 11",
           lambda n_clients=100: BiasedGroups(n_clients)),
    "full": ("Full participation: every client in every round (Server momentum Thm 4.1)",
             lambda n_clients=100: Uniform(n_clients, n_clients)),
    "logit": ("LOGIT experiments: N = 10, independent Bernoulli with p = 0.5 (§5)",
              lambda n_clients=10, p=0.5: Bernoulli(p, n_clients)),
    "cafed-temporal": ("CA-Fed temporal correlation, four equal types (§V-A)",
                       lambda n_clients=100, seed=0: Markov.cafed_temporal(n_clients, "four-types", seed=seed)),
    "cafed-temporal-3groups": ("CA-Fed temporal correlation, Fig. 1d's 50/25/25 groups",
                               lambda n_clients=100, seed=0: Markov.cafed_temporal(n_clients, "three-groups", seed=seed)),
    "cafed-spatial": ("CA-Fed spatial correlation: 10 clusters of 10 clients (§V-B e)",
                      lambda n_clusters=10, clients_per_cluster=10: Markov.cafed_spatial(n_clusters, clients_per_cluster)),
    "fedau-cyclic": ("FedAU cyclic participation (Wang & Ji, ICLR 2024, experiments): each client on for round(C·p) consecutive "
                     "rounds of every C = 100 (the cycle of the authors' code), random phase; N = 100 and p = 0.1 "
                     "(FedAU's mean participation probability) chosen here",
                     lambda n_clients=100, period=100, p=0.1: OnOffCycles.from_probability(n_clients, period, p)),
    "diurnal": ("Diurnal day/night groups (Zhu et al., ICLR 2022), our reading: S = 20 of N = 100, half day, half "
                "night, period 24 rounds (one per hour), linear shape, power 1 (settings chosen here)",
                lambda n_clients=100, per_round=20, period=24, power=1.0, shape="linear", day_fraction=0.5:
                Diurnal(n_clients, per_round, period, power, shape, day_fraction)),
}
_ALIASES = {"biased": "H8", "h8": "H8", "p1": "P1", "p2": "P2", "p3": "P3"}


def preset_names() -> dict[str, str]:
    """Every preset name with its one-line description."""
    return {name: doc for name, (doc, _) in _PRESETS.items()}


def preset_aliases() -> dict[str, str]:
    """The other spellings ``preset`` accepts, each with the preset's name: {"p1": "P1", ...}."""
    return dict(_ALIASES)


def preset(name: str, **overrides) -> Pattern:
    """A paper's participation setting, e.g. ``preset("P3")`` or ``preset("P1", n_clients=50)``.

    ``overrides`` change the documented defaults (``n_clients``, ``per_round``, ...).
    """
    key = _ALIASES.get(name, name)
    if key not in _PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose from {', '.join(_PRESETS)}")
    _, build = _PRESETS[key]
    import inspect

    takes = list(inspect.signature(build).parameters)
    unknown = sorted(set(overrides) - set(takes))
    if unknown:
        raise ValueError(f"preset {key!r} has no setting {', '.join(map(repr, unknown))}; it takes "
                         f"{', '.join(takes)}")
    return build(**overrides)
