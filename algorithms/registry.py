"""Algorithms by name: ``get("fedsum", eta_l=0.01, eta_g=1.0, local_steps=10)``."""
from __future__ import annotations

from dataclasses import fields

from . import autonomous, cafed, fedau, fedawe, fedgm, fedvarp, logit, mifa
from .base import Algorithm
from .fedavg import FedAvg
from .fedsum import FedSUM, FedSUMB, FedSUMCR
from .scaffold import Scaffold

__all__ = ["get", "names", "register"]

_REGISTRY: dict[str, type[Algorithm]] = {}


def register(cls: type[Algorithm]) -> type[Algorithm]:
    """Make ``cls`` available to ``get`` under ``cls.name``."""
    _REGISTRY[cls.name] = cls
    return cls


for _cls in (FedAvg, FedSUMB, FedSUM, FedSUMCR, Scaffold, *fedgm.ALGORITHMS, *autonomous.ALGORITHMS,
             *cafed.ALGORITHMS, *mifa.ALGORITHMS, *fedvarp.ALGORITHMS, *fedau.ALGORITHMS, *fedawe.ALGORITHMS,
             *logit.ALGORITHMS):
    register(_cls)


def names() -> tuple[str, ...]:
    return tuple(_REGISTRY)


def _key(name) -> str:
    if not isinstance(name, str):
        raise ValueError(f"algorithm name must be a string, got {name!r}")
    key = name.strip().lower().replace("_", "-")
    return {"fedsumb": "fedsum-b", "fedsumcr": "fedsum-cr"}.get(key, key)


def get(name: str, **hparams) -> Algorithm:
    """The algorithm ``name`` with its hyper-parameters.

    Common: ``eta_l`` (default 0.01), ``eta_g`` (1.0), ``local_steps`` K (1; for FedSUM-B the
    number of mini-batches per round). They mean what they mean in the papers' boxes (see each
    class). Names: fedavg, fedsum-b, fedsum, fedsum-cr, scaffold, mifa, fedvarp, fedau, fedawe,
    fedgm (and its presets fedavgm, fednag, qhm), fedgm-autonomous, cafed, cafed-unbiased, logit;
    ``names()`` lists them. Extras are each class's own fields (e.g. ``aggregate`` for fedavg,
    ``beta``/``nu``/``schedule`` for fedgm). An unknown name or hyper-parameter, or a bad
    value, is a ValueError that names it.
    """
    key = _key(name)
    if key not in _REGISTRY:
        raise ValueError(f"unknown algorithm {name!r}; choose from {', '.join(_REGISTRY)}")
    cls = _REGISTRY[key]
    allowed = {f.name for f in fields(cls)}
    unknown = sorted(set(hparams) - allowed)
    if unknown:
        raise ValueError(f"{key} has no hyper-parameter {', '.join(map(repr, unknown))}; "
                         f"it takes {', '.join(sorted(allowed))}")
    return cls(**hparams)
