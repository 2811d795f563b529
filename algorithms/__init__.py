"""Federated problems and algorithms on one vectorised torch engine.

``get(name, eta_l=..., eta_g=..., local_steps=...)`` builds an algorithm (``names()`` lists
them: the FedSUM family, FedAvg, SCAFFOLD, MIFA, FedVARP, FedAU, FedAWE, the FedGM momentum
family, CA-Fed and LOGIT); ``run(algorithm, problem, trace, seed)``
runs it along a participation trace and returns a ``History``; ``run_batch(algorithms,
problem, traces, seeds)`` runs many seeds, traces and step sizes of one algorithm as one
program, each with the numbers it has alone; ``problems`` holds the federated problems
(``problems.Quadratic``, ...).
"""
from . import problems
from .base import Algorithm
from .engine import iterate, run, run_batch
from .fedavg import FedAvg
from .fedsum import FedSUM, FedSUMB, FedSUMCR
from .history import History
from .noise import NoiseStream
from .registry import get, names, register
from .scaffold import Scaffold

__all__ = ["get", "names", "register", "run", "run_batch", "iterate", "History", "Algorithm", "NoiseStream",
           "FedAvg", "FedSUMB", "FedSUM", "FedSUMCR", "Scaffold", "problems"]
