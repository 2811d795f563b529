"""The measures study written down: tables, findings computed from the data, figures, files.

Every number in :func:`markdown` comes from the collected result and its analysis
(:func:`.study.analyse`), so the report can be regenerated from the saved files alone.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from ...report import atomic_write, figure, number, save_figure, write_csv, write_json

__all__ = ["markdown", "findings", "write", "load", "FILES", "MIDDLE"]

FILES = ("measures.json", "measures.md", "models.csv", "traces.csv", "measures.png")
#: Index of the step-size scale the per-sampler tables show (the middle of the grid).
MIDDLE = 1


def _g(x, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    if isinstance(x, float) and math.isinf(x):
        return "∞"
    return f"{x:.{digits}g}"


def _members(result: dict) -> list[str]:
    return list(dict.fromkeys(t["label"] for t in result["traces"]))


def _by_member(result: dict, values) -> dict:
    out: dict = {}
    for t, v in zip(result["traces"], values):
        out.setdefault(t["label"], []).append(v)
    return out


def trace_table(result: dict) -> str:
    """Per sampler configuration: its sampler and the mean over its traces of every measure
    (on the first problem's split where labels enter)."""
    name = next((p for p in result["design"]["problems"] if p != "quadratic"), result["design"]["problems"][0])
    rows = result["measures"][name]
    keys = [k for k in rows[0]]
    lines = [f"| configuration | sampler | empty rounds | " + " | ".join(keys) + " |",
             "|---|---|---|" + "---|" * len(keys)]
    empties = _by_member(result, [t["empty_rounds"] for t in result["traces"]])
    for label in _members(result):
        idx = [j for j, t in enumerate(result["traces"]) if t["label"] == label]
        sampler = result["traces"][idx[0]]["sampler"]
        cells = [_g(float(np.mean([min(rows[j][k], result["design"]["rounds"]) for j in idx]))) for k in keys]
        lines.append(f"| {label} | {sampler} | {_g(float(np.mean(empties[label])))} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _cell(result: dict, problem: str, algorithm: str, scale: float):
    return next((c for c in result["cells"] if c["problem"] == problem and c["algorithm"] == algorithm
                 and c["scale"] == scale), None)


def measured_table(result: dict, problem: str) -> str:
    """Per sampler configuration: the median over its traces of the measured side (mean over
    noise seeds) of each algorithm at the middle step size; ``div`` counts diverged traces."""
    scales = result["design"]["step_scales"]
    scale = scales[min(MIDDLE, len(scales) - 1)]
    algorithms = result["design"]["algorithms"]
    lines = [f"| configuration | " + " | ".join(algorithms) + " |", "|---|" + "---|" * len(algorithms)]
    columns = {}
    for a in algorithms:
        cell = _cell(result, problem, a, scale)
        values = np.array([[float(v) for v in row] for row in cell["measured"]]).mean(axis=1) if cell else None
        columns[a] = _by_member(result, values) if values is not None else {}
    for label in _members(result):
        cells = []
        for a in algorithms:
            v = np.asarray(columns[a].get(label, []), dtype=float)
            cells.append("—" if v.size == 0 else _g(float(np.median(v[np.isfinite(v)]))) if np.isfinite(v).any()
                         else "diverged")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    step = f"{scale:g}" if result["design"].get("step_rule") == "given" else f"{scale:g}/(K L)"
    return f"η_l = {step}, η_g = 1\n\n" + "\n".join(lines)


def model_summary(analysis: dict, problem: str) -> list[dict]:
    """Per model, over the (algorithm, step) cells of ``problem``: median held-out RMSE, the
    number of cells where its improvement over τ_max + τ_avg has an interval above 0 (and below
    0), and the median improvement."""
    cells = [c for c in analysis["comparisons"] if c["problem"] == problem and c["models"]]
    by_model: dict = {}
    for c in cells:
        for m in c["models"]:
            by_model.setdefault(m["model"], []).append(m)
    return [{"model": name, "cells": len(ms), "rmse": float(np.median([m["rmse"] for m in ms])),
             "improvement": float(np.median([m["improvement"] for m in ms])),
             "above": sum(m["low"] > 0 for m in ms), "below": sum(m["high"] < 0 for m in ms)}
            for name, ms in by_model.items()]


def model_table(analysis: dict, problem: str) -> str:
    lines = ["| model | median held-out RMSE | median improvement over τ_max + τ_avg | cells better (interval > 0) | "
             "cells worse (interval < 0) |", "|---|---|---|---|---|"]
    for m in model_summary(analysis, problem):
        lines.append(f"| {m['model']} | {m['rmse']:.3f} | {m['improvement']:+.4f} | {m['above']} of {m['cells']} | "
                     f"{m['below']} of {m['cells']} |")
    return "\n".join(lines)


def skip_table(analysis: dict) -> str:
    lines = ["| algorithm | η_l scale | traces with empty rounds | skipping / stepping: median [min, max] |",
             "|---|---|---|---|"]
    for c in analysis["skip_empty"]:
        lines.append(f"| {c['algorithm']} | {c['scale']:g} | {c['traces_with_empty_rounds']} | "
                     f"{_g(c['median_ratio'])} [{_g(c['min_ratio'])}, {_g(c['max_ratio'])}] |")
    return "\n".join(lines)


def handover_table(analysis: dict) -> str:
    lines = ["| problem | algorithm | η_l scale | groups hand over every 4 | on/off cycles | on/off / handover |",
             "|---|---|---|---|---|---|"]
    for c in analysis["handover"]:
        lines.append(f"| {c['problem']} | {c['algorithm']} | {c['scale']:g} | {_g(c['handover'])} | {_g(c['onoff'])} | "
                     f"{_g(c['onoff'] / c['handover'])} |")
    return "\n".join(lines)


def worst_case_table(ranks: list[dict]) -> str:
    lines = ["| measure | groups where it varies | ρ with the worst case: mean [min, max] | ρ with the engine's measured "
             "side: mean [min, max] |", "|---|---|---|---|"]
    for r in ranks:
        cells = [f"{_g(r[f'{t}_mean_spearman'], 2)} [{_g(r[f'{t}_min_spearman'], 2)}, {_g(r[f'{t}_max_spearman'], 2)}]"
                 for t in ("worst_case", "measured")]
        lines.append(f"| {r['measure']} | {r['groups_varying']} of {r['groups']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def findings(result: dict, analysis: dict, ranks: list[dict]) -> list[str]:
    """The study's conclusions, each sentence computed from the data."""
    out = []
    for problem in result["design"]["problems"]:
        summary = {m["model"]: m for m in model_summary(analysis, problem)}
        if not summary:
            continue
        helpful = sorted((m for m in summary.values() if m["model"].startswith("τ_max + τ_avg +") and m["above"] > 0),
                         key=lambda m: (-m["above"], m["rmse"]))
        base = summary["τ_max + τ_avg"]
        if helpful:
            best = helpful[0]
            out.append(f"{problem}: beyond τ_max + τ_avg, {best['model'].removeprefix('τ_max + τ_avg + ')} improves the "
                       f"held-out prediction in {best['above']} of {best['cells']} (algorithm, step) cells (median RMSE "
                       f"{best['rmse']:.3f} against {base['rmse']:.3f})"
                       + ("; also " + ", ".join(f"{m['model'].removeprefix('τ_max + τ_avg + ')} in {m['above']}"
                                                 for m in helpful[1:]) if len(helpful) > 1 else "") + ".")
        else:
            out.append(f"{problem}: no measure improves on τ_max + τ_avg with an interval above 0 in any cell "
                       f"(median RMSE {base['rmse']:.3f}).")
        single = {k: summary[k] for k in ("τ_max", "τ_avg") if k in summary}
        if single:
            better = min(single.values(), key=lambda m: m["rmse"])
            out.append(f"{problem}: of FedSUM's two measures alone, {better['model']} predicts better (median RMSE "
                       f"{better['rmse']:.3f} against {max(single.values(), key=lambda m: m['rmse'])['rmse']:.3f}).")
    diverged = sum(c["diverged"] for c in analysis["comparisons"])
    out.append(f"{diverged} (trace, cell) pairs diverged and are left out of the models.")
    if analysis["skip_empty"]:
        ratios = [c["median_ratio"] for c in analysis["skip_empty"] if not math.isnan(c["median_ratio"])]
        if ratios:
            out.append(f"A server that skips empty rounds changes the quadratic's measured side on traces with empty "
                       f"rounds by a median factor between {min(ratios):.3g} and {max(ratios):.3g} across the "
                       "algorithms and steps.")
    if analysis["handover"]:
        r = [c["onoff"] / c["handover"] for c in analysis["handover"]]
        out.append(f"At equal τ_max, per-client on/off cycles against groups that hand over without empty rounds: "
                   f"ratio of measured sides between {min(r):.3g} and {max(r):.3g}.")
    if ranks:
        usable = [r for r in ranks if not math.isnan(r["worst_case_mean_spearman"])]
        if usable:
            strongest = max(usable, key=lambda r: abs(r["worst_case_mean_spearman"]))
            both = [r["measure"] for r in usable if not math.isnan(r["measured_mean_spearman"])
                    and np.sign(r["measured_mean_spearman"]) == np.sign(r["worst_case_mean_spearman"])
                    and min(abs(r["measured_mean_spearman"]), abs(r["worst_case_mean_spearman"])) >= 0.3]
            out.append(f"Among equal-(τ_max, τ_avg) traces, the exact worst case follows {strongest['measure']} most "
                       f"closely (mean within-group Spearman ρ {strongest['worst_case_mean_spearman']:.2f}; the engine's "
                       f"measured side on a quadratic: {strongest['measured_mean_spearman']:.2f}); "
                       + (f"the same sign and |ρ| ≥ 0.3 for both: {', '.join(both)}." if both else
                          "no measure has the same sign and |ρ| ≥ 0.3 for both."))
    return out


def markdown(result: dict, analysis: dict, ranks: list[dict]) -> str:
    d = result["design"]
    parts = [f"# Which participation measure predicts convergence? (generated by `fedverify experiment measures`)", "",
             f"N = {d['n_clients']} clients, T = {d['rounds']} rounds, rate ≈ {d['rate']:g}, {d['trace_seeds']} traces "
             f"per configuration, K = {d['local_steps']} (quadratic) / {d['logistic_local_steps']} (logistic), "
             f"{d['noise_seeds']} / {d['logistic_noise_seeds']} noise seeds; algorithms {', '.join(d['algorithms'])}; "
             f"η_l = s/(K L) for s in {', '.join(f'{s:g}' for s in d['step_scales'])}, η_g = 1.", "",
             "## Findings", "", *[f"* {f}" for f in findings(result, analysis, ranks)], "",
             "## The traces (mean over each configuration's traces)", "", trace_table(result), ""]
    for problem in d["problems"]:
        parts += [f"## Measured (1/T) Σ ‖∇f(x_t)‖² on {problem} (median over traces)", "",
                  measured_table(result, problem), "", f"### Models on {problem}", "", model_table(analysis, problem), ""]
    if analysis["skip_empty"]:
        parts += ["## Control: a server that skips empty rounds (quadratic)", "", skip_table(analysis), ""]
    if analysis["handover"]:
        parts += ["## Control: on/off cycles against groups that hand over, at equal τ_max", "",
                  handover_table(analysis), ""]
    if ranks:
        parts += ["## The exact worst case among traces of equal (τ_max, τ_avg)", "", worst_case_table(ranks), ""]
    return "\n".join(parts).rstrip() + "\n"


def _model_rows(analysis: dict) -> list[dict]:
    return [{"problem": c["problem"], "algorithm": c["algorithm"], "scale": c["scale"], "traces": c["traces"],
             "diverged": c["diverged"], **{k: m[k] for k in ("model", "rmse", "improvement", "low", "high")}}
            for c in analysis["comparisons"] for m in c["models"]]


def _trace_rows(result: dict) -> list[dict]:
    rows = []
    for cell in result["cells"]:
        values = np.array([[float(v) for v in row] for row in cell["measured"]]).mean(axis=1)
        for t, v, m in zip(result["traces"], values, result["measures"][cell["problem"]]):
            rows.append({"problem": cell["problem"], "algorithm": cell["algorithm"], "scale": cell["scale"],
                         "trace": t["key"], "sampler": t["sampler"], "measured": number(float(v)),
                         **{k: number(float(x)) if math.isfinite(x) else str(x) for k, x in m.items()}})
    return rows


def plot(result: dict, path) -> Path:
    """Measured side against τ_max, one marker per sampler, for every problem (fedavg, middle step)."""
    problems = result["design"]["problems"]
    fig, axes = figure(1, len(problems))
    samplers = list(dict.fromkeys(t["sampler"] for t in result["traces"]))
    scale = result["design"]["step_scales"][min(MIDDLE, len(result["design"]["step_scales"]) - 1)]
    algorithm = "fedavg" if "fedavg" in result["design"]["algorithms"] else result["design"]["algorithms"][0]
    markers = "os^vD<>phX*P8dH"
    for ax, problem in zip(axes.ravel(), problems):
        cell = _cell(result, problem, algorithm, scale)
        if cell is None:
            continue
        values = np.array([[float(v) for v in row] for row in cell["measured"]]).mean(axis=1)
        tau = np.array([m["tau_max"] for m in result["measures"][problem]])
        for k, s in enumerate(samplers):
            idx = [j for j, t in enumerate(result["traces"]) if t["sampler"] == s and np.isfinite(values[j])]
            ax.scatter(tau[idx], values[idx], marker=markers[k % len(markers)], s=18, label=s)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("τ_max")
        ax.set_title(f"{problem}, {algorithm}", fontsize=9)
    axes.ravel()[0].set_ylabel("(1/T) Σ ‖∇f(x_t)‖²")
    axes.ravel()[-1].legend(fontsize=6, loc="best")
    return save_figure(fig, path)


def _jsonable(value):
    """``value`` with every non-finite float as its string ("inf", "-inf", "nan"), which
    :func:`_unjson` turns back."""
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def _unjson(value):
    if isinstance(value, dict):
        return {k: _unjson(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unjson(v) for v in value]
    if value in ("inf", "-inf", "nan"):
        return float(value)
    return value


def write(result: dict, analysis: dict, ranks: list[dict], folder) -> list[Path]:
    """measures.json (the whole result, analysis and worst-case ranks), models.csv, traces.csv,
    measures.md and measures.png in ``folder``, each written atomically."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = [write_json(folder / "measures.json",
                        _jsonable({"result": result, "analysis": analysis, "worst_case": ranks}))]
    paths.append(write_csv(folder / "models.csv", _model_rows(analysis),
                           ("problem", "algorithm", "scale", "traces", "diverged", "model", "rmse", "improvement",
                            "low", "high")))
    trace_rows = _trace_rows(result)
    fields = list(trace_rows[0]) if trace_rows else ["problem"]
    paths.append(write_csv(folder / "traces.csv", trace_rows, fields))

    paths.append(atomic_write(folder / "measures.md", lambda f: f.write(markdown(result, analysis, ranks))))
    paths.append(plot(result, folder / "measures.png"))
    return paths


def load(folder) -> dict:
    """The saved {"result", "analysis", "worst_case"} of :func:`write`."""
    return _unjson(json.loads((Path(folder) / "measures.json").read_text()))


PREFACE = """\
# What drives convergence under participation? A measures study across every sampler

FedSUM's bound reads the participation sequence through τ_max and τ_avg alone (R. You, S. Pu,
arXiv:2512.18275, §2.2). Other analyses read it through other quantities: the participation error
δ̃²(P) over windows of P rounds (S. Wang, M. Ji, NeurIPS 2022, arXiv:2205.13648, §3), the hitting or
return time of the availability chain (M. Even, ICML 2023, arXiv:2302.14428) and its mixing time
(T. Sun, Y. Sun, W. Yin, NeurIPS 2018; CA-Fed), the longest run of empty rounds (in which FedSUM's
server still steps along its stale sum), the longest joint absence of a group of clients, and how
far the participants' label mix over a window is from the population's. None of them has been
tested against measured convergence across participation mechanisms. This study does so.

**Method.** Traces of every participation sampler fedverify has (`verify.studies.measures_study.family`),
each measure computed on each trace (`participation.measures`, each cross-checked against a loop
written from its definition). The measured side (1/T) Σ_{t<T} ‖∇f(x_t)‖² of FedSUM-CR, FedAvg and
SCAFFOLD on a noisy heterogeneous quadratic and on logistic regression over scikit-learn's digits
split three ways (Dirichlet α = 0.1, 0.5 and an i.i.d. split), at one step-size grid shared by all
traces, and, on a smaller design, of FedSUM-CR and FedAvg on the digits CNN. For each (problem,
algorithm, step) cell, models of log(measured) on the measures are compared by their
leave-one-sampler-out prediction error: a model is fitted on the traces of all samplers but one and
predicts that one. A measure "carries information beyond τ_max and τ_avg" in a cell when adding it
to τ_max + τ_avg lowers the held-out squared error with a 95% cluster-bootstrap interval (samplers
resampled) above 0. Controls: a server that skips empty rounds (quadratic), groups that hand over
without empty rounds against on/off cycles at equal τ_max, and the three label splits. Beside it,
the exact worst cases of the tightness study's equal-(τ_max, τ_avg) traces
(`docs/reproductions/fedsum-tightness.md`) against the same measures.

**Limits.** The measures are correlated with each other across samplers (long on/off cycles have
long τ_max, empty rounds and slow mixing at once), so "carries information beyond" is a statement
about prediction across samplers, not about cause; the controls separate some mechanisms. Two
traces per configuration; one or two noise seeds. At N = 20 and a rate of 0.2 empty rounds are rare
(a few per 200 rounds, most on P3 and FedAWE's sine), so the skip-empty control and the longest
empty run have little to act on in the convex part. The CNN part has one trace per configuration,
one noise seed and one step size, so its response is noisy; and on a non-convex problem a small
(1/T) Σ ‖∇f(x_t)‖² can also mean a run that stalled on a plateau, not one that trained. Everything below this line is generated from the saved data by
`fedverify experiment measures` (`verify.studies.measures_study.report`), and a test regenerates it.

"""


def page(convex: dict, cnn: dict | None = None) -> str:
    """The report: :data:`PREFACE`, the convex study (``{"result", "analysis", "worst_case"}``)
    and, when given, the CNN study's findings, measured sides and models."""
    body = markdown(convex["result"], convex["analysis"], convex["worst_case"]).split("\n", 1)[1].lstrip("\n")
    parts = [PREFACE, body]
    if cnn is not None:
        result, analysis = cnn["result"], cnn["analysis"]
        problem = result["design"]["problems"][0]
        d = result["design"]
        parts += ["", f"## The digits CNN (smaller design)", "",
                  f"N = {d['n_clients']}, T = {d['rounds']}, K = {d['logistic_local_steps']}, one trace per "
                  f"configuration, {', '.join(d['algorithms'])} at η_l = {', '.join(f'{s:g}' for s in d['step_scales'])}, "
                  "η_g = 1.", "", *[f"* {f}" for f in findings(result, analysis, [])], "",
                  measured_table(result, problem), "", f"### Models on {problem}", "", model_table(analysis, problem)]
    return "\n".join(parts).rstrip() + "\n"


def write_page(folder, path=None) -> Path:
    """:func:`page` of the studies saved in ``folder`` (the convex one, and ``folder/cnn`` when
    it is there), written to ``path`` (default ``folder/report.md``)."""
    folder = Path(folder)
    cnn = load(folder / "cnn") if (folder / "cnn" / "measures.json").is_file() else None

    text = page(load(folder), cnn)
    return atomic_write(Path(path) if path is not None else folder / "report.md", lambda f: f.write(text))
