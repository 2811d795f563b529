"""The simulation entry for apps defined as Python objects: :func:`simulate` runs a ``ServerApp``
and a ``ClientApp`` through ``flwr.simulation.run_simulation`` (deprecated by Flower, hence a
FutureWarning naming ``run_app``), with the Ray settings of :func:`backend_config` and Flower's and
Ray's logs quieted by :func:`quiet_engine`.
"""
from __future__ import annotations

import contextlib
import importlib
import importlib.util
import logging
import os
import time
import warnings

from .dependency import require_flower


def backend_config(cpus: int | None = None, client_cpus: float = 1.0) -> dict:
    """Flower's simulation backend settings used by :func:`simulate`: Ray with ``cpus`` CPUs
    (default: those this process may use), ``client_cpus`` per ClientApp (so cpus/client_cpus
    ClientApps run at once), no GPU, no dashboard, Ray's logs at ERROR and not forwarded."""
    if cpus is None:
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return {"client_resources": {"num_cpus": float(client_cpus), "num_gpus": 0.0},
            "init_args": {"num_cpus": int(cpus), "num_gpus": 0, "include_dashboard": False,
                          "logging_level": logging.ERROR, "log_to_driver": False}}


@contextlib.contextmanager
def quiet_engine(quiet: bool = True):
    """Flower's and Ray's loggers at ERROR and warnings off (when ``quiet``); ``PYTHONPATH`` as it was."""
    pythonpath = os.environ.get("PYTHONPATH")
    with warnings.catch_warnings():
        if quiet:
            warnings.simplefilter("ignore")
            disabled = logging.root.manager.disable
            logging.disable(logging.INFO)      # Ray logs and sets its logger's level when first imported
            try:
                importlib.import_module("ray")
            finally:
                logging.disable(disabled)
        loggers = [logging.getLogger(name) for name in ("flwr", "ray")] if quiet else []
        levels = [logger.level for logger in loggers]
        try:
            for logger in loggers:
                logger.setLevel(logging.ERROR)
            yield
        finally:
            for logger, level in zip(loggers, levels):
                logger.setLevel(level)
            if pythonpath is None:
                os.environ.pop("PYTHONPATH", None)
            else:
                os.environ["PYTHONPATH"] = pythonpath


def simulate(server_app, client_app, num_supernodes: int, *, cpus: int | None = None, client_cpus: float = 1.0,
             quiet: bool = True, config: dict | None = None) -> float:
    """Run a ``ServerApp`` and a ``ClientApp`` defined as Python objects in Flower's simulation
    engine through ``flwr.simulation.run_simulation``, with :func:`backend_config` (or
    ``config``); returns the wall time in seconds, Ray's start-up and shutdown included. Flower's
    telemetry and Ray's usage statistics are off unless the environment already sets them. An
    exception raised in the ServerApp is raised here.

    Flower 1.42 marks ``run_simulation`` deprecated, to be removed; each call issues one
    FutureWarning that says so. The supported path is a Flower App directory run by ``flwr run``:
    :func:`run_app` runs one (``examples/flower_app`` in the source tree is a Flower App whose
    ServerApp records its runs). ``quiet`` hides Flower's and Ray's own warnings and logs."""
    require_flower()
    if importlib.util.find_spec("ray") is None:
        raise ModuleNotFoundError("Flower's simulation engine needs Ray: install with pip install \"flwr[simulation]\"",
                                  name="ray")
    warnings.warn("verify.records.flower.simulate runs Flower's deprecated flwr.simulation.run_simulation; the supported path "
                  "is a Flower App run by flwr run: verify.records.flower.run_app", FutureWarning, stacklevel=2)
    for name, value in (("FLWR_TELEMETRY_ENABLED", "0"), ("RAY_USAGE_STATS_ENABLED", "0")):
        os.environ.setdefault(name, value)
    settings = config if config is not None else backend_config(cpus, client_cpus)
    with quiet_engine(quiet):
        from flwr.simulation import run_simulation

        start = time.perf_counter()
        run_simulation(server_app=server_app, client_app=client_app, num_supernodes=int(num_supernodes),
                       backend_config=settings)
        return time.perf_counter() - start
