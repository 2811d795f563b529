"""What every theorem returns: a :class:`Bound`, evaluated from one sympy definition.

A theorem is written once as named sympy terms (a :class:`Formula`); its value, its
terms, its LaTeX and any symbolic check all come from that definition, evaluated through
``sympy.lambdify``. Formulas whose constants overflow a float (CA-Fed's M = 2^N, powers
of τ_max in the thousands) are evaluated in log space: each term's logarithm is expanded
(log of products → sums of logs) before lambdify, the terms are combined by log-sum-exp,
and the Bound keeps ``log_value`` beside a ``value`` that may then be ``inf``.

Floating point (the rule every theorem follows): a bound is evaluated in float64, and
where float64 cannot hold it the Bound says so instead of returning a silent wrong number.

* Every term is also evaluated as a logarithm (:func:`log_form`: products become sums of
  logarithms, sums of positive parts log-sum-exp). A term whose float evaluation overflowed,
  underflowed or lost its digits in a subnormal intermediate takes the value exp(log); at
  ordinary inputs the two agree and the float value is kept bit for bit. A lambdified term that
  raises OverflowError or ZeroDivisionError with Python floats is evaluated again with numpy
  float64 (inf or nan instead of an exception).
* A value float64 cannot hold gets a failing condition whose name starts with ``"float64: "``
  (:data:`FLOAT64`) and names the overflow (``inf``, or above 1.8e308), the underflow (0 or
  subnormal while the exact bound is positive: reading it would claim a stationary point) or the
  nan, so ``valid`` is False; ``log_value`` then holds the logarithm of the exact value where it is
  known. Formulas evaluated in log space (CA-Fed) keep ``value = inf`` with a finite
  ``log_value`` as a legitimate answer: only a ``log_value`` that is itself nan or +inf fails
  there. An input that is not finite (a quantity that overflowed before the formula) fails too,
  except an input the theorem declares infinite in its own right (CA-Fed's χ² = ∞ when a client
  with α_k > 0 is excluded: the bound is then exactly +∞, vacuous but true).
* A prescribed step size is positive by its formula; one that is 0, subnormal or not finite in
  float64 gets a failing ``float64:`` condition naming it.
* Conditions compare their two sides exactly where float64 cannot: a side may be a
  :class:`Magnitude` (a float beside its logarithm, built with ordinary arithmetic), and a side
  that overflowed or underflowed is compared through the logarithms, so ``1e-309 ≤ 1.25e-309``
  is not reported violated because the right side rounded to 0.
* An input that cannot be converted to float64 at all (an integer beyond 1.8e308, a count
  included) is refused with a ValueError naming it; no theorem raises OverflowError,
  ZeroDivisionError or TypeError for a number in range.
"""
from __future__ import annotations

import functools
import math
import numbers
import sys
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np
import sympy as sp
from participation.validation import integer


@dataclass(frozen=True)
class Source:
    """Where a formula comes from: a paper of :data:`bounds.papers.PAPERS` (or any other
    name, for a user's own theorem) and the place in it a reader can find, e.g.
    ``Source("FedSUM", "Thm 4.1", "proof in App. G, eq. (96)")``.

    ``item`` is the theorem, lemma, corollary, equation or algorithm number; ``where``
    optional further places (the proof's equations, a section); ``note`` what fedverify
    decided there (a corrected typo, a variant)."""

    paper: str
    item: str
    where: str = ""
    note: str = ""

    @property
    def reference(self):
        """The full :class:`~bounds.papers.Paper`, or None for a paper outside the four."""
        from .papers import PAPERS

        return PAPERS.get(self.paper)

    def __str__(self) -> str:
        paper = self.reference
        text = f"{paper.short if paper else self.paper}, {self.item}"
        if self.where:
            text += f" ({self.where})"
        return f"{text}; {self.note}" if self.note else text


@dataclass(frozen=True)
class Condition:
    """A hypothesis of a theorem, ``lhs ≤ rhs`` evaluated at the user's numbers.

    ``log_lhs`` / ``log_rhs`` are the sides' natural logarithms when a side is out of
    float64's range (``lhs`` or ``rhs`` then reads 0 or inf); ``holds`` was decided on them."""

    name: str
    holds: bool
    lhs: float
    rhs: float
    detail: str = ""
    log_lhs: float | None = None
    log_rhs: float | None = None

    def __str__(self) -> str:
        mark = "ok" if self.holds else "VIOLATED"
        lhs, rhs = _shown(self.lhs, self.log_lhs), _shown(self.rhs, self.log_rhs)
        return f"{self.name}: {lhs} ≤ {rhs} [{mark}]" + (f" ({self.detail})" if self.detail else "")


def _shown(value: float, log: float | None) -> str:
    """``value`` as %.6g, or from its logarithm (``1.5e-400``) when float64 could not hold it."""
    if log is None or not math.isfinite(log) or _TINY <= abs(value) < math.inf:
        return f"{value:.6g}"
    exponent = math.floor(log / _LN10)
    mantissa = math.exp(log - exponent * _LN10)
    if mantissa >= 9.999995:
        mantissa, exponent = mantissa / 10, exponent + 1
    return f"{mantissa:.6g}e{exponent:+d}"


#: Smallest normal float64; values below it (subnormals) have lost digits.
_TINY = sys.float_info.min
#: ln of the largest float64 (exp overflows above it) and ln 10.
_LOG_MAX = math.log(sys.float_info.max)
_LN10 = math.log(10.0)


def _to_float(value, name: str = "value") -> float:
    """float(value), or a ValueError naming ``name`` when it does not fit a float64."""
    try:
        return float(value)
    except OverflowError:
        raise ValueError(f"{name} is too large for float64 (an integer of about 2**{int(value).bit_length()}; "
                         f"at most 1.8e308)") from None


def _faithful(value: float, log: float) -> bool:
    """Whether the float ``value`` is the number whose logarithm is ``log`` (to 1e-9)."""
    if math.isnan(log) or math.isnan(value):
        return math.isnan(log)
    if value == 0 or math.isinf(value) or math.isinf(log):
        return (value == 0 and log == -math.inf) or (value == math.inf and log == math.inf)
    return value >= _TINY and abs(math.log(value) - log) <= 1e-9 + 1e-13 * abs(log)


def _settle(value: float, log: float) -> float:
    """The float to report for a quantity known as (float evaluation, logarithm): the float
    when it is faithful, else exp(log) (0 below float64's range, inf above). A logarithm
    that is itself ±inf or nan (an overflow inside the logarithmic form) leaves a normal
    float as it is."""
    if _faithful(value, log) or math.isnan(log):
        return value
    if math.isinf(log):
        if _TINY <= value < math.inf:
            return value
        return 0.0 if log < 0 else math.inf
    return math.exp(log) if log < _LOG_MAX else math.inf


class Magnitude:
    """A non-negative real carried as its float64 value and its natural logarithm.

    Built with ordinary arithmetic (``*``, ``/``, ``**``, ``+``, :meth:`sqrt`, ``min``/``max``)
    from floats and integers, it gives the same float, bit for bit, as the plain expression
    wherever float64 holds every intermediate; where one overflows, underflows or goes
    subnormal, the logarithm (computed alongside) still knows the number: ``value`` is then
    exp(log) (0 or inf when even that is out of range) and comparisons use the logarithms.
    Conditions (:func:`at_most`) and step sizes use it so that extreme inputs are compared
    exactly instead of after rounding to 0 or inf.
    """

    __slots__ = ("value", "log")

    def __init__(self, value: float, log: float):
        self.value, self.log = _settle(value, log), log

    @classmethod
    def of(cls, x) -> "Magnitude":
        """``x`` (a Magnitude, or a real ≥ 0) as a Magnitude."""
        if isinstance(x, Magnitude):
            return x
        if isinstance(x, numbers.Integral) and not isinstance(x, bool):
            x = int(x)
            if x < 0:
                raise ValueError(f"a Magnitude is ≥ 0, got {x}")
            try:
                value = float(x)
            except OverflowError:
                value = math.inf
            return cls(value, math.log(x) if x > 0 else -math.inf)
        value = float(x)
        if value < 0:
            raise ValueError(f"a Magnitude is ≥ 0, got {value}")
        if math.isnan(value):
            return cls(value, math.nan)
        return cls(value, math.log(value) if 0 < value < math.inf else (-math.inf if value == 0 else math.inf))

    @property
    def exact(self) -> bool:
        """Whether ``value`` holds the number itself (not 0 or inf for one out of range)."""
        return _faithful(self.value, self.log) and (self.value == 0 or self.value >= _TINY)

    def __float__(self) -> float:
        return self.value

    def __repr__(self) -> str:
        return f"Magnitude({self.value!r}, log={self.log!r})"

    def __mul__(self, other):
        other = Magnitude.of(other)
        return Magnitude(self.value * other.value, self.log + other.log)

    __rmul__ = __mul__

    def __truediv__(self, other):
        other = Magnitude.of(other)
        try:
            value = self.value / other.value
        except ZeroDivisionError:
            value = math.inf if self.value > 0 else math.nan
        return Magnitude(value, self.log - other.log)

    def __rtruediv__(self, other):
        return Magnitude.of(other) / self

    def __pow__(self, exponent):
        exponent = float(exponent)
        try:
            value = self.value ** exponent
        except (OverflowError, ZeroDivisionError):
            value = math.inf
        return Magnitude(value, 0.0 if exponent == 0 else exponent * self.log)

    def sqrt(self) -> "Magnitude":
        """√x (with ``math.sqrt`` on the float, as plain code would)."""
        return Magnitude(math.sqrt(self.value), self.log / 2)

    def __add__(self, other):
        other = Magnitude.of(other)
        return Magnitude(self.value + other.value, _logaddexp2(self.log, other.log))

    __radd__ = __add__

    def _key(self, other):
        other = Magnitude.of(other)
        if self.exact and other.exact:
            return self.value, other.value
        return self.log, other.log

    def __lt__(self, other):
        a, b = self._key(other)
        return a < b

    def __le__(self, other):
        a, b = self._key(other)
        return a <= b

    def __gt__(self, other):
        a, b = self._key(other)
        return a > b

    def __ge__(self, other):
        a, b = self._key(other)
        return a >= b


def _logaddexp2(a: float, b: float) -> float:
    """ln(e^a + e^b), exact at ±inf (nan only from nan)."""
    if math.isnan(a) or math.isnan(b):
        return math.nan
    top = max(a, b)
    if math.isinf(top) or a == b == -math.inf:
        return top
    return top + math.log1p(math.exp(-abs(a - b)))


def at_most(name: str, lhs, rhs, detail: str = "", *, rtol: float = 1e-12) -> Condition:
    """The condition ``lhs ≤ rhs`` (with a relative tolerance for rounding).

    Either side may be a :class:`Magnitude`: when both sides are exact floats the comparison
    is the float one; when a side overflowed or underflowed float64 it is decided on the
    logarithms (ln lhs ≤ ln rhs + ln(1 + rtol)) and the Condition keeps them."""
    if isinstance(lhs, Magnitude) or isinstance(rhs, Magnitude):
        left, right = Magnitude.of(lhs), Magnitude.of(rhs)
        if not (left.exact and right.exact):
            holds = bool(left.log <= right.log + math.log1p(rtol))
            return Condition(name, holds, left.value, right.value, detail, left.log, right.log)
        lhs, rhs = left.value, right.value
    lhs, rhs = _to_float(lhs, f"{name}: left side"), _to_float(rhs, f"{name}: right side")
    return Condition(name, bool(lhs <= rhs * (1 + rtol) or lhs <= rhs), lhs, rhs, detail)


class Formula:
    """A right-hand side as named sympy terms over ``symbols`` (their order is the
    argument order of the lambdified functions)."""

    def __init__(self, terms: Mapping[str, sp.Expr], symbols, *, log_space: bool = False):
        self.terms = dict(terms)
        self.symbols = tuple(symbols)
        self.log_space = log_space
        self.expr = sp.Add(*self.terms.values())
        free = self.expr.free_symbols - set(self.symbols)
        if free:
            raise TypeError(f"formula uses symbols not listed: {sorted(map(str, free))}")
        if log_space:
            logs = [sp.expand_log(sp.log(term), force=True) for term in self.terms.values()]
            self._functions = [sp.lambdify(self.symbols, log, "numpy") for log in logs]
        else:
            self._functions = [sp.lambdify(self.symbols, term, "numpy") for term in self.terms.values()]
        self._logs = None

    def _log_functions(self):
        """Each term's logarithm (:func:`log_form`), lambdified: the cross-check of float evaluation."""
        return [sp.lambdify(self.symbols, log_form(term), [{"logaddexp": _logaddexp}, "numpy"])
                for term in self.terms.values()]

    def evaluate(self, values: Mapping[sp.Symbol, float]) -> tuple[float, dict[str, float], float | None]:
        """(value, terms, log value or None) at ``values`` (a number for every symbol).

        Outside log space the log value is None unless the value cannot be held by float64
        (then it is the logarithm of the exact value, or nan when unknown); see the module
        docstring for how each term is checked against its logarithm."""
        missing = [str(s) for s in self.symbols if s not in values]
        if missing:
            raise ValueError(f"no value given for {', '.join(missing)}")
        args = [_to_float(values[s], str(s)) for s in self.symbols]
        outputs = _call(self._functions, args)
        if self.log_space:
            log_value = _log_sum_exp(outputs)
            terms = {name: _exp(log) for name, log in zip(self.terms, outputs)}
            return _exp(log_value), terms, log_value
        if self._logs is None:
            self._logs = self._log_functions()
        logs = _call(self._logs, args)
        settled = [_settle(value, log) for value, log in zip(outputs, logs)]
        value = float(sum(settled))
        # the logarithm of each term: its own where finite, else that of the float kept
        known = [log if math.isfinite(log) else _log_of(v) for v, log in zip(settled, logs)]
        log_value = math.nan if any(math.isnan(x) for x in known) else _log_sum_exp(known)
        representable = math.isfinite(value) and (value >= _TINY or (value == 0 and log_value == -math.inf))
        return value, dict(zip(self.terms, settled)), (None if representable else log_value)


_LOGADDEXP = sp.Function("logaddexp")


def _logaddexp(*logs):
    return functools.reduce(np.logaddexp, logs)


def log_form(term: sp.Expr) -> sp.Expr:
    """ln(term) written so that no intermediate leaves float64's range for inputs inside it.

    Products become sums of logarithms, powers multiples of them, Max/Min the Max/Min of the
    logarithms, and a sum of non-negative parts the log-sum-exp of their logarithms; a
    difference (1 − p, n − m) is taken as it is. Every term of a theorem is ≥ 0, so this is
    the logarithm of the term (−∞ for a term that is exactly 0)."""
    if term.is_Mul:
        return sp.Add(*(log_form(arg) for arg in term.args))
    if term.is_Pow:
        return term.exp * log_form(term.base)
    if isinstance(term, sp.exp):
        return term.args[0]
    if isinstance(term, (sp.Max, sp.Min)):
        return type(term)(*(log_form(arg) for arg in term.args), evaluate=False)
    if term.is_Add and not any(arg.could_extract_minus_sign() for arg in term.args):
        return _LOGADDEXP(*(log_form(arg) for arg in term.args))
    return sp.log(term)


def _log_of(value: float) -> float:
    if math.isnan(value):
        return math.nan
    return math.log(value) if 0 < value < math.inf else (-math.inf if value == 0 else math.inf)


def _call(functions, args) -> list[float]:
    """Each lambdified function at ``args``: with Python floats (as before), and with numpy
    float64 (inf or nan instead of an exception) for one that overflows or divides by 0."""
    outputs = []
    with np.errstate(over="ignore", divide="ignore", invalid="ignore", under="ignore"):
        for f in functions:
            try:
                outputs.append(float(f(*args)))
            except ArithmeticError:
                outputs.append(float(f(*map(np.float64, args))))
    return outputs


def _exp(log: float) -> float:
    return math.inf if log > 709.78 else math.exp(log)


def _log_sum_exp(logs: list[float]) -> float:
    top = max(logs)
    if not math.isfinite(top):
        return top
    return top + math.log(sum(math.exp(x - top) for x in logs))


@dataclass(frozen=True)
class Bound:
    """A theorem's right-hand side at the user's numbers, beside its hypotheses.

    ``value`` is the bound (``inf`` when it overflows a float: read ``log_value``, which a
    formula outside log space sets only then; a failing "float64: ..." condition says so);
    ``terms`` its named parts; ``conditions`` the hypotheses at these numbers (``valid``
    when all hold); ``step_sizes`` the step sizes the theorem prescribes (when it does);
    ``expr`` the symbolic right-hand side and ``values`` the numbers substituted.
    """

    value: float
    terms: dict[str, float]
    expr: sp.Expr
    source: Source
    conditions: tuple[Condition, ...] = ()
    step_sizes: dict[str, float] | None = None
    variant: str | None = None
    log_value: float | None = None
    values: dict[sp.Symbol, float] = field(default_factory=dict, repr=False)

    @property
    def valid(self) -> bool:
        return all(c.holds for c in self.conditions)

    @property
    def violated(self) -> tuple[Condition, ...]:
        return tuple(c for c in self.conditions if not c.holds)

    def latex(self) -> str:
        return sp.latex(self.expr)

    def __str__(self) -> str:
        head = f"{self.source}" + (f" [{self.variant}]" if self.variant else "")
        shown = self.log_value is None or not math.isfinite(self.log_value) or _TINY <= self.value < math.inf
        value = f"{self.value:.6g}" if shown else f"exp({self.log_value:.6g})"
        lines = [f"{head}: {value}" + ("" if self.valid else "  (conditions violated)")]
        lines += [f"  {name} = {term:.6g}" for name, term in self.terms.items()]
        if self.step_sizes:
            lines.append("  step sizes: " + ", ".join(f"{k} = {v:.6g}" for k, v in self.step_sizes.items()))
        lines += [f"  {c}" for c in self.conditions]
        return "\n".join(lines)

    def _repr_markdown_(self) -> str:
        """How Jupyter shows a Bound: source and value, the formula, its terms, step sizes and
        every hypothesis with both sides."""
        def cell(v) -> str:
            return f"{v:.6g}" if isinstance(v, (int, float)) else str(v)

        shown = self.log_value is None or not math.isfinite(self.log_value) or _TINY <= self.value < math.inf
        value = cell(self.value) if shown else f"exp({self.log_value:.6g})"
        text = (f"**{self.source}**" + (f" [{self.variant}]" if self.variant else "") + f": **{value}**"
                + ("" if self.valid else " — *a hypothesis fails*") + f"\n\n$$ {self.latex()} $$\n\n")
        text += "| term | value |\n|---|---|\n" + "".join(f"| {name} | {cell(v)} |\n" for name, v in self.terms.items())
        if self.step_sizes:
            text += "\n**step sizes**: " + ", ".join(f"{k} = {cell(v)}" for k, v in self.step_sizes.items()) + "\n"
        if self.conditions:
            text += "\n**hypotheses**\n\n" + "".join(
                f"- {'✓' if c.holds else '✗ VIOLATED'} {c.name}: {cell(c.lhs)} ≤ {cell(c.rhs)}"
                + (f" ({c.detail})" if c.detail else "") + "\n" for c in self.conditions)
        return text


#: Every condition a Bound gets because float64 cannot hold a number starts with this.
FLOAT64 = "float64: "
_MAX = sys.float_info.max
_LOG_TINY = math.log(_TINY)


def _value_condition(value: float, log_value: float | None, log_space: bool) -> Condition | None:
    """The failing condition for a value float64 cannot hold, or None when it holds it."""
    if log_space:
        if log_value is None or not (math.isnan(log_value) or log_value == math.inf):
            return None
        return Condition(FLOAT64 + "log of the value ≤ 1.8e308 (overflow)", False, log_value, _MAX,
                         "not even the logarithm of the bound is a finite float64")
    if log_value is None:
        return None
    if math.isnan(log_value) or math.isnan(value):
        return Condition(FLOAT64 + "value is a number (nan)", False, value, _MAX,
                         "the bound evaluates to nan in float64 (an overflow meets an underflow, or 0·∞)")
    if value == math.inf or log_value >= _LOG_MAX:
        return Condition(FLOAT64 + "value ≤ 1.8e308 (overflow)", False, value, _MAX,
                         "the bound overflows float64; log_value holds its logarithm"
                         if math.isfinite(log_value) else "the bound overflows float64", log_value, _LOG_MAX)
    return Condition(FLOAT64 + "2.2e-308 ≤ value (underflow)", False, _TINY, value,
                     f"the bound underflows float64 to {value:.6g}; reading it so would claim a stationary "
                     "point; log_value holds its logarithm", _LOG_TINY, log_value)


def _step_conditions(step_sizes) -> tuple[Condition, ...]:
    """A failing condition for each prescribed step size that float64 does not hold: a step
    size is positive by its formula, so 0 (an underflow), a subnormal (digits lost) or a
    non-finite value means the number reported is not the one prescribed."""
    out = []
    for name, value in (step_sizes or {}).items():
        value = float(value)
        if _TINY <= value < math.inf:
            continue
        if math.isnan(value) or value == math.inf:
            out.append(Condition(FLOAT64 + f"{name} ≤ 1.8e308 (overflow)", False, value, _MAX,
                                 f"the step size {name} overflows float64"))
        else:
            what = "underflows to 0" if value == 0 else "is subnormal: it underflows and loses digits"
            out.append(Condition(FLOAT64 + f"2.2e-308 ≤ {name} (underflow)", False, _TINY, value,
                                 f"the step size {name} {what}, while its formula is positive"))
    return tuple(out)


def make_bound(formula: Formula, values: Mapping[sp.Symbol, float], source: Source, *,
               conditions=(), step_sizes=None, variant: str | None = None, infinite=()) -> Bound:
    """A Bound of ``formula`` at ``values``, with the failing conditions of the module docstring
    added when float64 cannot hold the value, an input or a prescribed step size.

    ``infinite``: the symbols that may be +∞ as a number in their own right (CA-Fed's χ² when a
    client with α_k > 0 is excluded); the +∞ value they cause is the exact (vacuous) bound, not
    an overflow. Any other input that is not finite overflowed before the formula and is named."""
    value, terms, log_value = formula.evaluate(values)
    numbers_ = {s: _to_float(values[s], str(s)) for s in formula.symbols}
    conditions = tuple(conditions) + _step_conditions(step_sizes)
    bad = [s for s, v in numbers_.items() if not math.isfinite(v) and not (v == math.inf and s in infinite)]
    conditions += tuple(Condition(FLOAT64 + f"input {s} is finite", False, numbers_[s], _MAX,
                                  f"{s} = {numbers_[s]}: it overflowed float64 before the formula") for s in bad)
    exact_infinity = value == math.inf and any(numbers_[s] == math.inf for s in infinite)
    failed = None if (bad or exact_infinity) else _value_condition(value, log_value, formula.log_space)
    if failed is not None:
        conditions += (failed,)
    return Bound(value, terms, formula.expr, source, conditions, step_sizes, variant, log_value, numbers_)


def check_variant(variant: str, allowed: tuple[str, ...]) -> str:
    if variant not in allowed:
        raise ValueError(f"variant must be one of {', '.join(map(repr, allowed))}, got {variant!r}")
    return variant


# ---------------------------------------------------------------------------- sums over rounds


def power_sum(s: float, first: int, last: int) -> float:
    """Σ_{t=first}^{last} t^(−s) (0 when last < first), in O(1) whatever the number of rounds.

    ζ(s, first) − ζ(s, last + 1) with the Hurwitz zeta function (the identity holds for every
    s ≠ 1 by analytic continuation), ψ(last + 1) − ψ(first) for s = 1 (harmonic numbers) and
    last − first + 1 for s = 0; evaluated by mpmath at 40 significant digits, so the difference
    of two nearly equal zeta values keeps float64 accuracy."""
    import mpmath

    first, last = int(first), int(last)
    if last < first:
        return 0.0
    if s == 0:
        return float(last - first + 1)
    with mpmath.workdps(40):
        if s == 1:
            total = mpmath.digamma(last + 1) - mpmath.digamma(first)
        else:
            total = mpmath.zeta(s, first) - mpmath.zeta(s, last + 1)
        return float(total)


# ---------------------------------------------------------------------------- validation


def _number(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a finite real number, got {value!r}")
    number = _to_float(value, name)
    if not math.isfinite(number):
        raise ValueError(f"{name} must be a finite real number, got {value!r}")
    return number


def positive(value, name: str) -> float:
    value = _number(value, name)
    if value <= 0:
        raise ValueError(f"{name} must be > 0, got {value}")
    return value


def nonnegative(value, name: str) -> float:
    value = _number(value, name)
    if value < 0:
        raise ValueError(f"{name} must be ≥ 0, got {value}")
    return value


def probability(value, name: str) -> float:
    value = _number(value, name)
    if not 0 < value <= 1:
        raise ValueError(f"{name} must lie in (0, 1], got {value}")
    return value


def count(value, name: str, minimum: int = 1) -> int:
    """An integer ≥ ``minimum`` that float64 can hold (at most 1.8e308: every count enters a formula)."""
    value = integer(value, name, minimum)
    _to_float(value, name)
    return value


@dataclass(frozen=True)
class Constants:
    """Problem constants shared by the theorems, validated on construction.

    ``L`` smoothness; ``sigma2`` stochastic-gradient variance σ²; ``delta_f`` = f(x⁰) − f*;
    ``F0`` FedSUM's initial-gradient constant F_0 = (1/N) Σ_i ‖∇f_i(x⁰)‖² (FedSUM Thm 4.1,
    and Lemma C.4 where it is defined);
    ``n_clients`` N; ``local_steps`` K; ``rounds`` T; ``zeta2`` gradient dissimilarity
    ζ² and ``G2`` a bound on ‖∇f_i‖², for the theorems that need them; ``extra`` any
    further named constant a theorem asks for.
    """

    L: float
    sigma2: float
    delta_f: float
    F0: float = 0.0
    n_clients: int = 1
    local_steps: int = 1
    rounds: int = 1
    zeta2: float | None = None
    G2: float | None = None
    extra: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self):
        positive(self.L, "L")
        nonnegative(self.sigma2, "sigma2")
        nonnegative(self.delta_f, "delta_f")
        nonnegative(self.F0, "F0")
        count(self.n_clients, "n_clients")
        count(self.local_steps, "local_steps")
        count(self.rounds, "rounds (T)")
        for name in ("zeta2", "G2"):
            if getattr(self, name) is not None:
                nonnegative(getattr(self, name), name)
        for name, value in self.extra.items():
            _number(value, f"extra[{name!r}]")

    def require(self, name: str) -> float:
        """A constant a theorem needs, or a ValueError naming it."""
        value = getattr(self, name, None) if name in self.__dataclass_fields__ else self.extra.get(name)
        if value is None:
            raise ValueError(f"this theorem needs Constants.{name}" if name in self.__dataclass_fields__
                             else f"this theorem needs Constants(extra={{{name!r}: ...}})")
        return float(value)
