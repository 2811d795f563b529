"""The verdict of a check: one-sided confidence limits of the measured left side against a
theorem's bound, and the :class:`CheckResult` every check returns (whatever the theorem).

    "holds"        upper limit ≤ bound
    "violated"     lower limit > bound
    "inconclusive" otherwise.

Beside the verdict, a check row may carry the exact worst case of its left side over the
theorem's class (:class:`WorstCaseColumn`, a performance-estimation programme solved by
``verify.worst_case``). A noise-free measured side above that certified worst case is a run
outside the theorem's assumptions: its verdict becomes "outside the class"
(:func:`beyond_worst_case`, :func:`with_worst_case`), whatever the bound says.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

from algorithms import History
from bounds.core import Bound, Condition

__all__ = ["CheckResult", "Judgement", "WorstCaseColumn", "OUTSIDE_CLASS", "beyond_worst_case", "with_worst_case",
           "judge", "noise_free", "diverged", "distinct_seeds", "confidence_limits", "nonnegative_lower_limit", "verdict",
           "rounding_tolerance", "AVERAGE_GRAD_NORM2", "AVERAGE_GRAD_NORM2_LATEX", "MARKS"]

#: The marks a verdict may carry, each with the footnote that explains it in a printed table.
MARKS = {
    "*": "a hypothesis of the theorem's proof fails at the step sizes used: the verdict does not test the theorem",
    "†": "the step sizes used are neither prescribed nor admitted by the theorem: its value assumes others",
    "‡": ("one fixed trace stands for an expectation over the participation: it is one sample of the participation "
          "(its seeds averaged), so the verdict can be 'violated' but never 'holds'"),
    "(ref)": "the theorem does not cover this algorithm (or the run left its setting): a reference point, no test",
    "(diverged)": "a run diverged (a non-finite or overflowing left side): 'violated' against any finite bound",
}

#: The left side of FedSUM's and LOGIT's bounds, the default measured quantity.
AVERAGE_GRAD_NORM2 = "(1/T) Σ_{t<T} ‖∇f(x_t)‖²"
AVERAGE_GRAD_NORM2_LATEX = r"\frac{1}{T}\sum_{t=0}^{T-1}\|\nabla f(x_t)\|^2"


# ---------------------------------------------------------------------------- statistics


def rounding_tolerance(constants) -> float:
    """The verdict's float tolerance: 1e-12 of the problem's gradient scale F_0 + L·Δ_f + σ²."""
    return 1e-12 * (constants.F0 + constants.L * constants.delta_f + constants.sigma2)


#: A left side beyond √(largest float) has a square that overflows: the run left every scale the
#: float arithmetic holds, and is reported as diverged (as a non-finite value is).
DIVERGED_ABOVE = math.sqrt(np.finfo(float).max)


def diverged(values) -> bool:
    """Whether any value is non-finite or beyond :data:`DIVERGED_ABOVE` in magnitude."""
    v = np.asarray(values, dtype=float)
    return bool(v.size and (~np.isfinite(v) | (np.abs(v) > DIVERGED_ABOVE)).any())


def noise_free(sigma2: float, expectation: str, pattern=None) -> bool:
    """Whether one run's left side is its own expectation: σ² = 0 and the bound is given the
    trace (``expectation="noise"``), or over a participation that is deterministic (a pattern
    whose ``deterministic`` is True). One fixed trace standing for an expectation over a random
    participation is never noise-free, whatever σ²."""
    if sigma2 != 0:
        return False
    if expectation == "noise":
        return True
    return pattern is not None and bool(getattr(pattern, "deterministic", False))


def confidence_limits(values, confidence: float = 0.95, *, exact: bool = False) -> tuple[float, float, float]:
    """(mean, lower, upper): one-sided Student-t limits at ``confidence`` on n − 1 degrees
    of freedom, mean ∓ t_{confidence, n−1}·s/√n. With a single value the limits are
    infinite unless ``exact`` (a noise-free run is its own expectation). Any infinite or
    NaN value (a run that stopped) makes all three infinite. The mean and spread are taken
    on values scaled by their largest magnitude, so huge finite values give finite limits."""
    values = np.asarray(values, dtype=float)
    if values.size == 0:
        raise ValueError("need at least one value")
    if not np.isfinite(values).all():
        return math.inf, math.inf, math.inf
    scale = float(np.max(np.abs(values))) or 1.0
    unit = values / scale
    mean = float(unit.mean()) * scale
    if values.size == 1 or exact:
        return (mean, mean, mean) if exact else (mean, -math.inf, math.inf)
    half = float(stats.t.ppf(confidence, values.size - 1) * unit.std(ddof=1) / math.sqrt(values.size)) * scale
    return mean, mean - half, mean + half


def nonnegative_lower_limit(values, confidence: float = 0.95) -> float:
    """A lower confidence limit for the mean of a nonnegative left side from n ≥ 2 values that is
    never below the Markov-type limit of their mean: with α = 1 − ``confidence``,

        max{ x̄ − t_{1−α/2, n−1}·s/√n ,  (α/2)·x̄ }.

    Markov's inequality applied to the sample mean (E[x̄] = E[X], x̄ ≥ 0) gives
    P(E[X] < (α/2)·x̄) = P(x̄ > E[X]/(α/2)) ≤ α/2; the Student-t limit at level 1 − α/2 fails with
    probability about α/2; by the union bound their maximum fails with probability at most about
    α. The Markov part does not need the spread: a diverged run among the seeds keeps the limit
    high where the t-limit alone falls below zero, and a seed at least as large as the mean of
    the others never lowers it."""
    v = np.asarray(values, dtype=float).ravel()
    alpha = 1.0 - float(confidence)
    mean, t_lower, _ = confidence_limits(v, 1.0 - alpha / 2)
    return max(t_lower, (alpha / 2) * mean)


def verdict(lower: float, upper: float, bound, atol: float = 0.0) -> str:
    """"holds" when upper ≤ bound + atol, "violated" when lower > bound + atol, else
    "inconclusive". ``atol`` absorbs float rounding (a bound of exactly 0 against a
    measured 1e-34). ``bound`` may be an interval (low, high) when the bound itself is
    uncertain (an expectation estimated by Monte-Carlo): "holds" then needs upper ≤ low and
    "violated" lower > high."""
    low, high = (bound, bound) if np.ndim(bound) == 0 else (float(bound[0]), float(bound[1]))
    if math.isnan(low) or math.isnan(high) or math.isnan(lower) or math.isnan(upper):
        return "inconclusive"
    if upper <= low + atol:
        return "holds"
    if lower > high + atol:
        return "violated"
    return "inconclusive"


@dataclass(frozen=True)
class Judgement:
    """What :func:`judge` decides: the verdict, the mean of the values with its one-sided
    limits, whether a run diverged, and the notes that explain the decision."""

    verdict: str
    measured: float
    lower: float
    upper: float
    diverged: bool
    exact: bool
    notes: tuple[str, ...] = ()


def judge(values, bound, *, confidence: float = 0.95, noise_free: bool = False, atol: float = 0.0,
          nonnegative: bool = True) -> Judgement:
    """The one rule that turns measured left sides into a verdict, for ``check``, ``check_run``,
    ``conformance`` and the sweep alike.

    * Every value is one independent sample of the left side (one seed, one trace, one record).
    * A value that is non-finite or beyond :data:`DIVERGED_ABOVE` is a diverged run: the verdict
      is "violated" against any finite bound. For a left side that is never negative this is
      Markov's inequality, P(X ≥ x) ≤ E[X]/x, at x = ∞.
    * ``noise_free`` (see :func:`noise_free`): one value, or several equal values, are the
      expectation itself, so the limits collapse to the mean (ties with the bound "hold").
    * Otherwise, two or more values: a one-sided Student-t upper limit (:func:`confidence_limits`);
      for a nonnegative left side the lower limit is :func:`nonnegative_lower_limit` (the t-limit
      and the Markov limit of the mean, combined by the union bound), else the Student-t one.
      One value of a nonnegative left side: the lower limit is the Markov part of
      :func:`nonnegative_lower_limit` alone, E[X] ≥ ((1 − confidence)/2)·x (it holds with probability
      at least 1 − (1 − confidence)/2), so a second value at least as large never lowers it; no upper
      limit, so such a value can be "violated" (far above the bound) but never "holds".
    * ``bound``: a number or an interval (low, high); see :func:`verdict`.
    """
    v = np.asarray(values, dtype=float).ravel()
    if v.size == 0:
        raise ValueError("need at least one value to judge")
    if isinstance(confidence, bool) or not 0.5 <= float(confidence) < 1:
        raise ValueError(f"confidence must lie in [0.5, 1), got {confidence!r}")
    notes: list[str] = []
    if diverged(v):
        bad = int(np.flatnonzero(~np.isfinite(v) | (np.abs(v) > DIVERGED_ABOVE))[0])
        notes.append(f"run {bad} diverged (its left side is {v[bad]:.3g}): no finite bound holds for it")
        mean = math.inf if not np.isfinite(v).all() else confidence_limits(v)[0]
        return Judgement(verdict(math.inf, math.inf, bound, atol), mean, math.inf, math.inf, True, False, tuple(notes))
    exact = noise_free and (v.size == 1 or float(np.ptp(v)) == 0.0)
    mean, lower, upper = confidence_limits(v, confidence, exact=exact)
    if v.size > 1 and not exact and nonnegative and float(v.min()) >= 0:
        lower = nonnegative_lower_limit(v, confidence)
    if v.size == 1 and not exact:
        if nonnegative and mean >= 0:
            lower = (1 - float(confidence)) / 2 * mean
            notes.append(f"one run gives no confidence interval (no spread to estimate): the lower limit is Markov's, "
                         f"((1 − {confidence:g})/2)·x as for several runs, and there is no upper limit, so the verdict "
                         "can be 'violated' but never 'holds'; use 2 or more seeds")
        else:
            notes.append("one run gives no confidence interval (no spread to estimate): the verdict is inconclusive "
                         "unless the run is noise-free; use 2 or more seeds")
    return Judgement(verdict(lower, upper, bound, atol), mean, lower, upper, False, exact, tuple(notes))


def distinct_seeds(seeds, what: str = "seeds") -> None:
    """A ValueError when a seed repeats: repeated runs of one seed are one sample, not several."""
    seen = set()
    for s in seeds:
        if s in seen:
            raise ValueError(f"{what} repeat {s!r}: runs of the same seed are one sample, not independent ones; "
                             "give distinct seeds")
        seen.add(s)


# ---------------------------------------------------------------------------- worst case

#: The verdict of a noise-free run whose measured side is above the certified worst case over the
#: theorem's class: the run breaks an assumption of the class, so the bound is not tested by it.
OUTSIDE_CLASS = "outside the class"

#: A measured side counts as above the worst case beyond ``value·(1 + SOLVER_SLACK·accuracy) + ABOVE_ATOL``:
#: the certified value is exact up to the solver's relative accuracy (duality gap), and float rounding.
SOLVER_SLACK = 10.0
ABOVE_ATOL = 1e-9


@dataclass(frozen=True)
class WorstCaseColumn:
    """The worst case of a row's left side over its theorem's class, at the row's step sizes and
    trace(s), or why there is none.

    ``value``: the certified worst case (None when not computed or the programme is unbounded);
    ``label``: "worst case on the trace", or for a theorem in expectation over the participation
    the mean of per-trace worst cases, an upper bound on the worst case of the expectation;
    ``status``, ``solver``, ``accuracy``: the solver's word (the least accurate trace's), its name
    and the largest relative duality gap; ``function_class``: the class in words (with its
    relaxation in ``relaxation``); ``slack`` = bound / worst case (the theorem's slack);
    ``benignness`` = worst case / measured (how far the instance is from the worst); ``constants``:
    the class's constants the programmes used;
    ``reason``: why there is no value; ``predicted``: the predicted solve time in seconds (all
    traces); ``traces``: programmes solved; ``outside``: the measured side is above the value
    (see :func:`beyond_worst_case`)."""

    value: float | None = None
    label: str = ""
    status: str = "not computed"
    solver: str | None = None
    accuracy: float | None = None
    function_class: str | None = None
    relaxation: str | None = None
    slack: float | None = None
    benignness: float | None = None
    reason: str | None = None
    predicted: float | None = None
    seconds: float | None = None
    traces: int = 0
    outside: bool = False
    #: The class's constants (L, delta_f, F0, heterogeneity) the programmes used.
    constants: dict | None = None

    @classmethod
    def missing(cls, reason: str, predicted: float | None = None) -> "WorstCaseColumn":
        """A column without a value, saying why."""
        return cls(reason=reason, predicted=predicted)

    def to_dict(self) -> dict:
        def num(v):
            return None if v is None else (float(v) if math.isfinite(v) else str(float(v)))

        return {"value": num(self.value), "label": self.label, "status": self.status, "solver": self.solver,
                "accuracy": num(self.accuracy), "class": self.function_class, "class_constants": self.constants,
                "relaxation": self.relaxation,
                "slack": num(self.slack), "benignness": num(self.benignness), "reason": self.reason,
                "predicted_seconds": num(self.predicted), "seconds": num(self.seconds), "traces": self.traces,
                "outside": self.outside}

    def summary(self) -> str:
        """One line: the value with its label, solver and ratios, or the reason there is none."""
        if self.value is None:
            return f"worst case: {self.status}" + (f": {self.reason}" if self.reason else "")
        text = (f"worst case {self.value:.4g} ({self.label}; {self.status}, {self.solver}, accuracy "
                f"{self.accuracy:.1e})" if self.accuracy is not None else
                f"worst case {self.value:.4g} ({self.label}; {self.status}, {self.solver})")
        ratios = [f"slack bound/worst {self.slack:.3g}" if self.slack is not None else None,
                  f"worst/measured {self.benignness:.3g}" if self.benignness is not None else None]
        text += "".join(f", {r}" for r in ratios if r)
        return text + f"; over: {self.function_class}"


def beyond_worst_case(measured: float, column: WorstCaseColumn | None) -> bool:
    """Whether ``measured`` is above the certified worst case of ``column`` by more than the
    solver's accuracy: measured > value·(1 + 10·accuracy) + 1e-9. A column without a value or
    without a known accuracy certifies nothing."""
    if column is None or column.value is None or column.accuracy is None:
        return False
    measured = float(measured)
    if math.isnan(measured):
        return False
    return measured > column.value * (1 + SOLVER_SLACK * column.accuracy) + ABOVE_ATOL


def with_worst_case(result: "CheckResult", column: WorstCaseColumn, look_at: str = "") -> "CheckResult":
    """``result`` carrying ``column``; where the measured side is above the certified worst case
    (:func:`beyond_worst_case`) its verdict becomes :data:`OUTSIDE_CLASS` and a note says what to
    look at (``look_at``: the class's constants as given against what the check knows of them)."""
    if not beyond_worst_case(result.measured, column):
        return dataclasses.replace(result, worst_case=column)
    column = dataclasses.replace(column, outside=True)
    note = (f"outside the class: the measured {result.lhs} = {result.measured:.6g} is above the certified worst case "
            f"{column.value:.6g} over {column.function_class} (accuracy {column.accuracy:.1e}), so the run breaks an "
            f"assumption of {result.bound_name}: the judge's verdict against the bound was {result.verdict!r} and "
            "tests nothing. Look at the constants the class uses"
            + (f" ({look_at})" if look_at else "") + f", or at the algorithm (the worst case is {result.algorithm}'s "
            "as the engine runs it)")
    return dataclasses.replace(result, verdict=OUTSIDE_CLASS, worst_case=column, notes=result.notes + (note,))


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
    #: A run diverged (see :func:`judge`).
    diverged: bool = False
    #: Why the step sizes are not the theorem's (mark ``†``), or None.
    steps_outside: str | None = None
    #: One fixed trace stands for an expectation over the participation (mark ``‡``).
    fixed_trace: bool = False
    #: (low, high) when the bound is uncertain (an expectation estimated by Monte-Carlo), else None.
    bound_range: tuple[float, float] | None = None
    #: The History of the first noise seed on the first trace (per-round ‖∇f(x_t)‖², loss,
    #: final parameters), kept so that plots and reports need not run it again.
    first_run: History | None = field(default=None, repr=False, compare=False)
    #: The worst case of the left side over the theorem's class at the row's step sizes and
    #: trace(s), or why there is none (:class:`WorstCaseColumn`); None where nothing was asked.
    worst_case: WorstCaseColumn | None = None

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
    def marks(self) -> tuple[str, ...]:
        """The marks of :data:`MARKS` this verdict carries."""
        return tuple(m for m, on in (("(diverged)", self.diverged), ("*", not self.conditions_hold),
                                     ("†", self.steps_outside is not None), ("‡", self.fixed_trace),
                                     ("(ref)", self.covered is False)) if on)

    @property
    def label(self) -> str:
        """The verdict with its marks (:data:`MARKS`): ``(diverged)``, ``*`` (a hypothesis fails at
        the step sizes used), ``†`` (step sizes not the theorem's), ``‡`` (one fixed trace for an
        expectation over the participation), ``(ref)`` (the theorem does not cover the algorithm)."""
        marks = self.marks
        text = self.verdict + (" (diverged)" if "(diverged)" in marks else "")
        text += "".join(m for m in ("*", "†", "‡") if m in marks)
        return text + (" (ref)" if "(ref)" in marks else "")

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
        if self.worst_case is not None:
            rows.append(("worst case", self.worst_case.summary().removeprefix("worst case").lstrip(": ")))
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
            "notes": list(self.notes), "lhs": self.lhs, "marks": list(self.marks), "diverged": self.diverged,
            "steps_outside": self.steps_outside, "fixed_trace": self.fixed_trace,
            "bound_range": None if self.bound_range is None else [num(b) for b in self.bound_range],
            "extras": {k: (num(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v)
                       for k, v in self.extras.items()},
            "worst_case": None if self.worst_case is None else self.worst_case.to_dict(),
        }
