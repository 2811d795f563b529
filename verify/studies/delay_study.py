"""How τ_max and τ_avg drive convergence: one algorithm under a family of participation patterns.

FedSUM (R. You, S. Pu, arXiv:2512.18275), Theorem 4.1, eq. (12), conditional on the
participation sequence, with η_g = 1/√τ̂ and η_l = min{1/(10√τ̂ K L), √(N τ̂ Δ_f /(m K T L σ²))}
(τ̂ = max{1, τ_max}, m = max{1, τ_avg}):

    (1/T) Σ_{t<T} E‖∇f(x_t)‖² ≤ 30 √((1+τ_avg) L σ² Δ_f) / √(NKT) + 20 τ_max (L Δ_f + F_0) / T.

The bound predicts that delays cost √(1+τ_avg) in the noise term and τ_max linearly in the
initialisation term. The paper shows no experiment in which τ varies; this study runs one
algorithm under patterns that span a wide range of τ_max and τ_avg and puts the measured left
side beside the bound, in two regimes:

* ``"theorem"``: every trace runs at its own Theorem 4.1 step sizes (which shrink as τ_max
  grows) and is judged against (12): how the theorem's prescription and its bound move
  together with τ.
* ``"fixed"``: every trace runs at one pair of step sizes, the largest at which the
  algorithm's lemma (FedSUM-B Lemma C.6, FedSUM Lemma D.6, FedSUM-CR Lemma E.6) holds on the
  family's most benign trace (the smallest τ_max at the family's rate), as a practitioner
  would tune them on a well-behaved pattern (``check``'s ``step_sizes="admissible"``). Every
  trace is judged against the lemma at those step sizes; where the trace's τ_max breaks the
  lemma's hypotheses (η_l ≤ 1/(10√τ̂ K L), η_g η_l ≤ 1/(10 τ̂ K L) for FedSUM) the verdict carries
  ``*``: the bound no longer applies, and the measured side shows what the delays do to a run
  the theorem does not cover.
* ``"safe"``: one pair admissible for the lemma on the family's trace with the largest
  τ_max; the conditions only loosen as τ_max falls, so every trace is inside the lemma: the
  effect of the delays alone, with the step sizes held where the theory covers them all.
* ``"given"``: the user's (η_l, η_g) for every trace, judged against the lemma with the same
  marks: for a problem whose estimated L makes the theory's step sizes too small to move the
  model (the CNN), the delays' effect at step sizes that train it.

The family (:func:`delay_family`) keeps the participation rate near ``rate`` (the share of
clients in a round, FedSUM's S/N): deterministic and reshuffled cyclic blocks, uniform
sampling, Bernoulli, on/off cycles of growing period (FedAU's cyclic participation), and
random subsets of the shipped MobiPerf fleet; a second group varies the rate itself.
Every trace is drawn with one seed and judged conditionally on it, so τ_max and τ_avg are the
trace's own numbers.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from participation import Trace, delay_metrics
from participation.datasets import mobiperf
from participation.validation import finite_real, integer

from .cell_store import cell_key, load_cell, save_cell
from .report_statistics import exponent, power_law
from ..report import atomic_write, figure, number, save_figure, write_csv, write_json

#: The lemma that covers each FedSUM variant at arbitrary admissible step sizes.
LEMMAS = {"fedsum-b": "fedsum.lemma_c6", "fedsum": "fedsum.lemma_d6", "fedsum-cr": "fedsum.lemma_e6"}
REGIMES = ("theorem", "fixed", "safe", "given")
#: On/off cycle periods of the family (the active stretch is ``rate`` of each).
PERIODS = (5, 10, 20, 40, 80)
CSV_FIELDS = ("regime", "pattern", "group", "rate", "tau_max", "tau_avg", "measured", "lower", "upper", "bound",
              "tau_avg_term", "tau_max_term", "ratio", "label", "eta_l", "eta_g", "loss")


@dataclass(frozen=True)
class Member:
    """One pattern of the family: its label, its group ("same rate" or "other rate") and the
    participation pattern (or fixed trace)."""

    label: str
    group: str
    pattern: object


def delay_family(n_clients: int, rate: float = 0.2, rounds: int = 400, seed: int = 0,
                 fleet_subsets: int = 2) -> list[Member]:
    """Patterns of about ``rate`` participation spanning τ from its smallest (cyclic blocks) to
    long absences (on/off cycles of period 80, the fleet), and a group at half and twice the rate."""
    from participation.patterns import Bernoulli, Cyclic, OnOffCycles, ReshuffledCyclic, Uniform

    n = integer(n_clients, "n_clients", 2)
    rate = finite_real(rate, "rate", above=0.0)
    if rate > 0.5:
        raise ValueError(f"rate must be at most 0.5 (twice it is the family's highest rate), got {rate}")
    per_round = max(1, round(rate * n))
    members = [Member(f"cyclic S={per_round}", "same rate", Cyclic(n, per_round)),
               Member(f"reshuffled S={per_round}", "same rate", ReshuffledCyclic(n, per_round)),
               Member(f"uniform S={per_round}", "same rate", Uniform(n, per_round)),
               Member(f"bernoulli p={rate:g}", "same rate", Bernoulli(rate, n_clients=n))]
    members += [Member(f"on/off C={c}", "same rate", OnOffCycles.from_probability(n, c, rate)) for c in PERIODS]
    members += _fleet_members(n, rounds, seed, fleet_subsets)
    for factor in (0.5, 2.0):
        other = rate * factor
        s = max(1, round(other * n))
        members += [Member(f"cyclic S={s}", "other rate", Cyclic(n, s)),
                    Member(f"bernoulli p={other:g}", "other rate", Bernoulli(other, n_clients=n))]
    return members


def _fleet_members(n: int, rounds: int, seed: int, count: int) -> list[Member]:
    """``count`` random subsets of ``n`` devices of the MobiPerf fleet (its first ``rounds``
    10-minute rounds; devices never available in them left out, as they would never train),
    each a fixed trace; their rate is the fleet's, not the family's."""
    fleet = mobiperf()
    if rounds > fleet.n_rounds or n > fleet.n_clients:
        return []
    window = np.asarray(fleet.mask)[:rounds]
    seen = np.flatnonzero(window.any(axis=0))          # devices available at least once in the window
    if seen.size < n:
        return []
    rng = np.random.default_rng(seed)
    out = []
    for k in range(count):
        devices = np.sort(rng.choice(seen, size=n, replace=False))
        out.append(Member(f"fleet subset {k + 1}", "fleet", Trace(window[:, devices])))
    return out


def _trace(member: Member, rounds: int, seed: int):
    """The member's trace over ``rounds`` rounds (a fixed trace: its first ``rounds``)."""
    if isinstance(member.pattern, Trace):
        return member.pattern if member.pattern.n_rounds <= rounds else Trace(np.asarray(member.pattern.mask)[:rounds])
    return member.pattern.sample(rounds, seed=seed)


#: The saved rows' version: a row saved under another is judged again.
SCHEMA = 1
#: The row fields that hold numbers (a saved row gives them back as floats, non-finite ones included).
_NUMBER_FIELDS = ("rate", "tau_max", "tau_avg", "measured", "lower", "upper", "bound", "tau_avg_term", "tau_max_term",
                  "ratio", "eta_l", "eta_g", "loss")


def _cell_config(key: dict, regime: str, member: Member) -> dict:
    """The saved row's configuration: the study's setting (``key``: the problem and every option
    that changes a row), the regime and the pattern."""
    return {"study": "delays", "schema": SCHEMA, **key, "regime": regime, "pattern": member.label, "group": member.group}


def _saved_row(folder, key: dict, regime: str, member: Member) -> dict | None:
    """The row saved for (regime, member) under ``key``, with its numbers as floats, or None."""
    saved = load_cell(folder, cell_key(_cell_config(key, regime, member)))
    if saved is None:
        return None
    row = dict(saved)
    for name in _NUMBER_FIELDS:
        row[name] = float(row[name])
    row["terms"] = {k: float(v) for k, v in row["terms"].items()}
    return row


def _save_row(folder, key: dict, regime: str, member: Member, row: dict) -> None:
    save_cell(folder, _cell_config(key, regime, member), {**row, "terms": {k: number(v) for k, v in row["terms"].items()}})


def run(algorithm: str, problem, rounds: int, *, members=None, rate: float = 0.2, seeds=3, local_steps: int = 2,
        regimes=("theorem", "fixed", "safe"), given=None, constants=None, trace_seed: int = 0,
        on_row=None, folder=None, key: dict | None = None) -> list[dict]:
    """One row per (regime, member): the trace's τ_max and τ_avg and its rate, the measured left
    side (mean over ``seeds`` with one-sided 95% limits), the bound with its τ_avg and τ_max
    terms, the ratio measured/bound, the verdict with its marks, and the training loss
    f(x_{T−1}) of the first seed's run (its last iterate of the left side). ``given``: (η_l, η_g)
    of the ``"given"`` regime.

    With ``folder``, every row is saved as a cell of ``verify.studies.cell_store`` as soon as it
    is judged, and a row already saved there under the same ``key`` (a dict naming the problem
    and every option that changes a row: JSON numbers and text) is read instead of run again, so
    a stopped study resumes; a regime whose rows are all saved skips its step-size search too."""
    from algorithms import get

    from ..checking import check

    if algorithm not in LEMMAS:
        raise ValueError(f"algorithm must be one of {', '.join(LEMMAS)}, got {algorithm!r}")
    for regime in regimes:
        if regime not in REGIMES:
            raise ValueError(f"regime must be one of {', '.join(REGIMES)}, got {regime!r}")
    if ("given" in regimes) != (given is not None):
        raise ValueError("the 'given' regime and given=(eta_l, eta_g) come together")
    members = delay_family(problem.n_clients, rate, rounds, trace_seed) if members is None else members
    traces = [(m, _trace(m, rounds, trace_seed)) for m in members]
    if constants is None:
        from ..constants import estimate_constants

        constants = estimate_constants(problem)
    if (folder is None) != (key is None):
        raise ValueError("folder and key come together: key names the problem and settings the saved rows belong to")
    rows = []

    def saved(regime, member):
        return None if folder is None else _saved_row(folder, key, regime, member)

    def add(regime, member, trace, result=None, row=None):
        if row is None:
            row = _row(regime, member, trace, result)
            if folder is not None:
                _save_row(folder, key, regime, member, row)
        rows.append(row)
        if on_row is not None:
            on_row(row)

    if "theorem" in regimes:
        for member, trace in traces:
            kept = saved("theorem", member)
            if kept is not None:
                add("theorem", member, trace, row=kept)
                continue
            result = check(algorithm, problem, trace, "fedsum.theorem_4_1", seeds=seeds, local_steps=local_steps,
                           constants=constants)
            add("theorem", member, trace, result)
    lemma = LEMMAS[algorithm]
    for regime in ("fixed", "safe", "given"):
        if regime not in regimes:
            continue
        if regime == "given":
            steps = {"eta_l": float(given[0]), "eta_g": float(given[1])}
        elif regime == "safe":
            anchor = max(traces, key=lambda mt: _tau(mt[1]))
        else:
            benign = [mt for mt in traces if mt[0].group == "same rate"] or traces
            anchor = min(benign, key=lambda mt: _tau(mt[1]))
        kept = [saved(regime, member) for member, _ in traces]
        if all(row is not None for row in kept):
            for (member, trace), row in zip(traces, kept):
                add(regime, member, trace, row=row)
            continue
        if regime != "given":
            steps = check(algorithm, problem, anchor[1], lemma, seeds=1, local_steps=local_steps,
                          step_sizes="admissible", constants=constants).step_sizes
        fixed = get(algorithm, eta_l=steps["eta_l"], eta_g=steps["eta_g"], local_steps=local_steps)
        for (member, trace), row in zip(traces, kept):
            if row is not None:
                add(regime, member, trace, row=row)
                continue
            result = check(fixed, problem, trace, lemma, seeds=seeds, step_sizes="given", constants=constants)
            add(regime, member, trace, result)
    return rows


def _tau(trace) -> tuple[int, float]:
    d = delay_metrics(trace)
    return int(d.tau_max), float(d.tau_avg)


#: A timed check of :func:`estimate_seconds` runs on a horizon four times longer than the last
#: until it takes ``TIMED_SECONDS`` (or reaches the study's T): long enough for the clock.
TIMED_SECONDS = 0.05
#: Trace cells a member's participation rate is measured on, at most (its first rounds).
RATE_CELLS = 2_000_000


def study_bytes(n_clients: int, rounds: int, members, seeds: int) -> int:
    """Peak bytes :func:`run` holds: every member's trace (a byte a cell), and one check's batch
    of ``seeds`` runs: their masks stacked (a byte a cell each) and the (round, run, client)
    indices of each run's active cells (24 bytes each), at the family's highest rate."""
    cells = int(rounds) * int(n_clients)
    rate = max((_rate(m, min(rounds, 64), 0) for m in members), default=1.0)
    return len(members) * cells + int(seeds) * cells * (1 + 24 * rate)


def _rate(member: Member, rounds: int, seed: int) -> float:
    """The share of available cells in the member's first ``rounds`` rounds."""
    mask = np.asarray(_trace(member, rounds, seed).mask)
    return float(mask.mean()) if mask.size else 0.0


def estimate_seconds(algorithm: str, problem, rounds: int, *, members, seeds, local_steps: int = 2,
                     regimes=("theorem", "fixed", "safe"), constants=None, trace_seed: int = 0) -> float:
    """Seconds :func:`run` will take with these arguments (``given`` aside, which costs what any
    regime costs), from short timed checks, never from a
    full-size one. A check's time is a cost per round plus a cost per active client-round (its
    seeds' runs train the clients taking part): both are fitted on two checks over the same
    short horizon, on the members of highest and lowest rate, and applied to every member at
    its own rate (measured on its first rounds, ``RATE_CELLS`` cells at most) over ``rounds``
    rounds. The horizon starts at one round and grows fourfold until a check takes
    ``TIMED_SECONDS``. Sampling the traces is timed on that horizon and scaled; the anchors of
    the fixed and safe regimes cost a check of one seed."""
    from ..checking import check

    n = problem.n_clients
    seeds = list(range(seeds)) if isinstance(seeds, int) else list(seeds)
    if constants is None:
        from ..constants import estimate_constants

        constants = estimate_constants(problem)
    probe = min(rounds, max(1, RATE_CELLS // n))
    rates = [_rate(m, probe, trace_seed) for m in members]
    low, high = int(np.argmin(rates)), int(np.argmax(rates))

    def timed(member, horizon, count=len(seeds)):
        trace = Trace(np.asarray(_trace(member, horizon, trace_seed).mask)[:horizon])
        begin = time.perf_counter()
        check(algorithm, problem, trace, "fedsum.theorem_4_1", seeds=seeds[:count], local_steps=local_steps,
              constants=constants)
        return time.perf_counter() - begin, float(np.asarray(trace.mask).sum()) / horizon

    timed(members[high], 1, 1)                              # the first check pays for warming up
    horizon = 1
    while True:
        t_high, active_high = timed(members[high], horizon)
        if t_high >= TIMED_SECONDS or horizon >= rounds:
            break
        horizon = min(rounds, 4 * horizon)
    t_low, active_low = timed(members[low], horizon) if low != high else (t_high, active_high)
    per_cell = (t_high - t_low) / horizon / (active_high - active_low) if active_high > active_low else 0.0
    per_cell = min(max(per_cell, 0.0), t_high / horizon / max(active_high, 1.0))
    per_round = max(t_high / horizon - per_cell * active_high, 0.0)
    begin = time.perf_counter()
    for member in members:
        _trace(member, horizon, trace_seed)
    sampling = (time.perf_counter() - begin) * rounds / horizon
    checks = [rounds * (per_round + per_cell * rate * n) for rate in rates]
    anchors = sum(regime in ("fixed", "safe") for regime in regimes)
    return sampling + len(regimes) * sum(checks) + anchors * max(checks, default=0.0) / len(seeds)


def _row(regime: str, member: Member, trace, result) -> dict:
    terms = dict(result.bound.terms)
    noise, delay = _split_terms(terms)
    return {"regime": regime, "pattern": member.label, "group": member.group,
            "rate": float(np.asarray(trace.mask).mean()), "tau_max": float(result.tau_max),
            "tau_avg": float(result.tau_avg), "measured": float(result.measured), "lower": float(result.lower),
            "upper": float(result.upper), "bound": result.bound_value, "tau_avg_term": noise, "tau_max_term": delay,
            "ratio": float(result.ratio), "label": result.label, "eta_l": float(result.step_sizes["eta_l"]),
            "eta_g": float(result.step_sizes["eta_g"]), "loss": _final_loss(result), "terms": terms}


def _final_loss(result) -> float:
    """f(x_{T−1}) of the first seed's run: its last recorded loss."""
    run = result.first_run
    return float(run.loss[-1]) if run is not None and np.size(run.loss) else float("nan")


def _split_terms(terms: dict) -> tuple[float, float]:
    """The bound's τ_avg term ("variance": √(1+τ_avg) in (12), max{1,τ_avg} in the lemmas) and its
    τ_max term ("delay" in (12), "initial gradients" in the lemmas)."""
    tau_max_term = terms.get("delay", terms.get("initial gradients", 0.0))
    return float(terms.get("variance", 0.0)), float(tau_max_term)


def slope(rows: list[dict], x: str, y: str) -> float:
    """Least-squares slope of log y against log x over ``rows`` (rows with x ≤ 0 left out): the
    exponent of a power law y ∝ x^slope."""
    pts = np.array([(r[x], r[y]) for r in rows if r[x] > 0 and r[y] > 0], dtype=np.float64)
    if pts.shape[0] < 2 or np.ptp(np.log(pts[:, 0])) == 0:
        return float("nan")
    return float(np.polyfit(np.log(pts[:, 0]), np.log(pts[:, 1]), 1)[0])


def table(rows: list[dict]) -> str:
    """Markdown: per regime, the rows ordered by τ_max."""
    lines = []
    for regime in dict.fromkeys(r["regime"] for r in rows):
        here = sorted((r for r in rows if r["regime"] == regime), key=lambda r: (r["tau_max"], r["tau_avg"]))
        lines += [f"**{regime} step sizes**", "",
                  "| pattern | group | rate | τ_max | τ_avg | η_l | η_g | measured [one-sided 95% limits: a 90% interval] | bound | τ_avg term | "
                  "τ_max term | measured/bound | verdict | f(x_{T−1}) |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in here:
            lines.append(f"| {r['pattern']} | {r['group']} | {r['rate']:.3f} | {r['tau_max']:g} | {r['tau_avg']:.2f} | "
                         f"{r['eta_l']:.3g} | {r['eta_g']:.3g} | {r['measured']:.4g} [{r['lower']:.4g}, {r['upper']:.4g}] | "
                         f"{r['bound']:.4g} | {r['tau_avg_term']:.4g} | {r['tau_max_term']:.4g} | {r['ratio']:.3g} | "
                         f"{r['label']} | {r['loss']:.4g} |")
        lines += ["", *slope_table(here), ""]
    return "\n".join(lines).rstrip() + "\n"


def slope_table(rows: list[dict], level: float = 0.95) -> list[str]:
    """Markdown: the power-law exponents (:func:`verify.studies.report_statistics.power_law`) of the
    measured side, the bound and the bound's τ-terms (its τ_avg term plus its τ_max term)
    against τ_max and 1+τ_avg, over the patterns of about the same rate (fleet subsets
    included), and again without the fleet subsets when there are any, each with its Student-t
    interval on n − 2 degrees of freedom."""
    same = [r for r in rows if r["group"] != "other rate"]
    subsets = [("", same)]
    if any(r["group"] == "fleet" for r in same):
        subsets.append(("without the fleet subsets, ", [r for r in same if r["group"] != "fleet"]))
    values = {"measured": lambda r: r["measured"], "bound": lambda r: r["bound"],
              "bound's τ-terms (τ_avg term + τ_max term)": lambda r: r["tau_avg_term"] + r["tau_max_term"]}
    heads = [f"{label}against {x} (n={len(part)})" for label, part in subsets for x in ("τ_max", "1+τ_avg")]
    lines = [f"log-log slopes over the patterns of about the same rate (least squares on the logarithms), with "
             f"{level:.0%} Student-t intervals on n − 2 degrees of freedom:", "",
             "| exponent of | " + " | ".join(heads) + " |", "|---|" + "---|" * len(heads)]
    for name, value in values.items():
        cells = [exponent(power_law([r["tau_max"] if x == "tau_max" else 1 + r["tau_avg"] for r in part],
                                    [value(r) for r in part], level))
                 for _, part in subsets for x in ("tau_max", "tau_avg")]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


GROUP_MARKERS = {"same rate": "o", "fleet": "s", "other rate": "^"}


def plot(rows: list[dict], regime: str, path, title: str = "") -> Path:
    """One regime: measured (with its limits) and bound against τ_max and against 1+τ_avg, and
    measured/bound against τ_max; log axes. A bound whose hypotheses fail at the step sizes
    (verdict marked ``*``) is drawn faint: it does not apply there."""
    here = [r for r in rows if r["regime"] == regime]
    if not here:
        raise ValueError(f"no rows of regime {regime!r}")
    fig, axes = figure(1, 3, size=(4.6, 3.8))
    axes = axes[0]
    for group, marker in GROUP_MARKERS.items():
        part = [r for r in here if r["group"] == group]
        if not part:
            continue
        for col, x_of in enumerate((lambda r: max(r["tau_max"], 0.5), lambda r: 1 + r["tau_avg"])):
            ax = axes[col]
            xs = np.array([x_of(r) for r in part])
            ys = np.array([r["measured"] for r in part])
            low = np.array([max(r["lower"], 0.0) for r in part])
            high = np.array([r["upper"] if math.isfinite(r["upper"]) else r["measured"] for r in part])
            ax.errorbar(xs, ys, yerr=[ys - low, high - ys], fmt=marker, color="tab:blue", ms=5, capsize=2,
                        label=f"measured ({group})")
            for outside in (False, True):
                keep = np.array([("*" in r["label"]) == outside for r in part])
                if keep.any():
                    ax.plot(xs[keep], np.array([r["bound"] for r in part])[keep], marker, mfc="none", color="tab:red",
                            ms=6, alpha=0.3 if outside else 1.0,
                            label=f"bound ({group}{', hypotheses fail' if outside else ''})")
        axes[2].plot([max(r["tau_max"], 0.5) for r in part], [r["ratio"] for r in part], marker, color="tab:purple",
                     label=group)
    for col, xlabel in enumerate(("τ_max (0 drawn at 0.5)", "1 + τ_avg", "τ_max (0 drawn at 0.5)")):
        axes[col].set_xscale("log")
        axes[col].set_yscale("log")
        axes[col].set_xlabel(xlabel)
    axes[0].set_ylabel("(1/T) Σ ‖∇f(x_t)‖²")
    axes[2].set_ylabel("measured / bound")
    handles = {}
    for ax in axes[:2]:
        for h, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, h)
    fig.legend(list(handles.values()), list(handles), loc="outside lower center", ncol=3, fontsize=8, frameon=False)
    axes[2].legend(fontsize=8, frameon=False)
    fig.suptitle(f"{title}: {regime} step sizes" if title else f"{regime} step sizes")
    return save_figure(fig, path)


def write(rows: list[dict], folder, *, setting: dict, title: str = "") -> list[Path]:
    """delays.json, delays.csv, delays.md and one delays-<regime>.png per regime in ``folder``, atomically."""
    folder = Path(folder)
    flat = [{k: v for k, v in r.items() if k != "terms"} for r in rows]
    text = table(rows)
    data = {"setting": setting,
            "rows": [{k: (number(v) if isinstance(v, float) else v) for k, v in r.items() if k != "terms"}
                     | {"terms": {k: number(v) for k, v in r["terms"].items()}} for r in rows]}
    return [write_json(folder / "delays.json", data), write_csv(folder / "delays.csv", flat, CSV_FIELDS),
            atomic_write(folder / "delays.md", lambda f: f.write(text)),
            *[plot(rows, regime, folder / f"delays-{regime}.png", title)
              for regime in dict.fromkeys(r["regime"] for r in rows)]]
