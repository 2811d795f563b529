"""Client participation: traces, patterns, delay metrics, Markov availability spectra, fitted
availability models (``fit``) and what drives the delays of a trace (``drivers``).

Nothing here imports torch. The names below are imported on first use (PEP 562), so that
``import participation.validation`` (or any one submodule) loads that submodule alone, not
scipy and every sampler.
"""
import importlib

#: Public name → the submodule that defines it (a submodule itself maps to None).
_WHERE = {
    "delays": None, "drivers": None, "expected": None, "fit": None, "markov": None, "patterns": None,
    "measures": None, "trace": None,
    "DelayMetrics": "delays", "delay_metrics": "delays", "last_selection": "delays", "per_round_delay": "delays",
    "capped_delays": "drivers", "delay_drivers": "drivers", "exclusion_curve": "drivers",
    "compare_fits": "fit", "fit_bernoulli": "fit", "fit_markov": "fit", "fit_periodic": "fit",
    "preset": "patterns", "Trace": "trace",
}

__all__ = ["Trace", "patterns", "preset", "delays", "expected", "markov", "fit", "drivers", "DelayMetrics", "delay_metrics",
           "last_selection", "per_round_delay", "fit_bernoulli", "fit_markov", "fit_periodic", "compare_fits",
           "delay_drivers", "exclusion_curve", "capped_delays"]


def __getattr__(name: str):
    where = _WHERE.get(name)
    try:
        module = importlib.import_module(f".{where or name}", __name__)
    except ModuleNotFoundError as err:
        if err.name != f"{__name__}.{where or name}":
            raise
        raise AttributeError(f"module 'participation' has no attribute {name!r}") from None
    value = getattr(module, name) if where else module
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_WHERE))
