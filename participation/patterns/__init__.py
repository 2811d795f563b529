"""Participation patterns: how the active sets {S_t} are generated.

Every pattern is a frozen dataclass with ``n_clients``, ``sample(rounds, seed)`` and
``sample_batch(rounds, reps, seed)``; the same seed gives the same trace whatever the
chunking (see :mod:`participation.patterns.base`). A pattern a run record's header can name
writes that header with ``record_header()``, and :func:`pattern_from_header` reads it back
(:mod:`participation.patterns.headers`).
"""
from .availability import Diurnal, OnOffCycles, Selected
from .base import IndependentPattern, Pattern
from .headers import HEADER_MODELS, header_fields, pattern_from_header, register_header
from .independent import Bernoulli, BiasedGroups, Sine
from .markov_availability import Markov
from .presets import preset, preset_aliases, preset_names
from .replay import Replay
from .sampling import Cyclic, ReshuffledCyclic, Uniform

__all__ = [
    "Pattern", "IndependentPattern", "Uniform", "Bernoulli", "Cyclic", "ReshuffledCyclic", "Sine",
    "BiasedGroups", "Markov", "Replay", "OnOffCycles", "Diurnal", "Selected", "preset", "preset_aliases", "preset_names",
    "HEADER_MODELS", "header_fields", "pattern_from_header", "register_header",
]
