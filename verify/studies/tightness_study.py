"""How tight is FedSUM Theorem 4.1 at σ² = 0? Its bound beside the exact worst case.

FedSUM (arXiv:2512.18275), Theorem 4.1, eq. (12), conditional on the participation sequence,
at σ² = 0 (the second η_l branch is then +∞) with τ̂ = max{1, τ_max}:

    η_g = 1/√τ̂,   η_l = 1/(10 √τ̂ K L)   ("corrected"; printed: 1/(10 √(τ̂ K L))),

    (1/T) Σ_{t<T} ‖∇f(x_t)‖² ≤ 20 τ̂ (L Δ_f + F_0) / T                    ("paper" constants)
                            ≤ 20 τ̂ L Δ_f / T + c τ_max F_0 / T            ("tight": c = 2 for FedSUM-B,
                                                                           3 for FedSUM and FedSUM-CR).

Corollary 4.1, eq. (13), in full expectation over {S_t}, at the same per-trace step sizes:
20 E[τ_max] (L Δ_f + F_0)/T at σ² = 0 (E[τ_max] as printed, not E[τ̂]).

The left side's worst case over the theorem's class (every client L-smooth, f(x_0) − f* ≤ Δ_f,
(1/N) Σ_i ‖∇f_i(x_0)‖² ≤ F_0) on one trace is a performance-estimation programme (Drori &
Teboulle, Math. Program. 145, 2014; Taylor, Hendrickx & Glineur, Math. Program. 161, 2017),
built with PEPit (Goujaud et al., Math. Program. Comput., 2024) and solved with Clarabel
(``verify.worst_case``). f* is relaxed to min_t f(x_t): the programme's value is an upper bound
on the class's worst case, so bound / worst case is a lower bound on the theorem's true slack,
and a worst case above the bound is a candidate counterexample until an instance confirms it.

The study (FedSUM-B, FedSUM, FedSUM-CR; L = Δ_f = F_0 = 1):

* ``"theorem"`` rows: the bound and the worst case against T (N = 3, K = 2), against N and
  against K (T = 8), under full participation and a partial pattern (``Uniform(N, N−1)``, one
  trace), at Thm 4.1's step sizes in both forms, and for FedSUM and FedSUM-CR also at the
  printed first branch of Thm D.1 / Thm E.1's statements (``"appendix"``: √N/(10√(τ̂K)) and
  √N/(10√(τ̂KL)) in algorithm notation, whose bound at σ² = 0 is (12)'s);
* ``"corollary"`` rows: Cor 4.1 against T; its worst case is the mean over sampled traces of
  the per-trace worst case at each trace's Thm 4.1 step sizes. E_S[max_f] ≥ max_f E_S, so this
  mean is an upper bound on the worst case of the expectation;
* ``"equal_tau"`` rows: traces of several samplers with the same (τ_max, τ_avg) (N = 3, T = 8):
  the step sizes and the bound are the same on all of them; if their worst cases differ,
  (τ_max, τ_avg) do not determine even the worst case.

Every programme is a cell, saved as ``cells/<sha256 of its config>.json`` as soon as it is
solved (atomically), so that a study resumes where it stopped.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

from participation.delays import delay_metrics

from .cell_store import cell_key, load_cell, save_cell
from ..report import atomic_write, figure, number, save_figure, write_csv, write_json
from ..worst_case import FunctionClass, programme_size, worst_case

__all__ = ["ALGORITHMS", "STEPS", "Design", "EqualTau", "design", "quick_design", "plan", "Plan", "cell_key",
           "solve_cell", "load_cell", "pending", "predicted_seconds", "run", "collect", "markdown", "write", "load",
           "counterexamples", "FILES"]

ALGORITHMS = ("fedsum-b", "fedsum", "fedsum-cr")
#: Step-size forms: Thm 4.1 corrected, Thm 4.1 printed, Thm D.1 / E.1's printed statement.
STEPS = ("corrected", "printed", "appendix")
#: L, Δ_f, F_0 of every programme.
CLASS = {"L": 1.0, "delta_f": 1.0, "F0": 1.0}
SCHEMA = 1
FILES = ("tightness.json", "tightness.csv", "tightness.md", "tightness-T.png", "tightness-NK.png",
         "tightness-equal-tau.png")
CSV_FIELDS = ("kind", "algorithm", "n_clients", "local_steps", "rounds", "pattern", "steps", "group", "samplers",
              "trace", "tau_max", "tau_avg", "eta_l", "eta_g", "worst_case", "worst_case_stderr", "bound_paper",
              "bound_tight", "bound_corollary", "valid", "failed_conditions", "status", "accuracy", "seconds",
              "constraints", "gram")


# ---------------------------------------------------------------------------------- design

@dataclass(frozen=True)
class EqualTau:
    """Traces at equal (τ_max, τ_avg): ``draws`` traces of each sampler at N = ``n_clients``,
    T = ``rounds``, grouped by (τ_max, τ_avg) up to relabelling the clients; ``groups`` groups
    (at most one per τ_max, those drawn by the most samplers), ``per_group`` distinct traces
    each, taken in turn from the samplers."""

    n_clients: int = 3
    rounds: int = 8
    draws: int = 300
    groups: int = 5
    per_group: int = 6
    algorithms: tuple = ALGORITHMS


@dataclass(frozen=True)
class Design:
    """What the study solves. ``rounds``: (algorithm, T values) of the sweep against T at
    N = ``base_clients``, K = ``base_local_steps``; ``clients`` and ``local_steps``: the sweeps
    at T = ``base_rounds``; ``appendix_rounds``: the largest T of the "appendix" step sizes;
    ``corollary_traces``: traces per Cor 4.1 row (seeds 0, 1, …); ``corollary_reps``:
    Monte-Carlo traces for E[τ_max], E[τ_avg]."""

    rounds: tuple
    clients: tuple = (2, 3, 4)
    local_steps: tuple = (1, 2, 3)
    base_clients: int = 3
    base_local_steps: int = 2
    base_rounds: int = 8
    appendix_rounds: int = 8
    corollary_traces: int = 4
    corollary_reps: int = 20_000
    equal_tau: EqualTau | None = EqualTau()
    seed: int = 0

    def as_dict(self) -> dict:
        return {"rounds": {a: list(ts) for a, ts in self.rounds}, "clients": list(self.clients),
                "local_steps": list(self.local_steps), "base_clients": self.base_clients,
                "base_local_steps": self.base_local_steps, "base_rounds": self.base_rounds,
                "appendix_rounds": self.appendix_rounds, "corollary_traces": self.corollary_traces,
                "corollary_reps": self.corollary_reps, "seed": self.seed, "class": dict(CLASS),
                "equal_tau": None if self.equal_tau is None else {
                    "n_clients": self.equal_tau.n_clients, "rounds": self.equal_tau.rounds,
                    "draws": self.equal_tau.draws, "groups": self.equal_tau.groups,
                    "per_group": self.equal_tau.per_group, "algorithms": list(self.equal_tau.algorithms)}}


FULL_ROUNDS = {"fedsum-b": (2, 4, 6, 8, 10, 12, 16, 20), "fedsum": (2, 4, 6, 8), "fedsum-cr": (2, 4, 6, 8)}


def design(max_rounds: int | None = None) -> Design:
    """The full study; ``max_rounds`` caps every T (the sweeps against N and K included), and
    above 20 extends FedSUM-B's sweep against T by steps of 4 up to it."""
    largest = max(max(ts) for ts in FULL_ROUNDS.values())
    cap = max_rounds if max_rounds is not None else largest
    if cap < 2:
        raise ValueError(f"max_rounds must be at least 2, got {max_rounds}")
    longer = tuple(range(largest + 4, cap + 1, 4))
    rounds = tuple((a, tuple(t for t in ts if t <= cap) + (longer if a == "fedsum-b" else ()))
                   for a, ts in FULL_ROUNDS.items())
    base = min(8, cap)
    equal = EqualTau(rounds=min(8, cap))
    return Design(rounds=rounds, base_rounds=base, appendix_rounds=min(8, cap), equal_tau=equal)


def quick_design() -> Design:
    """A few cells at T ≤ 4 (N = 3, K = 2), all of them in the full study's store."""
    return Design(rounds=tuple((a, (2, 4)) for a in ALGORITHMS), clients=(3,), local_steps=(2,), base_rounds=4,
                  appendix_rounds=4, corollary_traces=2, corollary_reps=5_000, equal_tau=None)


# ---------------------------------------------------------------------------------- traces

def partial_pattern(n_clients: int):
    """The partial pattern of the sweeps: N−1 of the N clients, drawn uniformly each round
    (FedSUM Case 1)."""
    from participation.patterns import Uniform

    return Uniform(n_clients, n_clients - 1)


def _pattern_label(pattern: str, n: int) -> str:
    return "full" if pattern == "full" else f"uniform S={n - 1}"


def _mask(pattern: str, n: int, rounds: int, seed: int) -> np.ndarray:
    if pattern == "full":
        return np.ones((rounds, n), dtype=bool)
    return np.asarray(partial_pattern(n).sample(rounds, seed=seed).mask, dtype=bool)


def sets_of(mask) -> list[list[int]]:
    return [np.flatnonzero(row).tolist() for row in np.asarray(mask, dtype=bool)]


def trace_text(sets) -> str:
    """S_0 S_1 …: each round's active clients as digits, "-" for an empty round."""
    return " ".join("".join(str(i) for i in s) or "-" for s in sets)


def _delays(mask) -> tuple[int, float]:
    d = delay_metrics(np.asarray(mask, dtype=bool))
    return int(d.tau_max), float(d.tau_avg)


def canonical(mask) -> bytes:
    """The mask up to relabelling the clients (its columns sorted): the class is symmetric in
    the clients, so relabelled traces have the same worst case."""
    mask = np.asarray(mask, dtype=bool)
    columns = sorted(mask[:, j].tobytes() for j in range(mask.shape[1]))
    return b"".join(columns)


def samplers(n_clients: int) -> dict:
    """The samplers of the equal-τ search at N clients: uniform S of N, Bernoulli, cyclic and
    reshuffled cyclic, on/off cycles with random phases (FedAU's cyclic participation)."""
    from participation.patterns import Bernoulli, Cyclic, OnOffCycles, ReshuffledCyclic, Uniform

    n = n_clients
    half = max(1, n // 2)
    return {"uniform S=1": Uniform(n, 1), f"uniform S={n - 1}": Uniform(n, n - 1),
            "bernoulli p=0.5": Bernoulli(0.5, n_clients=n), "bernoulli p=0.7": Bernoulli(0.7, n_clients=n),
            "cyclic S=1": Cyclic(n, 1), f"reshuffled S=1": ReshuffledCyclic(n, 1),
            "on/off C=3 a=1": OnOffCycles(n, 3, 1), "on/off C=4 a=2": OnOffCycles(n, 4, 2),
            "on/off C=6 a=3": OnOffCycles(n, 6, 3), f"on/off C=8 a={half * 2}": OnOffCycles(n, 8, half * 2)}


def equal_tau_traces(spec: EqualTau, seed: int = 0) -> list[dict]:
    """The chosen groups: each a dict with ``tau_max``, ``tau_avg`` and ``traces``, a list of
    (mask, samplers that drew it up to relabelling)."""
    groups: dict[tuple, dict[bytes, dict]] = {}
    for name, pattern in samplers(spec.n_clients).items():
        batch = pattern.sample_batch(spec.rounds, spec.draws, seed=seed)
        for mask in batch:
            key = _delays(mask)
            if key[0] == 0:
                continue
            entry = groups.setdefault(key, {}).setdefault(canonical(mask), {"mask": mask, "samplers": []})
            if name not in entry["samplers"]:
                entry["samplers"].append(name)
    best: dict[int, tuple] = {}
    for key, traces in groups.items():
        names = {s for t in traces.values() for s in t["samplers"]}
        if len(names) < 2 or len(traces) < 2:
            continue
        score = (len(names), len(traces), -key[1])
        if key[0] not in best or score > best[key[0]][0]:
            best[key[0]] = (score, key)
    chosen = sorted(best.values(), key=lambda sk: (-sk[0][0], -sk[0][1], sk[1]))[:spec.groups]
    out = []
    for _, key in sorted(chosen, key=lambda sk: sk[1]):
        traces = list(groups[key].values())
        order = list(dict.fromkeys(s for t in traces for s in t["samplers"]))
        picked, seen = [], set()
        while len(picked) < spec.per_group and len(picked) < len(traces):
            progressed = False
            for name in order:
                for t in traces:
                    if name in t["samplers"] and id(t) not in seen:
                        seen.add(id(t))
                        picked.append(t)
                        progressed = True
                        break
                if len(picked) >= spec.per_group:
                    break
            if not progressed:
                break
        out.append({"tau_max": key[0], "tau_avg": key[1],
                    "traces": [(np.asarray(t["mask"], dtype=bool), list(t["samplers"])) for t in picked]})
    return out


# ---------------------------------------------------------------------------------- bounds

def _constants(n, k, t):
    from bounds.core import Constants

    return Constants(L=CLASS["L"], sigma2=0.0, delta_f=CLASS["delta_f"], F0=CLASS["F0"], n_clients=n,
                     local_steps=k, rounds=t)


def theorem_bounds(algorithm: str, n: int, k: int, t: int, tau_max: float, tau_avg: float, steps: str) -> dict:
    """(12)'s value with paper and tight constants, the step sizes of ``steps`` and whether the
    algorithm's lemma (C.6, D.6, E.6) and the proof's Π condition hold there."""
    from bounds import fedsum

    c = _constants(n, k, t)
    paper = fedsum.theorem_4_1(c, tau_max, tau_avg, algorithm=algorithm, constants_variant="paper",
                               variant="printed" if steps == "printed" else "corrected")
    tight = fedsum.theorem_4_1(c, tau_max, tau_avg, algorithm=algorithm, constants_variant="tight")
    stepped = paper
    if steps == "appendix":
        theorem = {"fedsum": fedsum.theorem_d1, "fedsum-cr": fedsum.theorem_e1}[algorithm]
        stepped = theorem(c, tau_max, tau_avg, variant="printed")
    return {"eta_l": float(stepped.step_sizes["eta_l"]), "eta_g": float(stepped.step_sizes["eta_g"]),
            "bound_paper": float(paper.value), "bound_tight": float(tight.value), "valid": bool(stepped.valid),
            "failed_conditions": [cond.name for cond in stepped.conditions if not cond.holds]}


# ---------------------------------------------------------------------------------- cells

def cell_config(algorithm: str, n: int, k: int, eta_l: float, eta_g: float, sets) -> dict:
    return {"schema": SCHEMA, "algorithm": algorithm, "n_clients": int(n), "local_steps": int(k),
            "eta_l": float(eta_l), "eta_g": float(eta_g), "sets": [list(map(int, s)) for s in sets],
            "class": dict(CLASS), "measure": "average", "solver": "clarabel"}


def predicted_seconds(config: dict) -> float:
    """The cell's predicted solve time (``verify.worst_case.programme_size``)."""
    return programme_size(config["algorithm"], config["sets"], config["n_clients"], config["local_steps"]).seconds


def solve_cell(config: dict) -> dict:
    """The worst case of one cell (``verify.worst_case.worst_case``, no time limit)."""
    from algorithms import get

    alg = get(config["algorithm"], eta_l=config["eta_l"], eta_g=config["eta_g"], local_steps=config["local_steps"])
    wc = worst_case(alg, config["sets"], FunctionClass(**config["class"]), measure=config["measure"],
                    solver=config["solver"], max_seconds=math.inf, n_clients=config["n_clients"])
    return {"worst_case": wc.value, "primal": wc.primal, "status": wc.status, "solver": wc.solver,
            "accuracy": wc.accuracy, "seconds": wc.seconds, "gram": wc.size.gram, "constraints": wc.size.constraints,
            "relaxation": wc.relaxation}


# ---------------------------------------------------------------------------------- plan

@dataclass
class Plan:
    """Rows (dicts without results) and the cells they read (key → config)."""

    design: Design
    rows: list = field(default_factory=list)
    cells: dict = field(default_factory=dict)

    def cell(self, config: dict) -> str:
        key = cell_key(config)
        self.cells.setdefault(key, config)
        return key


def _steps_for(algorithm: str, n: int, k: int, t: int, d: Design) -> tuple:
    """Thm 4.1's two forms; D.1 / E.1's printed one too for FedSUM and FedSUM-CR on the sweep
    against T (N, K at their base values) up to ``appendix_rounds``."""
    appendix = (algorithm != "fedsum-b" and t <= d.appendix_rounds and n == d.base_clients
                and k == d.base_local_steps)
    return ("corrected", "printed", "appendix") if appendix else ("corrected", "printed")


def _theorem_row(p: Plan, algorithm: str, n: int, k: int, t: int, pattern: str, steps: str) -> dict:
    mask = _mask(pattern, n, t, p.design.seed)
    tau_max, tau_avg = _delays(mask)
    sets = sets_of(mask)
    b = theorem_bounds(algorithm, n, k, t, tau_max, tau_avg, steps)
    key = p.cell(cell_config(algorithm, n, k, b["eta_l"], b["eta_g"], sets))
    return {"kind": "theorem", "algorithm": algorithm, "n_clients": n, "local_steps": k, "rounds": t,
            "pattern": _pattern_label(pattern, n), "steps": steps, "trace": trace_text(sets), "trace_seed":
            None if pattern == "full" else p.design.seed, "tau_max": tau_max, "tau_avg": tau_avg, **b, "cells": [key]}


@lru_cache(maxsize=None)
def _expected_tau(pattern: str, n: int, t: int, reps: int, seed: int) -> dict:
    """E[τ_max], E[τ_avg] of the pattern over T rounds and their standard errors (Monte Carlo,
    ``participation.expected.monte_carlo``; 0 under full participation)."""
    if pattern == "full":
        return {"E_tau_max": 0.0, "E_tau_avg": 0.0, "E_tau_max_stderr": 0.0, "E_tau_avg_stderr": 0.0}
    from participation.expected import monte_carlo

    mc = monte_carlo(partial_pattern(n), t, reps, seed=seed, progress=False)
    return {"E_tau_max": float(mc.tau_max.mean), "E_tau_avg": float(mc.tau_avg.mean),
            "E_tau_max_stderr": float(mc.tau_max.stderr), "E_tau_avg_stderr": float(mc.tau_avg.stderr)}


def _corollary_row(p: Plan, algorithm: str, n: int, k: int, t: int, pattern: str) -> dict:
    from bounds import fedsum

    d = p.design
    count = 1 if pattern == "full" else d.corollary_traces
    keys, traces, taus, per_trace = [], [], [], []
    for seed in range(d.seed, d.seed + count):
        mask = _mask(pattern, n, t, seed)
        tau_max, tau_avg = _delays(mask)
        b = theorem_bounds(algorithm, n, k, t, tau_max, tau_avg, "corrected")
        keys.append(p.cell(cell_config(algorithm, n, k, b["eta_l"], b["eta_g"], sets_of(mask))))
        traces.append(trace_text(sets_of(mask)))
        taus.append([tau_max, tau_avg])
        per_trace.append(b["bound_paper"])
    expected = _expected_tau(pattern, n, t, d.corollary_reps, d.seed)
    cor = fedsum.corollary_4_1(_constants(n, k, t), expected["E_tau_max"], min(expected["E_tau_avg"],
                                                                                expected["E_tau_max"]))
    return {"kind": "corollary", "algorithm": algorithm, "n_clients": n, "local_steps": k, "rounds": t,
            "pattern": _pattern_label(pattern, n), "steps": "corrected", "traces": traces, "trace_taus": taus,
            **expected, "bound_corollary": float(cor.value), "bound_per_trace_mean": float(np.mean(per_trace)),
            "cells": keys}


def plan(d: Design) -> Plan:
    """Every row of the study and the cells they read; cells shared by several rows (the
    base point of the three sweeps, K = 1's equal forms, Cor 4.1's first trace) once."""
    p = Plan(d)
    points = []
    for algorithm, ts in d.rounds:
        points += [(algorithm, d.base_clients, d.base_local_steps, t) for t in ts]
        points += [(algorithm, n, d.base_local_steps, d.base_rounds) for n in d.clients]
        points += [(algorithm, d.base_clients, k, d.base_rounds) for k in d.local_steps]
    for algorithm, n, k, t in dict.fromkeys(points):
        for pattern in ("full", "partial"):
            for steps in _steps_for(algorithm, n, k, t, d):
                p.rows.append(_theorem_row(p, algorithm, n, k, t, pattern, steps))
    for algorithm, ts in d.rounds:
        for t in ts:
            for pattern in ("full", "partial"):
                p.rows.append(_corollary_row(p, algorithm, d.base_clients, d.base_local_steps, t, pattern))
    if d.equal_tau is not None:
        spec = d.equal_tau
        for g, group in enumerate(equal_tau_traces(spec, d.seed)):
            for algorithm in spec.algorithms:
                for mask, names in group["traces"]:
                    tau_max, tau_avg = _delays(mask)
                    b = theorem_bounds(algorithm, spec.n_clients, d.base_local_steps, spec.rounds, tau_max, tau_avg,
                                       "corrected")
                    sets = sets_of(mask)
                    key = p.cell(cell_config(algorithm, spec.n_clients, d.base_local_steps, b["eta_l"], b["eta_g"],
                                             sets))
                    p.rows.append({"kind": "equal_tau", "algorithm": algorithm, "n_clients": spec.n_clients,
                                   "local_steps": d.base_local_steps, "rounds": spec.rounds,
                                   "group": f"({tau_max}, {tau_avg:g})", "samplers": names,
                                   "pattern": names[0], "steps": "corrected", "trace": trace_text(sets),
                                   "tau_max": tau_max, "tau_avg": tau_avg, **b, "cells": [key]})
    return p


# ---------------------------------------------------------------------------------- run

def pending(p: Plan, folder) -> list[str]:
    """Keys of the plan's cells not yet in ``folder``, cheapest first."""
    todo = [k for k in p.cells if load_cell(folder, k) is None]
    return sorted(todo, key=lambda k: (predicted_seconds(p.cells[k]), k))


def run(p: Plan, folder, *, on_cell=None) -> int:
    """Solve the plan's missing cells, cheapest first, saving each as it finishes; returns how
    many were solved. ``on_cell(done, total, config, result)`` after each."""
    todo = pending(p, folder)
    for i, key in enumerate(todo):
        config = p.cells[key]
        result = solve_cell(config)
        save_cell(folder, config, result)
        if on_cell is not None:
            on_cell(i + 1, len(todo), config, result)
    return len(todo)


def collect(p: Plan, folder) -> list[dict]:
    """The plan's rows with their saved worst cases (a row whose cells are missing is left out):
    ``worst_case`` (the mean over traces for Cor 4.1, with ``worst_case_stderr``), the solver's
    status, accuracy and seconds (summed over a row's cells), and the programme's size."""
    rows = []
    for row in p.rows:
        results = [load_cell(folder, k) for k in row["cells"]]
        if any(r is None for r in results):
            continue
        values = [r["worst_case"] for r in results]
        out = dict(row)
        if any(not isinstance(v, (int, float)) for v in values):
            out.update(worst_case=float("nan"), worst_case_stderr=float("nan"))
        else:
            out["worst_case"] = float(np.mean(values))
            out["worst_case_stderr"] = float(np.std(values, ddof=1) / math.sqrt(len(values))) if len(values) > 1 else 0.0
        if row["kind"] == "corollary":
            out["trace_worst_cases"] = [float(v) for v in values]
        out["status"] = ";".join(sorted({r["status"] for r in results}))
        out["accuracy"] = max(float(r["accuracy"]) for r in results)
        out["seconds"] = float(sum(float(r["seconds"]) for r in results))
        out["constraints"] = max(int(r["constraints"]) for r in results)
        out["gram"] = max(int(r["gram"]) for r in results)
        rows.append(out)
    return rows


# ---------------------------------------------------------------------------------- findings

def _bounds_of(row: dict) -> dict:
    if row["kind"] == "corollary":
        return {"Cor 4.1 (printed)": row["bound_corollary"]}
    return {"Thm 4.1 (paper constants)": row["bound_paper"], "Thm 4.1 (tight constants)": row["bound_tight"]}


def counterexamples(rows: list[dict]) -> list[dict]:
    """Every (row, bound) with the worst case above the bound: the row, the bound's name and
    value, the worst case."""
    found = []
    for row in rows:
        wc = row["worst_case"]
        for name, value in _bounds_of(row).items():
            if math.isfinite(wc) and wc > value * (1 + 1e-9) + 1e-12:
                found.append({"row": row, "bound": name, "value": value, "worst_case": wc})
    return found


def min_slack(rows: list[dict]) -> dict:
    """The smallest bound / worst case over the theorem and equal-τ rows, per bound."""
    out = {}
    for name, key in (("paper", "bound_paper"), ("tight", "bound_tight")):
        here = [r for r in rows if r["kind"] != "corollary" and math.isfinite(r["worst_case"]) and r["worst_case"] > 0]
        if here:
            r = min(here, key=lambda r: r[key] / r["worst_case"])
            out[name] = (r[key] / r["worst_case"], r)
    return out


# ---------------------------------------------------------------------------------- tables

def _g(x, digits=4) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    return f"{x:.{digits}g}"


def _theorem_rows(rows):
    return [r for r in rows if r["kind"] == "theorem"]


def _by_point(rows):
    """(algorithm, N, K, T, pattern) → {steps: row}."""
    points: dict = {}
    for r in _theorem_rows(rows):
        points.setdefault((r["algorithm"], r["n_clients"], r["local_steps"], r["rounds"], r["pattern"]), {})[r["steps"]] = r
    return points


def _point_table(points, keys, first: str) -> list[str]:
    lines = [f"| algorithm | {first} | pattern | τ_max | τ_avg | worst case (corrected) | worst case (printed) | "
             "worst case (D.1/E.1 printed) | bound (paper) | bound (tight) | paper / wc | tight / wc | "
             "largest wc / tight |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for key in keys:
        rows = points[key]
        c = rows["corrected"]
        wcs = [r["worst_case"] for r in rows.values()]
        worst = max(wcs)
        value = {"T": key[3], "N": key[1], "K": key[2]}[first]
        marks = {s: ("" if r["valid"] else "*") for s, r in rows.items()}
        cell = lambda s: (_g(rows[s]["worst_case"]) + marks[s]) if s in rows else "—"
        lines.append(f"| {key[0]} | {value} | {key[4]} | {c['tau_max']:g} | {c['tau_avg']:.3g} | {cell('corrected')} | "
                     f"{cell('printed')} | {cell('appendix')} | {_g(c['bound_paper'])} | {_g(c['bound_tight'])} | "
                     f"{c['bound_paper'] / c['worst_case']:.3g} | {c['bound_tight'] / c['worst_case']:.3g} | "
                     f"{worst / c['bound_tight']:.3g} |")
    return lines


def sweep_table(rows, d: Design, axis: str) -> str:
    """Markdown: the bound and the worst cases against ``axis`` ("T", "N" or "K")."""
    points = _by_point(rows)
    if axis == "T":
        wanted = {(a, d.base_clients, d.base_local_steps, t) for a, ts in d.rounds for t in ts}
    elif axis == "N":
        wanted = {(a, n, d.base_local_steps, d.base_rounds) for a, _ in d.rounds for n in d.clients}
    else:
        wanted = {(a, d.base_clients, k, d.base_rounds) for a, _ in d.rounds for k in d.local_steps}
    order = {a: i for i, a in enumerate(ALGORITHMS)}
    keys = sorted((k for k in points if k[:4] in wanted and "corrected" in points[k]),
                  key=lambda k: (order[k[0]], k[4] != "full", k[3] if axis == "T" else k[1] if axis == "N" else k[2]))
    return "\n".join(_point_table(points, keys, axis)) + "\n"


def corollary_table(rows) -> str:
    order = {a: i for i, a in enumerate(ALGORITHMS)}
    here = sorted((r for r in rows if r["kind"] == "corollary"),
                  key=lambda r: (order[r["algorithm"]], r["pattern"] != "full", r["rounds"]))
    lines = ["| algorithm | T | pattern | E[τ_max] | E[τ_avg] | traces | mean worst case ± s.e. | Cor 4.1 bound | "
             "mean Thm 4.1 bound over the traces | Cor 4.1 / mean wc |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in here:
        ratio = r["bound_corollary"] / r["worst_case"] if r["worst_case"] > 0 else float("nan")
        lines.append(f"| {r['algorithm']} | {r['rounds']} | {r['pattern']} | {r['E_tau_max']:.3f} | {r['E_tau_avg']:.3f} | "
                     f"{len(r['cells'])} | {_g(r['worst_case'])} ± {_g(r['worst_case_stderr'], 2)} | "
                     f"{_g(r['bound_corollary'])} | {_g(r['bound_per_trace_mean'])} | {ratio:.3g} |")
    return "\n".join(lines) + "\n"


def equal_tau_summary(rows) -> list[dict]:
    """Per (group, algorithm): the traces' worst cases, their range and the bound."""
    out = {}
    for r in rows:
        if r["kind"] != "equal_tau":
            continue
        out.setdefault((r["tau_max"], r["tau_avg"], r["algorithm"]), []).append(r)
    order = {a: i for i, a in enumerate(ALGORITHMS)}
    summary = []
    for (tmax, tavg, alg), here in sorted(out.items(), key=lambda kv: (kv[0][0], kv[0][1], order[kv[0][2]])):
        wcs = [r["worst_case"] for r in here]
        low, high = min(here, key=lambda r: r["worst_case"]), max(here, key=lambda r: r["worst_case"])
        summary.append({"tau_max": tmax, "tau_avg": tavg, "algorithm": alg, "traces": len(here),
                        "samplers": sorted({s for r in here for s in r["samplers"]}),
                        "min": min(wcs), "max": max(wcs), "spread": max(wcs) / min(wcs) - 1,
                        "argmin": low["trace"], "argmax": high["trace"], "bound_paper": here[0]["bound_paper"],
                        "bound_tight": here[0]["bound_tight"]})
    return summary


def equal_tau_table(rows) -> str:
    lines = ["| τ_max | τ_avg | algorithm | traces | samplers | worst case min | max | max/min − 1 | "
             "trace of the min | trace of the max | bound (paper) | bound (tight) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for s in equal_tau_summary(rows):
        lines.append(f"| {s['tau_max']} | {s['tau_avg']:g} | {s['algorithm']} | {s['traces']} | "
                     f"{', '.join(s['samplers'])} | {_g(s['min'], 5)} | {_g(s['max'], 5)} | {100 * s['spread']:.1f}% | "
                     f"`{s['argmin']}` | `{s['argmax']}` | {_g(s['bound_paper'])} | {_g(s['bound_tight'])} |")
    return "\n".join(lines) + "\n"


def equal_tau_detail(rows) -> str:
    order = {a: i for i, a in enumerate(ALGORITHMS)}
    here = sorted((r for r in rows if r["kind"] == "equal_tau"),
                  key=lambda r: (r["tau_max"], r["tau_avg"], r["trace"], order[r["algorithm"]]))
    traces: dict = {}
    for r in here:
        traces.setdefault((r["tau_max"], r["tau_avg"], r["trace"]), {"samplers": r["samplers"]})[r["algorithm"]] = r
    algs = [a for a in ALGORITHMS if any(a in v for v in traces.values())]
    lines = ["| τ_max | τ_avg | trace S_0…S_7 (clients 0–2) | drawn by | " + " | ".join(f"{a} wc" for a in algs) + " |",
             "|---|---|---|---|" + "---|" * len(algs)]
    for (tmax, tavg, text), v in traces.items():
        lines.append(f"| {tmax} | {tavg:g} | `{text}` | {', '.join(v['samplers'])} | "
                     + " | ".join(_g(v[a]["worst_case"], 6) if a in v else "—" for a in algs) + " |")
    return "\n".join(lines) + "\n"


def time_table(rows, cells: dict) -> str:
    """Solve seconds per algorithm over the study's distinct cells."""
    by = {}
    for key, result in cells.items():
        by.setdefault(result["algorithm"], []).append(result)
    lines = ["| algorithm | programmes | total s | median s | max s | largest programme (Gram side, constraints) |",
             "|---|---|---|---|---|---|"]
    total = 0.0
    for alg in ALGORITHMS:
        here = by.get(alg, [])
        if not here:
            continue
        secs = [r["seconds"] for r in here]
        total += sum(secs)
        big = max(here, key=lambda r: r["constraints"])
        lines.append(f"| {alg} | {len(here)} | {sum(secs):.0f} | {np.median(secs):.2g} | {max(secs):.3g} | "
                     f"{big['gram']}, {big['constraints']} |")
    lines.append(f"| all | {sum(len(v) for v in by.values())} | {total:.0f} | | | |")
    return "\n".join(lines) + "\n"


def findings(rows, cells: dict) -> str:
    """The numbers the report's prose quotes, as one list."""
    lines = []
    theorem = _theorem_rows(rows)
    ok = [r for r in theorem if math.isfinite(r["worst_case"])]
    found = counterexamples(rows)
    thm_found = [f for f in found if f["row"]["kind"] != "corollary"]
    cor_found = [f for f in found if f["row"]["kind"] == "corollary"]
    lines.append(f"- programmes solved: {len(cells)}; rows: {len(theorem)} at Thm 4.1's step sizes, "
                 f"{sum(r['kind'] == 'corollary' for r in rows)} for Cor 4.1, "
                 f"{sum(r['kind'] == 'equal_tau' for r in rows)} at equal (τ_max, τ_avg)")
    statuses = sorted({r["status"] for r in cells.values()})
    worst_acc = max((float(r["accuracy"]) for r in cells.values()), default=float("nan"))
    lines.append(f"- solver statuses: {', '.join(statuses)}; largest relative primal–dual gap {worst_acc:.2g}")
    slack = min_slack(rows)
    for name, (ratio, r) in slack.items():
        lines.append(f"- smallest bound ({name} constants) / worst case over every trace at Thm 4.1's step sizes: "
                     f"{ratio:.3g} ({r['algorithm']}, N={r['n_clients']}, K={r['local_steps']}, T={r['rounds']}, "
                     f"{r['pattern']}, {r['steps']} step sizes)")
    lines.append(f"- worst cases above a Thm 4.1 bound: {len(thm_found)}"
                 + ("" if not thm_found else ": " + "; ".join(
                     f"{f['row']['algorithm']} N={f['row']['n_clients']} K={f['row']['local_steps']} "
                     f"T={f['row']['rounds']} {f['row']['pattern']} {f['row']['steps']}: {f['worst_case']:.4g} > "
                     f"{f['bound']} {f['value']:.4g}" for f in thm_found)))
    lines.append(f"- worst cases above the printed Cor 4.1 bound: {len(cor_found)}"
                 + ("" if not cor_found else " (" + ", ".join(sorted({f"{f['row']['pattern']}" for f in cor_found}))
                    + f"; bound values {', '.join(sorted({_g(f['value']) for f in cor_found}))})"))
    cr = [r for r in ok if r["algorithm"] == "fedsum-cr" and not r["valid"] and r["steps"] == "corrected"]
    if cr:
        top = max(cr, key=lambda r: r["worst_case"] / r["bound_tight"])
        lines.append(f"- FedSUM-CR at Thm 4.1's corrected step sizes breaks Lemma E.6's η_l ≤ 1/(10τ̂KL) on "
                     f"{len(cr)} of {sum(r['algorithm'] == 'fedsum-cr' and r['steps'] == 'corrected' for r in ok)} "
                     f"rows; its largest worst case / tight bound there is {top['worst_case'] / top['bound_tight']:.3g} "
                     f"(T={top['rounds']}, N={top['n_clients']}, K={top['local_steps']}, {top['pattern']})")
    same = [r for r in ok if r["steps"] == "corrected" and r["algorithm"] in ("fedsum", "fedsum-cr")
            and r["pattern"] == "full"]
    pairs = {}
    for r in same:
        pairs.setdefault((r["n_clients"], r["local_steps"], r["rounds"]), {})[r["algorithm"]] = r["worst_case"]
    diffs = [abs(v["fedsum"] - v["fedsum-cr"]) / v["fedsum"] for v in pairs.values() if len(v) == 2]
    if diffs:
        lines.append(f"- full participation: the FedSUM and FedSUM-CR worst cases are equal on all {len(diffs)} common "
                     f"points (largest relative difference {max(diffs):.1g}): with every client in every round, "
                     "FedSUM-CR's correction is FedSUM's")
    spread = equal_tau_summary(rows)
    if spread:
        top = max(spread, key=lambda s: s["spread"])
        lines.append(f"- equal (τ_max, τ_avg): worst cases differ in {sum(s['spread'] > 1e-4 for s in spread)} of "
                     f"{len(spread)} (group, algorithm) pairs by more than 0.01%; the largest spread is "
                     f"{100 * top['spread']:.1f}% ({top['algorithm']}, τ_max={top['tau_max']}, τ_avg={top['tau_avg']:g}: "
                     f"{top['min']:.5g} to {top['max']:.5g})")
    return "\n".join(lines) + "\n"


def markdown(result: dict) -> str:
    """The study's tables (tightness.md): findings, against T, N, K, Cor 4.1, equal τ, solve times."""
    d = _design_from(result["design"])
    rows, cells = result["rows"], result["cells"]
    parts = ["### Findings", "", findings(rows, cells), "### Against T (N = "
             f"{d.base_clients}, K = {d.base_local_steps})", "", sweep_table(rows, d, "T"),
             f"### Against N (K = {d.base_local_steps}, T = {d.base_rounds})", "", sweep_table(rows, d, "N"),
             f"### Against K (N = {d.base_clients}, T = {d.base_rounds})", "", sweep_table(rows, d, "K"),
             "### Corollary 4.1", "", corollary_table(rows)]
    if any(r["kind"] == "equal_tau" for r in rows):
        parts += ["### Equal (τ_max, τ_avg), different traces", "", equal_tau_table(rows), "",
                  equal_tau_detail(rows)]
    parts += ["### Solve times", "", time_table(rows, cells)]
    return "\n".join(parts).rstrip() + "\n"


# ---------------------------------------------------------------------------------- files

def _design_from(data: dict) -> Design:
    eq = data.get("equal_tau")
    return Design(rounds=tuple((a, tuple(ts)) for a, ts in data["rounds"].items()), clients=tuple(data["clients"]),
                  local_steps=tuple(data["local_steps"]), base_clients=data["base_clients"],
                  base_local_steps=data["base_local_steps"], base_rounds=data["base_rounds"],
                  appendix_rounds=data["appendix_rounds"], corollary_traces=data["corollary_traces"],
                  corollary_reps=data["corollary_reps"], seed=data["seed"],
                  equal_tau=None if eq is None else EqualTau(eq["n_clients"], eq["rounds"], eq["draws"], eq["groups"],
                                                             eq["per_group"], tuple(eq["algorithms"])))


def _jsonable(value):
    if isinstance(value, float):
        return number(value)
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def _unjson(value):
    if isinstance(value, str) and value in ("inf", "-inf", "nan"):
        return float(value)
    if isinstance(value, dict):
        return {k: _unjson(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unjson(v) for v in value]
    return value


def result_of(p: Plan, folder) -> dict:
    """The study as saved: design, rows (with worst cases) and the results of its cells (key →
    result with the cell's algorithm, N, K, T)."""
    cells = {}
    for key, config in p.cells.items():
        r = load_cell(folder, key)
        if r is not None:
            cells[key] = {**r, "algorithm": config["algorithm"], "n_clients": config["n_clients"],
                          "local_steps": config["local_steps"], "rounds": len(config["sets"])}
    return {"design": p.design.as_dict(), "rows": collect(p, folder), "cells": cells}


def write(result: dict, folder) -> list[Path]:
    """tightness.json, .csv, .md and the three figures in ``folder``, atomically."""
    folder = Path(folder)
    text = markdown(result)
    flat = []
    for r in result["rows"]:
        row = {k: r.get(k) for k in CSV_FIELDS}
        row["samplers"] = "; ".join(r.get("samplers") or [])
        row["failed_conditions"] = "; ".join(r.get("failed_conditions") or [])
        if r["kind"] == "corollary":
            row["tau_max"], row["tau_avg"], row["trace"] = r["E_tau_max"], r["E_tau_avg"], "; ".join(r["traces"])
        flat.append(row)
    paths = [write_json(folder / "tightness.json", _jsonable(result)),
             write_csv(folder / "tightness.csv", flat, CSV_FIELDS),
             atomic_write(folder / "tightness.md", lambda f: f.write(text)),
             plot_rounds(result, folder / "tightness-T.png"), plot_nk(result, folder / "tightness-NK.png")]
    if any(r["kind"] == "equal_tau" for r in result["rows"]):
        paths.append(plot_equal_tau(result, folder / "tightness-equal-tau.png"))
    return paths


def load(folder) -> dict:
    """The saved study (tightness.json)."""
    return _unjson(json.loads((Path(folder) / "tightness.json").read_text()))


# ---------------------------------------------------------------------------------- figures

COLORS = {"fedsum-b": "tab:blue", "fedsum": "tab:orange", "fedsum-cr": "tab:green"}


def plot_rounds(result: dict, path) -> Path:
    """Bound (paper and tight constants) and worst case at each step-size form against T, one
    panel per (pattern, algorithm); log axes."""
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    d = _design_from(result["design"])
    points = _by_point(result["rows"])
    algs = [a for a, _ in d.rounds]
    fig, axes = figure(2, len(algs), size=(3.6, 3.0))
    styles = {"corrected": ("o-", "tab:blue"), "printed": ("x--", "tab:orange"), "appendix": ("^-.", "tab:green")}
    names = {"corrected": "worst case, Thm 4.1 corrected steps", "printed": "worst case, Thm 4.1 printed steps",
             "appendix": "worst case, Thm D.1/E.1 printed steps"}
    for row, pattern in enumerate(("full", f"uniform S={d.base_clients - 1}")):
        for col, (alg, ts_) in enumerate(d.rounds):
            ax = axes[row][col]
            keys = sorted(k for k in points if k[0] == alg and k[1] == d.base_clients and k[2] == d.base_local_steps
                          and k[4] == pattern and k[3] in ts_)
            if not keys:
                continue
            t = [k[3] for k in keys]
            for steps, (style, color) in styles.items():
                here = [(k[3], points[k][steps]["worst_case"]) for k in keys if steps in points[k]]
                if here:
                    ax.plot(*zip(*here), style, color=color, ms=4, label=names[steps])
            ax.plot(t, [points[k]["corrected"]["bound_paper"] for k in keys], "-", color="black", lw=1,
                    label="bound (12), paper constants")
            ax.plot(t, [points[k]["corrected"]["bound_tight"] for k in keys], "--", color="tab:red", lw=1,
                    label="bound (12), tight constants")
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.xaxis.set_major_formatter(ScalarFormatter())
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.set_xticks(t)
            ax.set_xlabel("T")
            ax.set_title(f"{alg}, {pattern}", fontsize=9)
        axes[row][0].set_ylabel("(1/T) Σ ‖∇f(x_t)‖²")
    handles = {}
    for ax in axes.ravel():
        for h, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, h)
    fig.legend(list(handles.values()), list(handles), loc="outside lower center", ncol=3, fontsize=8, frameon=False)
    fig.suptitle(f"FedSUM Thm 4.1 at σ² = 0, N={d.base_clients}, K={d.base_local_steps}: bound and exact worst case")
    return save_figure(fig, path)


def plot_nk(result: dict, path) -> Path:
    """Bound / worst case against N and against K (T fixed), corrected step sizes."""
    d = _design_from(result["design"])
    points = _by_point(result["rows"])
    fig, axes = figure(1, 2, size=(4.6, 3.6))
    for col, axis in enumerate(("N", "K")):
        ax = axes[0][col]
        for alg, _ in d.rounds:
            for pattern, style in (("full", "o-"), ("partial", "s--")):
                keys = []
                for v in (d.clients if axis == "N" else d.local_steps):
                    n = v if axis == "N" else d.base_clients
                    k = v if axis == "K" else d.base_local_steps
                    label = "full" if pattern == "full" else f"uniform S={n - 1}"
                    key = (alg, n, k, d.base_rounds, label)
                    if key in points and "corrected" in points[key]:
                        keys.append((v, points[key]["corrected"]))
                if keys:
                    ax.plot([v for v, _ in keys], [r["bound_tight"] / r["worst_case"] for _, r in keys], style,
                            color=COLORS[alg], label=f"{alg}, {pattern}")
        ax.set_xticks(list(d.clients if axis == "N" else d.local_steps))
        ax.set_xlabel(axis)
        ax.set_ylabel("tight bound / worst case")
        ax.axhline(1.0, color="black", lw=0.8)
        ax.set_title(f"T={d.base_rounds}, corrected step sizes")
    axes[0][1].legend(fontsize=7, frameon=False)
    return save_figure(fig, path)


def plot_equal_tau(result: dict, path) -> Path:
    """Worst case of each trace of an equal-(τ_max, τ_avg) group, per algorithm, beside the
    group's tight bound."""
    rows = [r for r in result["rows"] if r["kind"] == "equal_tau"]
    groups = list(dict.fromkeys((r["tau_max"], r["tau_avg"]) for r in sorted(rows, key=lambda r: (r["tau_max"], r["tau_avg"]))))
    algs = [a for a in ALGORITHMS if any(r["algorithm"] == a for r in rows)]
    fig, axes = figure(1, len(algs), size=(3.8, 3.6))
    for col, alg in enumerate(algs):
        ax = axes[0][col]
        for g, key in enumerate(groups):
            here = [r for r in rows if r["algorithm"] == alg and (r["tau_max"], r["tau_avg"]) == key]
            xs = g + np.linspace(-0.2, 0.2, len(here)) if len(here) > 1 else [g]
            ax.plot(xs, [r["worst_case"] for r in here], "o", color=COLORS[alg], ms=4)
            if here:
                ax.plot([g - 0.3, g + 0.3], [here[0]["bound_tight"]] * 2, "-", color="tab:red", lw=1)
        ax.set_xticks(range(len(groups)))
        ax.set_xticklabels([f"({a}, {b:g})" for a, b in groups], rotation=45, fontsize=7)
        ax.set_yscale("log")
        ax.set_xlabel("(τ_max, τ_avg)")
        ax.set_title(alg)
    axes[0][0].set_ylabel("worst case (dots), tight bound (red)")
    return save_figure(fig, path)
