"""The measures study: plan, run (resumable), collect, analyse.

:func:`plan` lists the cells of a :class:`~.runs.Design`; :func:`run` computes the missing ones,
saving each as it finishes; :func:`collect` reads them back with every trace's measures
(:func:`participation.measures.measures`: on the logistic problems also the longest absence of a
dominant-label group and the label coverage, from the split's label counts) and
:func:`analyse` compares the models of :mod:`.models` in every (problem, algorithm, step) cell,
summarises the controls and puts the measures beside the exact worst cases of the tightness
study's equal-τ traces.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from participation.measures import measures

from .family import traces as family_traces
from .models import compare
from ..cell_store import cell_key, load_cell, save_cell
from .runs import CNN, Design, algorithms_trace, cell_config, problem, run_cell

__all__ = ["Plan", "plan", "pending", "run", "collect", "analyse", "quick_design", "cnn_design", "worst_case_ranks"]


def quick_design() -> Design:
    """A small study with every part of the full one (a test reruns it and compares)."""
    return Design(n_clients=8, rounds=40, trace_seeds=2, noise_seeds=1, logistic_noise_seeds=1,
                  algorithms=("fedsum-cr", "fedavg"),
                  problems=("quadratic", "logistic α=0.5"), step_scales=(0.3, 1.0), quadratic_dim=4)


def cnn_design() -> Design:
    """The smaller non-convex design: the digits CNN (Dirichlet(0.5) split), N = 10, T = 100,
    one trace per configuration, FedSUM-CR and FedAvg at two given local steps (the scaled
    steps from its estimated L are too small to train it)."""
    return Design(n_clients=10, rounds=100, trace_seeds=1, noise_seeds=1, logistic_noise_seeds=1,
                  logistic_local_steps=2, algorithms=("fedsum-cr", "fedavg"), problems=(CNN,),
                  step_scales=(0.2,), skip_empty=False, step_rule="given")


@dataclass
class Plan:
    design: Design
    traces: list
    cells: list = field(default_factory=list)          # (problem, algorithm, scale, config)


def plan(design: Design) -> Plan:
    cases = family_traces(design.n_clients, design.rounds, design.rate, design.trace_seeds)
    p = Plan(design, cases)
    for name in design.problems:
        for algorithm in design.algorithms:
            for scale in design.step_scales:
                p.cells.append((name, algorithm, float(scale), cell_config(design, name, algorithm, scale, cases)))
    return p


def pending(p: Plan, folder) -> list:
    return [cell for cell in p.cells if load_cell(folder, cell_key(cell[3])) is None]


def run(p: Plan, folder, *, on_cell=None) -> int:
    """Compute the plan's missing cells, problem by problem, saving each; ``on_cell(done, total,
    cell)`` after each. Returns how many were computed."""
    todo = pending(p, folder)
    made: dict = {}
    for i, cell in enumerate(todo):
        name, algorithm, scale, config = cell
        if name not in made:
            made = {name: problem(name, p.design)}
        save_cell(folder, config, run_cell(p.design, name, algorithm, scale, p.traces, made[name]))
        if on_cell is not None:
            on_cell(i + 1, len(todo), cell)
    return len(todo)


def _trace_measures(p: Plan) -> dict:
    """problem → list of each trace's measures (label measures on the logistic problems)."""
    period = max(1, round(1 / p.design.rate))
    out = {}
    for name in p.design.problems:
        counts = problem(name, p.design)[1] if name != "quadratic" else None
        extra = {} if counts is None else {"groups": counts.argmax(axis=1), "label_hist": counts}
        out[name] = [measures(case.mask, period=period, window=period, **extra) for case in p.traces]
    return out


def _as_float(rows) -> np.ndarray:
    return np.array([[float(v) for v in row] for row in rows], dtype=float)


def collect(p: Plan, folder) -> dict:
    """The saved cells (missing ones left out) with the traces and their measures."""
    cells = []
    for name, algorithm, scale, config in p.cells:
        result = load_cell(folder, cell_key(config))
        if result is not None:
            cells.append({"problem": name, "algorithm": algorithm, "scale": scale, **result})
    return {"design": p.design.as_dict(),
            "traces": [{"key": c.key, "label": c.label, "sampler": c.sampler, "seed": c.seed,
                        "empty_rounds": int((~c.mask.any(axis=1)).sum())} for c in p.traces],
            "measures": _trace_measures(p), "cells": cells}


def _response(cell: dict, column: str = "measured"):
    """(log of the mean over seeds per trace, kept traces, diverged traces)."""
    values = _as_float(cell[column])
    diverged = ~np.isfinite(values).all(axis=1)
    return np.log(values[~diverged].mean(axis=1)), np.flatnonzero(~diverged), np.flatnonzero(diverged)


def analyse(result: dict, *, draws: int = 2000) -> dict:
    """Per cell: the model comparison; the controls; the worst-case ranks (when given)."""
    traces = result["traces"]
    rounds = result["design"]["rounds"]
    comparisons, controls = [], []
    for cell in result["cells"]:
        y, kept, diverged = _response(cell)
        rows = [result["measures"][cell["problem"]][j] for j in kept]
        samplers = [traces[j]["sampler"] for j in kept]
        entry = {"problem": cell["problem"], "algorithm": cell["algorithm"], "scale": cell["scale"],
                 "eta_l": cell["eta_l"], "traces": int(kept.size), "diverged": int(diverged.size), "models": []}
        if len(set(samplers)) >= 3:
            entry["models"] = [c.__dict__ for c in compare(rows, y, samplers, rounds, draws=draws)]
        comparisons.append(entry)
        if cell.get("skip_empty") is not None:
            controls.append(_skip_control(cell, traces))
    return {"comparisons": comparisons, "skip_empty": controls, "handover": _handover(result)}


def _skip_control(cell: dict, traces) -> dict:
    """Measured side with a server that skips empty rounds over FedSUM's, on traces with empty rounds."""
    normal, skip = _as_float(cell["measured"]).mean(axis=1), _as_float(cell["skip_empty"]).mean(axis=1)
    with_empty = np.array([t["empty_rounds"] > 0 for t in traces])
    ok = with_empty & np.isfinite(normal) & np.isfinite(skip)
    ratio = skip[ok] / normal[ok]
    return {"problem": cell["problem"], "algorithm": cell["algorithm"], "scale": cell["scale"],
            "traces_with_empty_rounds": int(with_empty.sum()),
            "median_ratio": float(np.median(ratio)) if ratio.size else math.nan,
            "min_ratio": float(ratio.min()) if ratio.size else math.nan,
            "max_ratio": float(ratio.max()) if ratio.size else math.nan}


def _handover(result: dict) -> list[dict]:
    """Per cell: groups that hand over every 4 rounds against per-client on/off cycles of the
    same period length (C = 20 at rate 0.2: both τ_max = 16): the confound of empty rounds and
    random phases removed, does the on/off structure itself cost more?"""
    traces = result["traces"]
    period = 4 * max(1, round(1 / result["design"]["rate"]))
    pairs = {"handover": f"groups hand over every 4", "onoff": f"on/off C={period}"}
    out = []
    for cell in result["cells"]:
        values = _as_float(cell["measured"]).mean(axis=1)
        sides = {k: values[[j for j, t in enumerate(traces) if t["label"] == label]] for k, label in pairs.items()}
        if all(v.size for v in sides.values()):
            out.append({"problem": cell["problem"], "algorithm": cell["algorithm"], "scale": cell["scale"],
                        "handover": float(np.mean(sides["handover"])), "onoff": float(np.mean(sides["onoff"])),
                        "tau_max": [float(np.mean([result["measures"][cell["problem"]][j]["tau_max"]
                                                   for j, t in enumerate(traces) if t["label"] == label]))
                                    for label in pairs.values()]})
    return out


def _sets_mask(text: str, n_clients: int) -> np.ndarray:
    rounds = text.split()
    mask = np.zeros((len(rounds), n_clients), dtype=bool)
    for t, token in enumerate(rounds):
        if token != "-":
            mask[t, [int(c) for c in token]] = True
    return mask


def _engine_sides(members: list[dict]) -> list[float]:
    """The measured side (1/T) Σ ‖∇f(x_t)‖² of one equal-τ group's algorithm, at its step sizes
    (the same for the whole group), on each member's trace, as one batch, on one fixed noise-free
    quadratic of its N clients (dimension 4, L ≤ 1)."""
    import algorithms
    from algorithms.problems import Quadratic

    m = members[0]
    setting = ("algorithm", "eta_l", "eta_g", "local_steps", "n_clients")
    if any(r[k] != m[k] for r in members for k in setting):
        raise ValueError(f"an equal-τ group mixes settings: {sorted({tuple(r[k] for k in setting) for r in members})}")
    problem = Quadratic.random(m["n_clients"], 4, heterogeneity=1.0, noise_std=0.0, seed=0)
    alg = algorithms.get(m["algorithm"], eta_l=m["eta_l"], eta_g=m["eta_g"], local_steps=m["local_steps"])
    traces = [algorithms_trace(_sets_mask(r["trace"], r["n_clients"])) for r in members]
    return [float(np.mean(h.grad_norm2)) for h in algorithms.run_batch(alg, problem, traces, seeds=0)]


def worst_case_ranks(tightness_rows: list[dict]) -> list[dict]:
    """Within each equal-(τ_max, τ_avg) group of the tightness study (same algorithm and step
    sizes), the Spearman correlation between each measure and (a) the exact worst case, (b) the
    measured side of an engine run on one noise-free quadratic (:func:`_engine_sides`); pooled
    over the groups as the mean of the within-group correlations. A measure that explains both
    has correlations of one sign and similar size in (a) and (b)."""
    from scipy.stats import spearmanr

    groups: dict = {}
    for r in tightness_rows:
        if r.get("kind") == "equal_tau" and r.get("worst_case") is not None:
            groups.setdefault((r["group"], r["algorithm"]), []).append(r)
    sides = {key: _engine_sides(members) for key, members in groups.items()}
    names = ("longest_empty_run", "participation_error", "return_time", "mixing_time")
    out = []
    for name in names:
        rhos = {"worst_case": [], "measured": []}
        for key, members in groups.items():
            masks = [_sets_mask(m["trace"], m["n_clients"]) for m in members]
            x = [min(measures(mask)[name], float(mask.shape[0])) for mask in masks]
            if len(set(x)) < 2:
                continue
            for target, y in (("worst_case", [m["worst_case"] for m in members]), ("measured", sides[key])):
                if len(set(y)) > 1:
                    rhos[target].append(float(spearmanr(x, y).statistic))
        row = {"measure": name, "groups": len(groups), "groups_varying": len(rhos["worst_case"])}
        for target, values in rhos.items():
            row[f"{target}_mean_spearman"] = float(np.mean(values)) if values else math.nan
            row[f"{target}_min_spearman"] = float(np.min(values)) if values else math.nan
            row[f"{target}_max_spearman"] = float(np.max(values)) if values else math.nan
        out.append(row)
    return out


def estimate_seconds(p: Plan, folder, *, probe_rounds: int = 4) -> float:
    """Predicted seconds of the plan's missing cells: per problem, two traces run as one batch
    for ``probe_rounds`` and for twice as many rounds, timed; the difference is the cost of a
    run's round, the rest the batch's fixed cost, each scaled to the cells' runs and rounds (the
    skip-empty reruns of the quadratic counted as further runs)."""
    import algorithms

    todo = pending(p, folder)
    if not todo:
        return 0.0
    d = p.design
    costs: dict = {}
    for name in dict.fromkeys(cell[0] for cell in todo):
        prob, _, k = problem(name, d)
        alg = algorithms.get(todo[0][1], eta_l=1e-3, eta_g=1.0, local_steps=k)
        times = []
        for rounds in (probe_rounds, 2 * probe_rounds):
            short = [algorithms_trace(case.mask[:rounds]) for case in p.traces[:2]]
            start = time.perf_counter()
            algorithms.run_batch(alg, prob, short, seeds=[0, 1])
            times.append(time.perf_counter() - start)
        per_round = max(times[1] - times[0], 0.0) / (2 * probe_rounds)
        costs[name] = (per_round, max(times[0] - 2 * probe_rounds * per_round, 0.0))
    total = 0.0
    for name, _, _, _ in todo:
        seeds = d.noise_seeds if name == "quadratic" else d.logistic_noise_seeds
        runs = len(p.traces) * seeds * (2 if d.skip_empty and name == "quadratic" else 1)
        per_round, fixed = costs[name]
        total += per_round * runs * d.rounds + fixed
    return total
