"""Every checkable theorem of the four papers, and the contract a user's theorem follows.

``THEOREMS`` maps a name (as ``fedverify bound --list`` prints it) to a
:class:`~verify.theorems.contract.Theorem`; ``get(name)`` looks one up with a one-line error.
"""
from __future__ import annotations

from .contract import NotCheckable, Plan, Setup, Theorem

__all__ = ["Theorem", "Setup", "Plan", "NotCheckable", "THEOREMS", "get", "names", "register", "user_theorem"]


def _registry() -> dict[str, Theorem]:
    from . import cafed, fedsum, logit, momentum

    return {**fedsum.THEOREMS, **cafed.THEOREMS, **momentum.THEOREMS, **logit.THEOREMS}


def __getattr__(name):
    if name == "THEOREMS":
        value = _registry()
        globals()["THEOREMS"] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def names() -> tuple[str, ...]:
    """Every theorem's name, as ``fedverify bound --list`` prints them."""
    from . import THEOREMS

    return tuple(THEOREMS)


def get(name: str) -> Theorem:
    """The theorem called ``name`` ("momentum.theorem_4_6", or "theorem_4_1" for FedSUM's)."""
    from . import THEOREMS

    if not isinstance(name, str):
        raise ValueError(f"a theorem name must be a string, got {name!r}")
    key = name.strip().lower()
    key = key if "." in key or key in THEOREMS else f"fedsum.{key}"
    if key not in THEOREMS:
        raise ValueError(f"unknown theorem {name!r}; choose from {', '.join(THEOREMS)}")
    return THEOREMS[key]


def register(theorem: Theorem) -> Theorem:
    """Add a user's theorem to ``THEOREMS`` under its name, so that ``check``, the sweep and
    ``fedverify check --theorem NAME --plugin FILE.py`` find it by name. A name already taken
    (the papers' included) is a ValueError."""
    from . import THEOREMS

    if not isinstance(theorem, Theorem):
        raise ValueError(f"register takes a verify.theorems.Theorem (see user_theorem), got {type(theorem).__name__}")
    if theorem.name.strip().lower() in THEOREMS:
        raise ValueError(f"a theorem named {theorem.name!r} is already registered")
    THEOREMS[theorem.name.strip().lower()] = theorem
    return theorem


def user_theorem(*args, **kwargs) -> Theorem:
    """A theorem of the user's own (see :func:`verify.theorems.user.user_theorem`)."""
    from .user import user_theorem as make

    return make(*args, **kwargs)
