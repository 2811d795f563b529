"""What the commands and the sweep share: the built-in problems, the preset names and their
scaling to N clients, trace files as patterns and the defaults.

Importing it is cheap (no numpy, torch or sympy at import), so that ``--help`` can show
these names at once.
"""
from __future__ import annotations

from pathlib import Path


MAIN_PRESETS = ("P1", "P2", "P3")


class DefaultNames(list):
    """A list of names a command uses when none are given, told apart from the same names
    typed by the user (``delays --trace F`` refuses presets typed beside it, not these)."""


REFERENCE_PRESETS = ("P1", "P2", "P3", "case3", "case4", "H8")


TRACE_SUFFIXES = (".npz", ".csv", ".json")


CHECK_ALGORITHMS = ("fedsum-b", "fedsum", "fedsum-cr", "fedavg", "scaffold")


EXPERIMENT_ROUNDS = 30


DEFAULT_CLIENTS = 20


#: The papers whose theorems ``check --paper`` runs, with the name prefix of their theorems.
PAPERS = ("fedsum", "momentum", "cafed", "logit")


PROBLEMS = {
    "quadratic": "random quadratic clients (dim 10, heterogeneity 1, Gaussian gradient noise std 0.5, seed 0): "
                 "L, σ², Δ_f and F_0 are all exact",
    "logistic-digits": "10-class logistic regression on scikit-learn's bundled digits, Dirichlet(0.5) split, "
                       "mini-batch 16: L, F_0 exact, σ² exact at x⁰ and x* only",
    "logistic-synthetic": "logistic regression on a Gaussian mixture (1000 samples, dim 10, 3 classes), "
                          "Dirichlet(0.5) split, mini-batch 16",
    "cnn-digits": "the digits CNN (non-convex) on scikit-learn's digits, Dirichlet(0.5) split, mini-batch 16: "
                  "L, σ², f*, Δ_f are estimated (verify.estimate_constants), so every verdict rests on estimates",
}


#: Where a check's constants come from: ``estimate_constants`` (exact ones kept) or the
#: problem's own ``constants()`` as they are (cheaper for the CNN, evaluated at x⁰ only).
CONSTANT_SOURCES = ("estimate", "problem")


#: Dimension of the problem "quadratic".
QUADRATIC_DIM = 10


def problem_bytes(name: str, n_clients: int) -> int:
    """Peak bytes of building problem ``name`` for ``n_clients`` clients, where it grows with them:
    the quadratic's A_i (the others split a fixed data set, so their clients are at most its samples)."""
    from algorithms.problems import Quadratic

    return Quadratic.random_bytes(n_clients, QUADRATIC_DIM) if name == "quadratic" else 0


def build_problem(name: str, n_clients: int):
    from algorithms.problems import Classifier, Logistic, Quadratic

    builders = {
        "quadratic": lambda: Quadratic.random(n_clients, QUADRATIC_DIM, heterogeneity=1.0, noise_std=0.5, seed=0),
        "logistic-digits": lambda: Logistic.digits(n_clients=n_clients, seed=0),
        "logistic-synthetic": lambda: Logistic.synthetic(n_clients=n_clients, seed=0),
        "cnn-digits": lambda: Classifier.digits(n_clients=n_clients, model="cnn", seed=0),
    }
    if name not in builders:
        raise ValueError(f"unknown problem {name!r}; choose from {', '.join(PROBLEMS)}")
    return builders[name]()


def is_trace_file(text: str) -> bool:
    from participation.patterns import preset_aliases, preset_names

    if text in preset_names() or text in preset_aliases():
        return False
    return Path(text).suffix.lower() in TRACE_SUFFIXES or Path(text).exists()


def scaled_preset(name: str, n_clients: int):
    """Preset ``name`` with ``n_clients`` clients (and S = N/5 per round where it samples S)."""
    from participation.patterns import preset, preset_aliases, preset_names

    if name not in preset_names() and name not in preset_aliases():
        raise ValueError(f"unknown pattern {name!r}: not a preset ({', '.join(preset_names())}) "
                         f"nor a trace file ({', '.join(TRACE_SUFFIXES)})")
    try:
        return preset(name, n_clients=n_clients, per_round=max(1, n_clients // 5))
    except ValueError:
        pass
    try:
        return preset(name, n_clients=n_clients)
    except ValueError:
        raise ValueError(f"preset {name!r} cannot be scaled to {n_clients} clients; use a trace file") from None


def resolve_patterns(texts, n_clients) -> list[tuple[str, object]]:
    """(label, Trace or pattern) per --patterns entry."""
    from participation import Trace

    out = []
    for text in texts:
        if is_trace_file(text):
            trace = Trace.load(text, n_clients=n_clients)
            if trace.n_clients != n_clients:
                raise ValueError(f"trace {Path(text).name} has {trace.n_clients} clients but the problem has "
                                 f"{n_clients}; set --clients")
            out.append((Path(text).name, trace))
        else:
            out.append((canonical(text), scaled_preset(text, n_clients)))
    return out


def canonical(name: str) -> str:
    """The preset's own name for ``name`` when it is an alias ("p1" → "P1"); else ``name``."""
    from participation.patterns import preset_aliases

    return preset_aliases().get(name, name)


def trace_clients(path: str) -> int:
    from participation import Trace

    try:
        return Trace.load(path).n_clients
    except ValueError as err:
        if "needs the number of clients" in str(err):
            raise ValueError(f"{Path(path).name} is a bare list of active-id lists: give --clients") from None
        raise


def split_names(values) -> list[str]:
    """Names given as separate words or comma-separated."""
    return [name for value in values for name in value.split(",") if name.strip()]
