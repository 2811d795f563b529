"""Algorithms by name: ``get("fedsum", eta_l=0.01, eta_g=1.0, local_steps=10)``.

A user's algorithm joins the registry in one of three ways:

* ``register(MyAlgorithm)`` in the user's own code (the library only);
* a module or ``.py`` file that calls ``register`` when imported, named on the command
  line with ``fedverify check --plugin my_module`` (or ``--plugin path/to/file.py``);
* an installed package declaring an entry point in the group ``fedverify.algorithms``
  (``[project.entry-points."fedverify.algorithms"] myalg = "mypkg.algs:MyAlgorithm"``);
  these are loaded the first time a name is not found.
"""
from __future__ import annotations

import importlib
import importlib.util
import sys
from dataclasses import fields
from pathlib import Path

from . import autonomous, cafed, fedau, fedawe, fedgm, fedvarp, logit, mifa
from .base import Algorithm
from .fedavg import FedAvg
from .fedsum import FedSUM, FedSUMB, FedSUMCR
from .scaffold import Scaffold

__all__ = ["get", "names", "algorithm_class", "register", "load_plugin", "ENTRY_POINT_GROUP"]

_REGISTRY: dict[str, type[Algorithm]] = {}


#: The entry-point group an installed package uses to provide algorithms.
ENTRY_POINT_GROUP = "fedverify.algorithms"
_ENTRY_POINTS_LOADED = False


def _key(name) -> str:
    if not isinstance(name, str):
        raise ValueError(f"algorithm name must be a string, got {name!r}")
    key = name.strip().lower().replace("_", "-")
    return {"fedsumb": "fedsum-b", "fedsumcr": "fedsum-cr"}.get(key, key)


def register(cls: type[Algorithm]) -> type[Algorithm]:
    """Make ``cls`` available to ``get`` under ``cls.name`` (usable as a class decorator)."""
    if not (isinstance(cls, type) and issubclass(cls, Algorithm)):
        raise ValueError(f"register expects an algorithms.Algorithm subclass, got {cls!r}")
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"{cls.__name__} needs a class attribute name (a non-empty string) to be registered")
    _check_methods(cls)
    _REGISTRY[_key(name)] = cls
    return cls


#: The methods the engine calls, with the positional parameters it passes (after self).
_CALLED = {"init": ("problem", "x0"), "round": ("state", "problem", "r")}


def _check_methods(cls: type[Algorithm]) -> None:
    """``init`` and ``round`` must be concrete and accept the engine's arguments
    (``init(problem, x0)``, ``round(state, problem, r)``), so that a wrong signature is named
    when the algorithm is registered, not raised from inside a run."""
    import inspect

    abstract = sorted(getattr(cls, "__abstractmethods__", ()))
    if abstract:
        raise ValueError(f"{cls.__name__} does not define {', '.join(abstract)}; an algorithm needs "
                         "init(self, problem, x0) and round(self, state, problem, r)")
    for method, passed in _CALLED.items():
        try:
            inspect.signature(getattr(cls, method)).bind(None, *passed)
        except TypeError as err:
            shown = inspect.signature(getattr(cls, method))
            raise ValueError(f"{cls.__name__}.{method}{shown} cannot take the engine's call "
                             f"{method}({', '.join(passed)}): {err}") from None


#: Where each loaded plugin's code lives (a file, or a package's folder) → the plugin as given,
#: so that an error raised later by the plugin's code can be named (``plugin_frame``).
PLUGIN_SOURCES: dict[str, str] = {}


def _remember(spec: str, module) -> None:
    source = getattr(module, "__file__", None)
    if source:
        source = Path(source).resolve()
        PLUGIN_SOURCES[str(source.parent if source.name == "__init__.py" else source)] = spec


def plugin_frame(tb):
    """(plugin as given, function, file, line) of the innermost frame of traceback ``tb`` that runs
    a loaded plugin's code, or None."""
    found = None
    while tb is not None:
        filename = str(Path(tb.tb_frame.f_code.co_filename).resolve())
        for source, spec in PLUGIN_SOURCES.items():
            if filename == source or filename.startswith(source + "/"):
                found = (spec, tb.tb_frame.f_code.co_name, filename, tb.tb_lineno)
        tb = tb.tb_next
    return found


def load_plugin(spec: str):
    """Import a module by dotted name, or a ``.py`` file by path, so that its ``register``
    calls run; returns the module. A failure is a one-line ValueError naming ``spec``."""
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"plugin must be a module name or a .py file, got {spec!r}")
    path = Path(spec)
    try:
        if path.suffix == ".py" or path.exists():
            if not path.is_file():
                raise ValueError(f"plugin file {spec!r} does not exist")
            name = f"fedverify_plugin_{path.stem}"
            module_spec = importlib.util.spec_from_file_location(name, path)
            if module_spec is None or module_spec.loader is None:
                raise ValueError(f"cannot load plugin {spec!r}: not a Python file")
            module = importlib.util.module_from_spec(module_spec)
            sys.modules[name] = module
            _remember(spec, module)
            module_spec.loader.exec_module(module)
            return module
        module = importlib.import_module(spec)
        _remember(spec, module)
        return module
    except ValueError:
        raise
    except SystemExit as err:      # sys.exit() in the plugin's module would end the command silently
        raise ValueError(f"cannot load plugin {spec!r}: it called sys.exit({err.code!r}) while being imported") from None
    except Exception as err:       # the user's code may raise anything on import
        raise ValueError(f"cannot load plugin {spec!r}: {type(err).__name__}: {err}") from None


def _load_entry_points() -> None:
    global _ENTRY_POINTS_LOADED
    if _ENTRY_POINTS_LOADED:
        return
    _ENTRY_POINTS_LOADED = True
    from importlib.metadata import entry_points

    for point in entry_points(group=ENTRY_POINT_GROUP):
        try:
            loaded = point.load()
        except Exception as err:
            raise ValueError(f"cannot load the algorithm entry point {point.name!r} ({point.value}): "
                             f"{type(err).__name__}: {err}") from None
        if isinstance(loaded, type) and issubclass(loaded, Algorithm):
            register(loaded)


for _cls in (FedAvg, FedSUMB, FedSUM, FedSUMCR, Scaffold, *fedgm.ALGORITHMS, *autonomous.ALGORITHMS,
             *cafed.ALGORITHMS, *mifa.ALGORITHMS, *fedvarp.ALGORITHMS, *fedau.ALGORITHMS, *fedawe.ALGORITHMS,
             *logit.ALGORITHMS):
    register(_cls)


def names() -> tuple[str, ...]:
    """Every registered name, the entry points' included."""
    _load_entry_points()
    return tuple(_REGISTRY)


def algorithm_class(name: str) -> type[Algorithm]:
    """The class registered under ``name`` (an installed entry point's included)."""
    key = _key(name)
    if key not in _REGISTRY:
        _load_entry_points()
    if key not in _REGISTRY:
        raise ValueError(f"unknown algorithm {name!r}; choose from {', '.join(_REGISTRY)}")
    return _REGISTRY[key]


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
    cls = algorithm_class(name)
    key = _key(name)
    allowed = {f.name for f in fields(cls)}
    unknown = sorted(set(hparams) - allowed)
    if unknown:
        raise ValueError(f"{key} has no hyper-parameter {', '.join(map(repr, unknown))}; "
                         f"it takes {', '.join(sorted(allowed))}")
    return cls(**hparams)
