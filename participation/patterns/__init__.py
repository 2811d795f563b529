"""Participation patterns: how the active sets {S_t} are generated.

Every pattern is a frozen dataclass with ``n_clients``, ``sample(rounds, seed)`` and
``sample_batch(rounds, reps, seed)``; the same seed gives the same trace whatever the
chunking (see :mod:`participation.patterns.base`).
"""
from .availability import Diurnal, OnOffCycles, Selected
from .base import IndependentPattern, Pattern
from .independent import Bernoulli, BiasedGroups, Sine
from .markov_availability import Markov
from .presets import preset, preset_aliases, preset_names
from .replay import Replay
from .sampling import Cyclic, ReshuffledCyclic, Uniform

__all__ = [
    "Pattern", "IndependentPattern", "Uniform", "Bernoulli", "Cyclic", "ReshuffledCyclic", "Sine",
    "BiasedGroups", "Markov", "Replay", "OnOffCycles", "Diurnal", "Selected", "preset", "preset_aliases", "preset_names",
]
