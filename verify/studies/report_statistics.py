"""Statistics the reproduction reports rest on: a multiplicity correction for a family of paired
comparisons, a late-round variability that one boundary point cannot move, and power-law
exponents with intervals.

* :func:`holm` — Holm's step-down correction of m p-values (S. Holm, *A simple sequentially
  rejective multiple test procedure*, Scand. J. Statist. 6 (1979) 65–70). With the p-values
  ordered p_(1) ≤ … ≤ p_(m), the adjusted value of the i-th is
  p̃_(i) = min{1, max_{j ≤ i} (m − j + 1) p_(j)}; rejecting every hypothesis with p̃ ≤ α keeps
  the probability of any false rejection at most α whatever the dependence between the tests.
* :func:`paired_p_value` — the two-sided one-sample t-test of mean 0 on paired differences,
  the test that matches :func:`verify.studies.seed_study.interval` (its interval excludes 0 exactly
  when p < 1 − level).
* :func:`late_variability` — the robust scale of the second differences of the recorded
  losses in the late window, at every round across seeds, then over rounds.
* :func:`power_law` — the least-squares slope of log y on log x with its Student-t interval.
"""
from __future__ import annotations

import math

import numpy as np

#: Family-wise error rate of the Holm correction in the reports.
ALPHA = 0.05


# ---------------------------------------------------------------------------- multiplicity


def holm(pvalues) -> np.ndarray:
    """Holm-adjusted p-values, in the order given (Holm 1979, Scand. J. Statist. 6:65–70).

    Sort p_(1) ≤ … ≤ p_(m); p̃_(i) = min{1, max_{j ≤ i} (m − j + 1) p_(j)}. Hypothesis i is
    rejected at family-wise level α by Holm's step-down procedure exactly when p̃_i ≤ α.
    NaN p-values (a comparison without spread) are kept as NaN and do not count in m.
    """
    p = np.asarray(pvalues, dtype=np.float64)
    if p.ndim != 1:
        raise ValueError(f"pvalues must be one-dimensional, got shape {p.shape}")
    finite = ~np.isnan(p)
    if ((p[finite] < 0) | (p[finite] > 1)).any():
        raise ValueError("p-values must lie in [0, 1]")
    out = np.full(p.shape, np.nan)
    values = p[finite]
    m = values.size
    if m == 0:
        return out
    order = np.argsort(values, kind="stable")
    scaled = (m - np.arange(m)) * values[order]
    adjusted = np.minimum(1.0, np.maximum.accumulate(scaled))
    result = np.empty(m)
    result[order] = adjusted
    out[finite] = result
    return out


def paired_p_value(differences) -> float:
    """Two-sided p-value of the one-sample t-test of mean 0: p = 2 (1 − F_{n−1}(|d̄| √n / s)),
    with d̄ and s the mean and sample standard deviation of the n differences and F_{n−1} the
    Student-t distribution function; NaN for fewer than two differences or no spread."""
    from scipy import stats

    d = np.asarray(differences, dtype=np.float64)
    if d.size < 2:
        return float("nan")
    s = d.std(ddof=1)
    if not s > 0:
        return float("nan")
    t = abs(d.mean()) * math.sqrt(d.size) / s
    return float(2 * stats.t.sf(t, d.size - 1))


def comparisons(study, pairs, at_rounds=(), reference: str | None = None) -> list[dict]:
    """The family of comparisons a seed study's tables make (:func:`verify.studies.seed_study.markdown`):
    every row of its paired-difference tables (each pair at each of ``at_rounds`` both reached
    and at the last round both reached) and every row of its equal-communication tables (each
    algorithm against ``reference`` at ``reference``'s final number of models sent). Each is a
    dict: first, second, pattern, at (the round or the models sent), kind ("round" or
    "models"), the per-seed differences first − second, their mean and n, and the two-sided
    paired t-test's ``p``."""
    family = []

    def add(first, second, pattern, at, kind, a: dict, b: dict):
        common = sorted(set(a) & set(b))
        d = np.array([a[s] - b[s] for s in common])
        if d.size:
            family.append({"first": first, "second": second, "pattern": pattern, "at": at, "kind": kind,
                           "differences": d, "mean": float(d.mean()), "n": int(d.size), "p": paired_p_value(d)})

    for pattern in study.patterns:
        for first, second in pairs:
            if (first, pattern) not in study.runs or (second, pattern) not in study.runs:
                continue
            end = study.common_end(first, second, pattern)
            for at_round in dict.fromkeys(r for r in (*at_rounds, end) if r <= end):
                add(first, second, pattern, at_round, "round", study.values(first, pattern, at_round),
                    study.values(second, pattern, at_round))
        if reference is not None and (reference, pattern) in study.runs:
            budget = study.final_models(reference, pattern)
            ref = study.at_models(reference, pattern, budget)
            for algorithm in study.algorithms:
                if algorithm != reference:
                    add(algorithm, reference, pattern, budget, "models", study.at_models(algorithm, pattern, budget), ref)
    adjusted = holm([c["p"] for c in family])
    for c, value in zip(family, adjusted):
        c["holm"] = float(value)
    return family


def _where(c: dict) -> str:
    return f"round {c['at']}" if c["kind"] == "round" else f"{c['at']:.0f} models sent"


def holm_markdown(family: list[dict], alpha: float = ALPHA, show: int = 6) -> list[str]:
    """Markdown lines: how many of the family's comparisons have p < ``alpha`` before and after
    Holm's correction, and the ``show`` smallest p-values with their adjusted values."""
    tested = [c for c in family if math.isfinite(c["p"])]
    by_round = sum(c["kind"] == "round" for c in family)
    raw = sum(c["p"] < alpha for c in tested)
    kept = sum(c["holm"] <= alpha for c in tested)
    n = sorted({c["n"] for c in family})
    lines = [f"Holm's correction (Holm 1979) over the {len(family)} comparisons above ({by_round} paired differences "
             f"at a round, {len(family) - by_round} at equal communication; two-sided paired t-tests on "
             f"{'/'.join(map(str, n))} seeds): {raw} with p < {alpha:g} uncorrected, {kept} with a Holm-adjusted "
             f"p ≤ {alpha:g}. The smallest p-values:", "",
             "| first − second | pattern | at | mean difference | p | Holm-adjusted p |", "|---|---|---|---|---|---|"]
    for c in sorted(tested, key=lambda c: c["p"])[:show]:
        lines.append(f"| {c['first']} − {c['second']} | {c['pattern']} | {_where(c)} | {c['mean']:.4f} | "
                     f"{c['p']:.3f} | {c['holm']:.3f} |")
    return lines


# ---------------------------------------------------------------------------- late variability

#: median |Z| · √6 for Z standard normal: the median of |Δ²y| is this times σ when the points
#: y are independent N(μ_t, σ²) about a trend μ_t that is linear over three recorded points.
SECOND_DIFFERENCE_SCALE = 0.6744897501960817 * math.sqrt(6.0)


def second_differences(curve: dict, window: int) -> dict[int, float]:
    """round t -> |y_{t+} − 2 y_t + y_{t−}| over the recorded points of the last ``window``
    rounds (rounds > last − window), t− and t+ the recorded neighbours of t inside the window."""
    rounds, loss = np.asarray(curve["rounds"]), np.asarray(curve["loss"], dtype=np.float64)
    keep = rounds > rounds[-1] - window
    r, y = rounds[keep], loss[:rounds.size][keep]
    return {int(t): float(abs(y[k + 1] - 2 * y[k] + y[k - 1])) for k, t in enumerate(r) if 0 < k < r.size - 1}


def late_variability(curves, window: int) -> tuple[float, int]:
    """(value, n seeds) of the robust late-round variability of the runs ``curves`` (one per seed).

    At every interior recorded round t of the last ``window`` rounds, the median across the
    seeds of |Δ²y_t| = |y_{t+} − 2y_t + y_{t−}|; the median of that over the rounds, divided by
    Φ⁻¹(3/4)·√6 (:data:`SECOND_DIFFERENCE_SCALE`) so that it estimates the standard deviation
    of the recorded points about a trend that is linear over three neighbours. The second
    difference removes the descent and its slow bend; the medians leave one round (a window's
    boundary point, a single jump) and one seed of three without weight. NaN with n = 0 when
    no run has three recorded points in the window.
    """
    per_round: dict[int, list[float]] = {}
    used = 0
    for curve in curves:
        d = second_differences(curve, window)
        used += bool(d)
        for t, v in d.items():
            per_round.setdefault(t, []).append(v)
    if not per_round:
        return float("nan"), 0
    medians = [float(np.median(v)) for _, v in sorted(per_round.items())]
    return float(np.median(medians)) / SECOND_DIFFERENCE_SCALE, used


# ---------------------------------------------------------------------------- power laws


def power_law(x, y, level: float = 0.95) -> dict:
    """The exponent b of y ≈ a x^b by least squares on (log x, log y) (points with x ≤ 0 or
    y ≤ 0 left out), with its two-sided Student-t interval b ± t_{(1+level)/2, n−2} · se(b),
    se(b) = √(Σ r² / (n − 2) / Σ (log x − mean log x)²), r the residuals. Keys: slope, low,
    high, n (NaN interval for n < 3, NaN slope for n < 2 or one x)."""
    from scipy import stats

    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    keep = (x > 0) & (y > 0)
    u, v = np.log(x[keep]), np.log(y[keep])
    n = int(u.size)
    nan = {"slope": float("nan"), "low": float("nan"), "high": float("nan"), "n": n}
    if n < 2 or np.ptp(u) == 0:
        return nan
    du = u - u.mean()
    sxx = float(du @ du)
    slope = float(du @ (v - v.mean()) / sxx)
    if n < 3:
        return {**nan, "slope": slope}
    residual = v - v.mean() - slope * du
    se = math.sqrt(float(residual @ residual) / (n - 2) / sxx)
    half = float(stats.t.ppf(0.5 + level / 2, n - 2)) * se
    return {"slope": slope, "low": slope - half, "high": slope + half, "n": n}


def exponent(fit: dict, digits: int = 2) -> str:
    """'0.92 [0.35, 1.49]': the exponent and its interval as the reports print them."""
    def f(value):
        return f"{value:.{digits}f}".replace("-", "−")
    if not math.isfinite(fit["low"]):
        return f(fit["slope"])
    return f"{f(fit['slope'])} [{f(fit['low'])}, {f(fit['high'])}]"


# ---------------------------------------------------------------------------- the bound's parts


def lemma_d6_constants(row: dict, setting: dict):
    """The constants a delay-study row judged against FedSUM Lemma D.6 was evaluated with,
    recovered from its four saved terms (:func:`bounds.fedsum.lemma_d6`, algorithm notation,
    Π = η_g η_l, m = max{1, τ_avg}):

        V = 9 Π m σ² L / N,   D = 150 η_l² K σ² L² / N,   O = 2 Δ_f / (Π K T),   I = 3 τ_max F_0 / T

    ("variance", "local drift", "optimization", "initial gradients"), so that
    L = 9 Π m D / (150 η_l² K V), σ² = V N / (9 Π m L), Δ_f = O Π K T / 2 and
    F_0 = I T / (3 τ_max) (0 when τ_max = 0). ``setting``: the study's n_clients, local_steps
    and rounds."""
    from bounds.core import Constants

    terms = row["terms"]
    n, k, t = int(setting["n_clients"]), int(setting["local_steps"]), int(setting["rounds"])
    eta_l, product, m = float(row["eta_l"]), float(row["eta_l"]) * float(row["eta_g"]), max(1.0, float(row["tau_avg"]))
    variance, drift = float(terms["variance"]), float(terms["local drift"])
    L = 9 * product * m * drift / (150 * eta_l**2 * k * variance)
    sigma2 = variance * n / (9 * product * m * L)
    delta_f = float(terms["optimization"]) * product * k * t / 2
    f0 = float(terms["initial gradients"]) * t / (3 * row["tau_max"]) if row["tau_max"] > 0 else 0.0
    return Constants(L=L, sigma2=sigma2, delta_f=delta_f, F0=f0, n_clients=n, local_steps=k, rounds=t)


def lemma_d6_parts(row: dict, setting: dict) -> dict:
    """FedSUM Lemma D.6 at a delay-study row (:func:`bounds.fedsum.lemma_d6` at the row's step
    sizes, delays and :func:`lemma_d6_constants`), its terms split by whether they depend on
    the delays: a term is a τ-term when its value changes from (τ_max, τ_avg) to
    (2τ_max + 1, 2τ_avg + 1), τ-free otherwise. Keys: bound, tau_free and tau (name -> value),
    eta_l_limit (the right side of D.6's hypothesis η_l ≤ 1/(10√τ̂ K L)), drift_limit (the
    local-drift term at that η_l: it grows as η_l²) and constants."""
    from bounds import fedsum

    c = lemma_d6_constants(row, setting)
    eta_g, eta_l, tau_max, tau_avg = row["eta_g"], row["eta_l"], row["tau_max"], row["tau_avg"]
    here = fedsum.lemma_d6(c, eta_g, eta_l, tau_max, tau_avg)
    moved = fedsum.lemma_d6(c, eta_g, eta_l, 2 * tau_max + 1, 2 * tau_avg + 1)
    tau = {k: v for k, v in here.terms.items() if moved.terms[k] != v}
    limit = next(cond.rhs for cond in here.conditions if "η_l ≤" in cond.name and "η_g" not in cond.name)
    return {"bound": here.value, "tau_free": {k: v for k, v in here.terms.items() if k not in tau}, "tau": tau,
            "eta_l_limit": float(limit), "drift_limit": here.terms["local drift"] * (limit / eta_l) ** 2,
            "constants": c}
