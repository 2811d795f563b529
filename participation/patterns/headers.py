"""The run-record header models of the participation patterns: one table from the header's
``"model"`` name to the pattern class that writes and reads it.

A pattern writes its header with ``record_header()`` (``{"model": name, ...}``, plain JSON) and
its class reads it back with ``from_record_header(header, n_clients)``; the class lists its
header models and their fields in ``HEADER_FIELDS``. :func:`register_header` enters a class in
:data:`HEADER_MODELS`, and :func:`pattern_from_header` reads any header the table knows.

* ``full``, ``uniform``: :class:`~.sampling.Uniform` (FedSUM Section 2.1 Case 1; Server
  momentum footnote 4);
* ``cyclic``, ``reshuffled``: :class:`~.sampling.Cyclic`, :class:`~.sampling.ReshuffledCyclic`
  (FedSUM Section 2.1 Cases 3 and 4);
* ``markov``: :class:`~.markov_availability.Markov` (CA-Fed Assumption 1);
* ``bernoulli``: :class:`~.independent.Bernoulli` (FedSUM Section 2.1 Case 2; LOGIT Section 3.3).
"""
from __future__ import annotations

from .base import Pattern
from .independent import Bernoulli
from .markov_availability import Markov
from .sampling import Cyclic, ReshuffledCyclic, Uniform

__all__ = ["HEADER_MODELS", "register_header", "header_fields", "pattern_from_header"]

#: The header's ``"model"`` name → the pattern class that writes and reads it.
HEADER_MODELS: dict[str, type[Pattern]] = {}


def register_header(cls: type[Pattern]) -> type[Pattern]:
    """Enter every header model of ``cls.HEADER_FIELDS`` in :data:`HEADER_MODELS` (usable as a
    class decorator); a name another class holds is refused."""
    if not cls.HEADER_FIELDS:
        raise ValueError(f"{cls.__name__}.HEADER_FIELDS names no header model")
    for name in cls.HEADER_FIELDS:
        held = HEADER_MODELS.get(name)
        if held is not None and held is not cls:
            raise ValueError(f"header model {name!r} is {held.__name__}'s, not {cls.__name__}'s")
    for name in cls.HEADER_FIELDS:
        HEADER_MODELS[name] = cls
    return cls


for _cls in (Uniform, Cyclic, ReshuffledCyclic, Markov, Bernoulli):
    register_header(_cls)


def _known(model) -> type[Pattern]:
    cls = HEADER_MODELS.get(model) if isinstance(model, str) else None
    if cls is None:
        raise ValueError(f"unknown participation model {model!r} in the header: the known models are "
                         f"{', '.join(HEADER_MODELS)}")
    return cls


def header_fields(model: str) -> tuple[str, ...]:
    """The fields a header of ``model`` holds besides ``"model"``."""
    return tuple(_known(model).HEADER_FIELDS[model])


def pattern_from_header(header: dict, n_clients: int) -> Pattern:
    """The pattern a record header describes (``{"model": name, ...}``) for ``n_clients``
    clients; a one-line ValueError naming a model the table does not know."""
    return _known(header.get("model")).from_record_header(header, n_clients)
