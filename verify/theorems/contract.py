"""The contract of a checkable theorem.

A theorem is checked against runs through one object, :class:`Theorem`, that states beside its
right-hand side (a ``bounds`` function returning a :class:`bounds.core.Bound`):

* ``lhs``: the measured quantity its left side bounds, in words and LaTeX (e.g.
  (1/T) Σ_{t<T} ‖∇f(x_t)‖², a stage-weighted average, F(w̄_T) − F*);
* ``expectation``: ``"noise"`` when the left side is an expectation over the stochastic
  gradients given the participation sequence, ``"participation"`` when it is also taken over
  the participation (the traces are then drawn afresh from the pattern, one per seed);
* ``covers``: the algorithms it is proved for, ``reductions``: the others that are one of
  them (why, with the paper's reference);
* ``steps``: the step sizes it prescribes or the admissible set it allows, in words;
* ``needs``: the constants beyond L, σ², Δ_f, F_0, each with how it is measured;
* ``plan``: a function of a :class:`Setup` (problem, constants, trace or pattern, algorithm)
  returning a :class:`Plan`: the algorithm at the theorem's step sizes, the traces to run,
  the left side of one run, and the bound (evaluated after the runs when it takes a measured
  input such as LOGIT's generator error).

``verify.check`` knows theorems only through this object; so do ``fedverify check --theorem``
and the conformance search. A user's theorem is a :class:`Theorem` too (see
:func:`verify.theorems.user_theorem`).
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Callable, Mapping

__all__ = ["Theorem", "Setup", "Plan", "RecordReading", "NotCheckable", "EXPECTATIONS", "option_number",
           "option_numbers"]

EXPECTATIONS = ("noise", "participation")


def option_number(options: Mapping, name: str, default: float) -> float:
    """``options[name]`` as one finite real number (``default`` when absent), or a ValueError
    naming the option and the value given (``--set decay=1,2`` is not a number)."""
    value = options.get(name, default)
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ValueError(f"{name} must be one finite number, got {value!r}")
    return float(value)


def option_numbers(options: Mapping, name: str) -> tuple[float, ...] | None:
    """``options[name]`` as a non-empty sequence of finite positive numbers (one number is a
    sequence of one), None when absent, or a ValueError naming the option and the value."""
    value = options.get(name)
    if value is None:
        return None
    items = (value,) if isinstance(value, numbers.Real) and not isinstance(value, bool) else value
    try:
        out = tuple(items)
    except TypeError:
        out = ()
    if not out or any(isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v) or v <= 0
                      for v in out):
        raise ValueError(f"{name} must be one or more positive numbers separated by commas, got {value!r}")
    return tuple(float(v) for v in out)


class NotCheckable(ValueError):
    """Raised by :meth:`Theorem.require_checkable` for a statement that no run can test."""


@dataclass(frozen=True)
class Setup:
    """What a theorem's ``plan`` is given.

    ``problem`` (an ``algorithms`` problem; None for recorded runs, see ``recorded``), ``algorithm`` (the registered name asked for),
    ``hparams`` (the user's extra hyper-parameters), ``given`` (an ``Algorithm`` whose own step
    sizes are to be used, or None), ``constants`` (``bounds.Constants`` with N, K, T of the
    run; ``extra`` may carry constants the user knows, e.g. ``zeta2``), ``trace`` (a fixed
    ``Trace``) or ``pattern`` (a participation pattern; exactly one of the two), ``seeds``,
    ``trace_seed``."""

    problem: object
    algorithm: str
    hparams: Mapping
    given: object | None
    constants: object
    trace: object | None
    pattern: object | None
    seeds: tuple[int, ...]
    trace_seed: int = 0
    #: Which step sizes a delay bound runs at: "theorem", "given" (``given_steps``) or "admissible".
    step_mode: str = "theorem"
    given_steps: Mapping | None = None
    #: Traces drawn for a bound in full expectation (None: one per seed, paired with it).
    n_traces: int | None = None
    confidence: float = 0.95
    #: The traces of recorded runs (``verify.check_run``): the plan is judged on these runs, one
    #: per trace, and ``problem`` is None (the records carry what the left side needs).
    recorded: tuple | None = None
    #: The step sizes each recorded run states (its header's ``step_sizes``, possibly incomplete),
    #: one per ``recorded`` trace, for a delay bound judged on records (``given_steps`` is the first's).
    recorded_steps: tuple | None = None
    #: The recorded runs' names (their files), one per ``recorded`` trace: the judge's messages name
    #: the records (a delay bound's records; a plan's records are named by their seeds).
    recorded_names: tuple | None = None

    @property
    def n_clients(self) -> int:
        return self.constants.n_clients

    @property
    def rounds(self) -> int:
        return self.constants.rounds

    @property
    def local_steps(self) -> int:
        return self.constants.local_steps

    def unit_traces(self, expectation: str) -> tuple[list, str | None]:
        """The traces the runs follow and a note: one per seed drawn from the pattern for a
        bound over the participation; else the fixed trace (or the pattern's trace of
        ``trace_seed``)."""
        from participation import Trace

        if self.recorded is not None:
            note = ("bound in expectation over the participation, judged on one recorded trace"
                    if expectation == "participation" and len(self.recorded) == 1 else None)
            return list(self.recorded), note
        if self.pattern is None:
            note = ("bound in expectation over the participation, judged on one fixed trace"
                    if expectation == "participation" else None)
            return [self.trace], note
        if expectation == "participation":
            batch = self.pattern.sample_batch(self.rounds, len(self.seeds), seed=self.trace_seed)
            return [Trace(m) for m in batch], None
        return [self.pattern.sample(self.rounds, seed=self.trace_seed)], (
            f"conditional bound: judged on the trace of seed {self.trace_seed} drawn from {type(self.pattern).__name__}")


@dataclass
class Plan:
    """What a theorem runs and how it judges the runs.

    ``algorithm``: the ``Algorithm`` to run (at the theorem's step sizes); ``traces``: the unit
    traces (paired with the seeds when there is one per seed); ``measure(history, problem)``:
    the left side of one run; ``bound(histories)``: the Bound, given every run (measured inputs
    are pooled over them); ``extras(histories)``: measured side quantities reported beside the
    verdict (name → number); ``covered(histories)``: True/False where coverage depends on the
    run (e.g. CA-Fed's weights stayed fixed), else None to use ``Theorem.covers``;
    ``run_options``: keywords of ``algorithms.run`` (``observe``, ``local_schedule``);
    ``step_sizes``: the step sizes used, for the report; ``tau``: (τ_max, τ_avg) shown, or None."""

    algorithm: object
    traces: list
    measure: Callable
    bound: Callable
    step_sizes: dict
    extras: Callable | None = None
    covered: Callable | None = None
    run_options: dict = field(default_factory=dict)
    tau: tuple[float, float] | None = None
    notes: list[str] = field(default_factory=list)
    #: The left side without any run, for a statement about the problem alone (e.g. CA-Fed's
    #: ε_bias = F(w_B*) − F*, eqs. (11) and (15)): ``values() -> list of floats``. ``traces`` is
    #: then empty and ``bound([])`` is called with no histories.
    values: Callable | None = None
    #: True when the left side of every run is its own expectation (no noise, no random
    #: participation), so that equal values are judged exactly; None: decided from σ² and the
    #: participation by the judge's rule (``verify.verdicts.noise_free``).
    noise_free: bool | None = None
    #: Why the step sizes used are neither prescribed nor admitted by the theorem (a user's own,
    #: a record's), or None: the verdict then carries the ``†`` mark.
    steps_outside: str | None = None
    #: False when the left side can be negative (e.g. a difference of two measured sides): the
    #: one-run Markov limit of ``verify.verdicts.judge`` then does not apply.
    nonnegative: bool = True
    #: ``bound_range(histories) -> (low, high)`` when the bound is uncertain (an input estimated
    #: by Monte-Carlo, e.g. E[τ_max] of FedSUM Cor 4.1): the verdict then needs the measured side
    #: below ``low`` to hold and above ``high`` to be violated.
    bound_range: Callable | None = None
    #: ``start_bound(histories) -> Bound | None`` when the bound reads constants estimated along the
    #: judged runs (σ_g² from their iterates): the bound at those constants measured at the runs'
    #: start instead, where the runs cannot have inflated them. Where the runs are "violated"
    #: against it, the judge never lets the run-estimated constants turn that into "holds".
    start_bound: Callable | None = None
    #: True when one trace stands for an expectation over the participation (the ``‡`` mark); None:
    #: the judge's rule (a bound over the participation judged without a pattern to draw from).
    fixed_trace: bool | None = None
    #: The keywords a delay bound is evaluated at besides ``constants`` (``verify.theorems.delay``),
    #: so that it can be evaluated again at other constants (a record without F_0).
    bound_inputs: dict | None = None
    #: The step sizes ({"eta_g", "eta_l"}) to run on each of ``traces`` when the plan leaves
    #: ``algorithm`` None for its caller to build (a delay bound: ``verify.theorems.runner`` builds
    #: the algorithm asked for at each).
    trace_steps: list | None = None


@dataclass(frozen=True)
class RecordReading:
    """How a theorem with a plan of its own reads run records (``verify.check_run``,
    ``verify.theorems.from_records``): everything the records must state for it.

    ``models``: the participation models (a record header's ``availability`` model names) the
    theorem is proved under, None to read the participation from the recorded S_t alone;
    ``assumption``: what the theorem assumes of the participation, named when a record's model
    is refused; ``fields``: the record fields the plan reads, each as (field, the constants that
    replace it when all are given), a per-round number recorded every round, a per-client field
    at least once ("grad_norm2": the left side is built from every round's ‖∇f(x_t)‖²);
    ``estimate``: ``estimate(records) -> (pattern, note)``, the theorem's participation model
    fitted to the recorded S_t for a header saying ``availability: estimate`` (None: refused);
    ``constant_check``: how a record's constants are checked against its own numbers
    (``verify.records.consistency.check_constants``): "mean", "largest" (a constant bounding every
    client's term) or None (the plan checks them); ``equal_weights``: whether the server must have
    weighted the replies equally (False where the weights are the algorithm's own);
    ``steps_outside(theorem, setup, plan, bound) -> str | None``: why the recorded step sizes lie outside
    the theorem's (None: the plan's own ``steps_outside``); ``check_given(histories, given,
    names)``: refuses constants the records contradict (None: nothing to check);
    ``measured(result, problem, records) -> [(constants, hparams), ...]``: what a check measured on
    its problem, to be added to the header of each record it wrote (``check --record``), so that
    ``check_run`` judges the records alone (None: the records need nothing beyond the run)."""

    models: tuple[str, ...] | None = None
    assumption: str = ""
    fields: tuple[tuple[str, tuple[str, ...]], ...] = ()
    estimate: Callable | None = None
    constant_check: str | None = "mean"
    equal_weights: bool = True
    steps_outside: Callable | None = None
    check_given: Callable | None = None
    measured: Callable | None = None

    def __post_init__(self):
        if self.constant_check not in ("mean", "largest", None):
            raise ValueError(f"constant_check must be 'mean', 'largest' or None, got {self.constant_check!r}")

    @property
    def reads_every_round(self) -> bool:
        """Whether the left side is built from every round's recorded ‖∇f(x_t)‖²."""
        return any(name == "grad_norm2" for name, _ in self.fields)


@dataclass(frozen=True)
class Theorem:
    """A checkable theorem (see the module docstring). ``plan`` is None for a statement that no
    run can test; ``reason`` then says why (e.g. a proof step)."""

    name: str
    bound: Callable
    lhs: str
    lhs_latex: str
    expectation: str
    covers: tuple[str, ...] | None
    steps: str
    plan: Callable | None
    needs: Mapping[str, str] = field(default_factory=dict)
    reductions: Mapping[str, str] = field(default_factory=dict)
    assumptions: str = ""
    reason: str = ""
    #: True for a bound written in the trace's delays τ_max, τ_avg (or their expectations) and
    #: η_g, η_l: ``check`` then runs it on its delay path (FedSUM's theorems, most users' bounds),
    #: which prescribes FedSUM Thm 4.1's step sizes unless the bound prescribes its own.
    delay_bound: bool = False
    #: True when a delay bound's statement prescribes its step sizes (its own, or FedSUM Thm 4.1's
    #: for each realised trace): other step sizes then carry the ``†`` mark. False for a bound that
    #: only runs at Thm 4.1's by default (most users' bounds) or admits any (the lemmas).
    prescribes_steps: bool = False
    #: Keywords of ``check(hparams=...)`` that the theorem's plan reads and the algorithm does not
    #: take (e.g. momentum's ``stages``, CA-Fed's ``decay``).
    options: tuple[str, ...] = ()
    #: The left side of one run, ``measure(history, problem) -> float`` (delay bounds only; a
    #: plan carries its own): (1/T) Σ_t ‖∇f(x_t)‖² by default.
    measure: Callable | None = None
    #: Whether ``measure`` is never negative, so that the judge may take Markov's lower limit
    #: (``verify.verdicts.judge``); a plan states its own (``Plan.nonnegative``).
    nonnegative: bool = True
    #: The ``bounds`` function ``fedverify bound`` evaluates at numbers, when ``bound`` is a
    #: wrapper that ``check`` calls (e.g. FedSUM Cor G.1 read from a pattern); None: ``bound``.
    formula: Callable | None = None
    #: One line on what the theorem is (``fedverify bound --list``); default: the first line of
    #: the formula's docstring.
    summary: str = ""
    #: A working ``fedverify bound NAME ...`` argument line (``bound NAME --inputs`` prints it).
    example: str = ""
    #: The patterns (preset names) and algorithms ``fedverify check --theorem NAME`` runs when
    #: none are given: the participation the theorem assumes and the algorithms it covers.
    patterns: tuple[str, ...] = ()
    algorithms: tuple[str, ...] = ()
    #: Conformance search space: ``(draw, n, T) -> (problem, trace or pattern, hparams)`` for
    #: ``verify.conformance`` (a hypothesis ``draw``), and ``seed_cases(T) -> [(problem, source,
    #: hparams), ...]``, the hand-made cases tried first.
    space: Callable | None = None
    seed_cases: Callable | None = None
    #: How run records are read for it (a theorem with a plan of its own); None: the records give
    #: only what every plan reads (the delay bounds read the recorded S_t and ‖∇f(x_t)‖²).
    records: RecordReading | None = None

    def __post_init__(self):
        if not self.summary:
            doc = ((self.formula or self.bound).__doc__ or "").strip()
            object.__setattr__(self, "summary", doc.splitlines()[0] if doc else "")
        if self.expectation not in EXPECTATIONS:
            raise ValueError(f"expectation must be one of {EXPECTATIONS}, got {self.expectation!r}")
        if self.covers is not None:
            if isinstance(self.covers, str) or not all(isinstance(c, str) for c in self.covers):
                raise ValueError(f"covers must be a sequence of algorithm names, got {self.covers!r}")
            object.__setattr__(self, "covers", tuple(self.covers))

    @property
    def checkable(self) -> bool:
        return self.plan is not None or self.delay_bound

    @property
    def evaluator(self) -> Callable:
        """The function ``fedverify bound`` evaluates: ``formula`` or ``bound``."""
        return self.formula or self.bound

    @property
    def paper(self) -> str:
        """The prefix of the name ("fedsum", "cafed", ...), or "" for a user's theorem without one."""
        return self.name.split(".", 1)[0] if "." in self.name else ""

    def require_checkable(self) -> None:
        if not self.checkable:
            raise NotCheckable(f"{self.name} cannot be checked by running: {self.reason}")

    def covered(self, algorithm: str) -> bool | None:
        """Whether the theorem is proved for ``algorithm`` (None: the theorem does not say)."""
        if self.covers is None:
            return None
        return algorithm in self.covers or algorithm in self.reductions

    def describe(self) -> str:
        """A few lines: what it bounds, for whom, at which step sizes, with which constants."""
        lines = [f"{self.name}: {self.lhs} (expectation over the "
                 + ("stochastic gradients, given the trace)" if self.expectation == "noise"
                    else "stochastic gradients and the participation)"),
                 f"  covers: {', '.join(self.covers or ()) or 'not declared'}"
                 + "".join(f"; {a}: {why}" for a, why in self.reductions.items()),
                 f"  step sizes: {self.steps}"]
        if self.needs:
            lines.append("  constants: " + "; ".join(f"{k}: {v}" for k, v in self.needs.items()))
        if self.assumptions:
            lines.append(f"  runs on: {self.assumptions}")
        if not self.checkable:
            lines.append(f"  not checkable by running: {self.reason}")
        return "\n".join(lines)

    def _repr_markdown_(self) -> str:
        text = (f"**{self.name}** bounds $${self.lhs_latex}$$ (expectation over "
                + ("the noise, given the trace" if self.expectation == "noise" else "noise and participation") + ")\n\n"
                f"- covers: {', '.join(self.covers or ()) or 'not declared'}\n- step sizes: {self.steps}\n")
        text += "".join(f"- {k}: {v}\n" for k, v in self.needs.items())
        return text
