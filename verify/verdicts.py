"""The verdict of a check: one-sided confidence limits of the measured left side against a
theorem's bound, and the :class:`CheckResult` every check returns (whatever the theorem).

    "holds"        upper limit ≤ bound
    "violated"     lower limit > bound
    "inconclusive" otherwise.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

from algorithms import History
from bounds.core import Bound, Condition

__all__ = ["CheckResult", "confidence_limits", "verdict", "rounding_tolerance", "AVERAGE_GRAD_NORM2"]

#: The left side of FedSUM's and LOGIT's bounds, the default measured quantity.
AVERAGE_GRAD_NORM2 = "(1/T) Σ_{t<T} ‖∇f(x_t)‖²"


# ---------------------------------------------------------------------------- statistics


def rounding_tolerance(constants) -> float:
    """The verdict's float tolerance: 1e-12 of the problem's gradient scale F_0 + L·Δ_f + σ²."""
    return 1e-12 * (constants.F0 + constants.L * constants.delta_f + constants.sigma2)


def confidence_limits(values, confidence: float = 0.95, *, exact: bool = False) -> tuple[float, float, float]:
    """(mean, lower, upper): one-sided Student-t limits at ``confidence`` on n − 1 degrees
    of freedom, mean ∓ t_{confidence, n−1}·s/√n. With a single value the limits are
    infinite unless ``exact`` (a noise-free run is its own expectation). Any infinite or
    NaN value (a run that stopped) makes all three infinite."""
    values = np.asarray(values, dtype=float)
    if values.size == 0:
        raise ValueError("need at least one value")
    if not np.isfinite(values).all():
        return math.inf, math.inf, math.inf
    mean = float(values.mean())
    if values.size == 1 or exact:
        return (mean, mean, mean) if exact else (mean, -math.inf, math.inf)
    half = float(stats.t.ppf(confidence, values.size - 1) * values.std(ddof=1) / math.sqrt(values.size))
    return mean, mean - half, mean + half


def verdict(lower: float, upper: float, bound: float, atol: float = 0.0) -> str:
    """"holds" when upper ≤ bound + atol, "violated" when lower > bound + atol, else
    "inconclusive". ``atol`` absorbs float rounding (a bound of exactly 0 against a
    measured 1e-34)."""
    if math.isnan(bound) or math.isnan(lower) or math.isnan(upper):
        return "inconclusive"
    if upper <= bound + atol:
        return "holds"
    if lower > bound + atol:
        return "violated"
    return "inconclusive"


# ---------------------------------------------------------------------------- result


@dataclass(frozen=True)
class CheckResult:
    """The outcome of :func:`check`.

    ``measured`` is the mean of ``values`` (one per seed, or per trace for a bound in full
    expectation), ``lower``/``upper`` its one-sided ``confidence`` limits, ``bound`` the
    theorem's :class:`~bounds.core.Bound` and ``ratio`` = measured/bound. ``step_sizes`` are
    those the runs used, ``conditions`` the theorem's hypotheses there, ``tau_max``/``tau_avg``
    the trace's delays (their expectations for a bound in full expectation). ``stopped``
    lists runs that stopped (non-finite values); ``notes`` anything else worth knowing; ``atol`` the rounding tolerance of the verdict.
    ``covered`` says whether the theorem is proved for the algorithm (None: unknown, for a
    user's bound without a ``covers`` attribute). A verdict on an algorithm the theorem does
    not cover compares numbers for reference and tests nothing; ``label`` says so
    ("holds (ref)"), and a ``*`` marks a hypothesis that fails at the step sizes used.
    """

    verdict: str
    measured: float
    lower: float
    upper: float
    confidence: float
    values: tuple[float, ...]
    seeds: tuple[int, ...]
    bound: Bound
    bound_name: str
    algorithm: str
    hparams: dict
    step_sizes: dict
    conditions: tuple[Condition, ...]
    tau_max: float
    tau_avg: float
    n_clients: int
    rounds: int
    local_steps: int
    expectation: bool
    constants: dict
    stopped: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    atol: float = 0.0
    covered: bool | None = None
    #: The measured quantity (the theorem's left side) and what else the runs measured for it.
    lhs: str = AVERAGE_GRAD_NORM2
    extras: dict = field(default_factory=dict)
    per_trace_tau: tuple[tuple[int, float], ...] = field(default=(), repr=False)
    #: The History of the first noise seed on the first trace (per-round ‖∇f(x_t)‖², loss,
    #: final parameters), kept so that plots and reports need not run it again.
    first_run: History | None = field(default=None, repr=False, compare=False)

    @property
    def bound_value(self) -> float:
        return float(self.bound.value)

    @property
    def ratio(self) -> float:
        b = self.bound_value
        return self.measured / b if b > 0 else (math.inf if self.measured > 0 else math.nan)

    @property
    def margin(self) -> float:
        """(lower limit − atol)/bound: above 1 exactly when the verdict is "violated"; 0
        when the lower limit is within rounding of 0."""
        excess = max(self.lower - self.atol, 0.0)
        if excess == 0.0:
            return 0.0
        return excess / self.bound_value if self.bound_value > 0 else math.inf

    @property
    def label(self) -> str:
        """The verdict with its marks: ``*`` when a hypothesis fails at the step sizes used,
        `` (ref)`` when the theorem does not cover the algorithm."""
        return self.verdict + ("" if self.conditions_hold else "*") + (" (ref)" if self.covered is False else "")

    @property
    def conditions_hold(self) -> bool:
        return all(c.holds for c in self.conditions)

    @property
    def violated_conditions(self) -> tuple[Condition, ...]:
        return tuple(c for c in self.conditions if not c.holds)

    def __str__(self) -> str:
        steps = ", ".join(f"{k}={v:.4g}" for k, v in self.step_sizes.items() if k != "eta_g_eta_l"
                          and isinstance(v, (int, float)))
        delays = ("E[τ_max]={:.3g}, E[τ_avg]={:.3g}" if self.expectation else "τ_max={:.3g}, τ_avg={:.3g}").format(
            self.tau_max, self.tau_avg) if math.isfinite(self.tau_max) else "no delays in the bound"
        text = (f"{self.label}: {self.algorithm} vs {self.bound_name}: measured {self.measured:.4g} "
                f"({self.confidence:.0%} limits [{self.lower:.4g}, {self.upper:.4g}], n={len(self.values)}) "
                f"vs bound {self.bound_value:.4g}, ratio {self.ratio:.3g}; {delays}; {steps}")
        if self.covered is False:
            left = [n for n in self.notes if n.startswith("these runs leave the setting")]
            text += ("; reference only: " + left[0].split(":")[0] if left
                     else f"; reference only: {self.bound_name} is not proved for {self.algorithm}")
        if not self.conditions_hold:
            text += "; conditions VIOLATED: " + "; ".join(c.name for c in self.violated_conditions)
        if self.stopped:
            text += f"; {len(self.stopped)} run(s) stopped ({self.stopped[0]})"
        return text

    def _repr_markdown_(self) -> str:
        """How Jupyter shows a result: verdict, the numbers, the formula and every hypothesis."""
        def cell(v):
            return f"{v:.4g}" if isinstance(v, float) and math.isfinite(v) else str(v)

        delays = "E[τ_max], E[τ_avg]" if self.expectation else "τ_max, τ_avg"
        rows = [("verdict", f"**{self.label}**"), ("left side", self.lhs),
                ("measured", f"{cell(self.measured)} ({self.confidence:.0%} one-sided limits [{cell(self.lower)}, "
                             f"{cell(self.upper)}], n = {len(self.values)})"),
                ("bound", f"{cell(self.bound_value)} ({self.bound_name}; {self.bound.source})"),
                ("ratio", cell(self.ratio))]
        if math.isfinite(self.tau_max):
            rows.append((delays, f"{cell(float(self.tau_max))}, {cell(float(self.tau_avg))}"))
        rows += [("step sizes", ", ".join(f"{k} = {cell(float(v))}" for k, v in self.step_sizes.items())),
                 ("run", f"{self.algorithm}, N = {self.n_clients}, K = {self.local_steps}, T = {self.rounds}")]
        rows += [(name, cell(float(v)) if isinstance(v, (int, float)) and not isinstance(v, bool) else str(v))
                 for name, v in self.extras.items()]
        text = "| | |\n|---|---|\n" + "\n".join(f"| {k} | {v} |" for k, v in rows)
        if self.conditions:
            text += "\n\n**hypotheses at these step sizes**\n\n" + "\n".join(
                f"- {'✓' if c.holds else '✗ VIOLATED'} {c.name}: {cell(c.lhs)} ≤ {cell(c.rhs)}" for c in self.conditions)
        text += f"\n\n$$ {self.bound.latex()} $$"
        if self.notes:
            text += "\n\n" + "\n".join(f"- {n}" for n in self.notes)
        return text

    def to_dict(self) -> dict:
        """A JSON-serialisable summary."""
        def num(v):
            v = float(v)
            return v if math.isfinite(v) else str(v)

        return {
            "verdict": self.verdict, "label": self.label, "covered": self.covered, "measured": num(self.measured), "lower": num(self.lower), "upper": num(self.upper),
            "confidence": self.confidence, "values": [num(v) for v in self.values], "seeds": list(self.seeds),
            "bound": {"name": self.bound_name, "value": num(self.bound.value), "source": str(self.bound.source),
                      "variant": self.bound.variant, "terms": {k: num(v) for k, v in self.bound.terms.items()}},
            "ratio": num(self.ratio), "algorithm": self.algorithm,
            "hparams": {k: v for k, v in self.hparams.items() if isinstance(v, (int, float, str, bool))},
            "step_sizes": {k: num(v) for k, v in self.step_sizes.items()},
            "conditions": [{"name": c.name, "holds": c.holds, "lhs": num(c.lhs), "rhs": num(c.rhs), "detail": c.detail}
                           for c in self.conditions],
            "conditions_hold": self.conditions_hold, "tau_max": num(self.tau_max), "tau_avg": num(self.tau_avg),
            "expectation": self.expectation, "n_clients": self.n_clients, "rounds": self.rounds,
            "local_steps": self.local_steps, "constants": self.constants, "stopped": list(self.stopped),
            "notes": list(self.notes), "lhs": self.lhs,
            "extras": {k: (num(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v)
                       for k, v in self.extras.items()},
        }
