"""Flower as an optional dependency: whether it is installed, importing it on use, and the one
line a missing Flower gives.
"""
from __future__ import annotations

import importlib
import importlib.util


#: The one line a missing Flower gives.
INSTALL_HINT = 'install with pip install "fedverify[flower]"'


def flower_available() -> bool:
    """Whether ``flwr`` can be found (without importing it)."""
    return importlib.util.find_spec("flwr") is not None


def require_flower():
    """The ``flwr`` module; a ModuleNotFoundError of one line when Flower is not installed."""
    try:
        return importlib.import_module("flwr")
    except ImportError as err:
        missing = (err.name or "flwr").split(".")[0]
        if missing == "flwr":
            raise ModuleNotFoundError(f"Flower (flwr) is not installed: {INSTALL_HINT}", name="flwr") from None
        raise ModuleNotFoundError(f"Flower (flwr) cannot be imported, {missing} is missing: {INSTALL_HINT}",
                                  name=missing) from None
