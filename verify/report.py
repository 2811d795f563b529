"""Tables, plots and files for the ``fedverify`` command.

Every file is written atomically (a temporary file in the same folder, then
``os.replace``), so a reader never sees half a file. Plots use matplotlib's Agg canvas
directly: importing this module never changes the global backend.
"""
from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np



def atomic_write(path, write, *, binary: bool = False) -> Path:
    """``participation.files.atomic_write``, imported on first use so that the command line's
    ``--help`` (which reads the sweep's spec format from ``verify.sweep``) loads no numerics."""
    from participation.files import atomic_write as write_atomically

    return write_atomically(path, write, binary=binary)


__all__ = ["atomic_write", "write_json", "write_csv", "plot_format", "save_figure", "figure", "number",
           "check_table", "check_footnotes", "plot_check", "plot_delays", "plot_mc", "bound_report",
           "CSV_FIELDS"]

#: Columns of the check CSV (and the flat part of each JSON row).
CSV_FIELDS = ("theorem", "algorithm", "pattern", "rounds", "tau_max", "tau_avg", "measured", "lower", "upper", "bound", "ratio",
              "verdict", "label", "covered", "violated_conditions", "eta_g", "eta_l")


# ---------------------------------------------------------------------------- files


def number(value):
    """A JSON-safe float: non-finite values become the strings "inf", "-inf", "nan"."""
    value = float(value)
    return value if math.isfinite(value) else str(value)


def write_json(path, data) -> Path:
    return atomic_write(path, lambda f: f.write(json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n"))


def write_csv(path, rows: Iterable[dict], fields: Sequence[str]) -> Path:
    def write(f):
        writer = csv.DictWriter(f, fieldnames=list(fields), extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: ("; ".join(v) if isinstance(v, (list, tuple)) else v) for k, v in row.items()})
    return atomic_write(path, write)


def figure(nrows: int = 1, ncols: int = 1, size=(5.0, 3.6)):
    """(Figure, axes array) on the Agg canvas, without pyplot."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(size[0] * ncols, size[1] * nrows), layout="constrained")
    FigureCanvasAgg(fig)
    return fig, np.atleast_1d(fig.subplots(nrows, ncols, squeeze=False))


def plot_format(path) -> str:
    """The image format of ``path`` from its suffix, or a ValueError naming the file."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fmt = Path(path).suffix.lower().lstrip(".")
    supported = FigureCanvasAgg.get_supported_filetypes()
    if fmt not in supported:
        raise ValueError(f"cannot write a plot to {Path(path).name!r}: use .png, .pdf, .svg or another of "
                         f".{', .'.join(sorted(supported))}")
    return fmt


def save_figure(fig, path) -> Path:
    """Save ``fig`` atomically; the format follows the suffix (png, pdf, svg, ...). A failure
    to write names ``path``, not the temporary file beside it."""
    fmt = plot_format(path)
    try:
        return atomic_write(path, lambda f: fig.savefig(f, format=fmt, dpi=120), binary=True)
    except OSError as err:
        raise OSError(err.errno, f"cannot write the plot ({err.strerror or type(err).__name__})", str(path)) from None


# ---------------------------------------------------------------------------- check


def _fmt(value: float, width: int, digits: int = 4) -> str:
    if math.isnan(value):
        return f"{'—':>{width}s}"
    return f"{value:>{width}.{digits}g}" if math.isfinite(value) else f"{str(value):>{width}s}"


def check_table(rows: Sequence[dict]) -> str:
    """One line per (algorithm, pattern): τ_max, τ_avg (E[τ_max], E[τ_avg] when the bound is over
    the participation), measured, bound, ratio, verdict label."""
    expected = (bool(rows) and all(r.get("expectation") for r in rows)
                and any(math.isfinite(r["tau_max"]) for r in rows))
    tmax, tavg = ("E[tau_max]", "E[tau_avg]") if expected else ("tau_max", "tau_avg")
    wa = max([10] + [len(r["algorithm"]) for r in rows])
    head = (f"{'algorithm':{wa}s} {'pattern':10s} {tmax:>{len(tmax)}s} {tavg:>{len(tavg)}s} {'measured':>10s} "
            f"{'bound':>10s} {'ratio':>7s}  verdict")
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['algorithm']:{wa}s} {r['pattern']:10s} {_fmt(r['tau_max'], len(tmax), 3)} "
                     f"{_fmt(r['tau_avg'], len(tavg), 4)} {_fmt(r['measured'], 10)} {_fmt(r['bound'], 10)} "
                     f"{_fmt(r['ratio'], 7, 3)}  {r['label']}")
    return "\n".join(lines)


def _side_value(value) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    return f"{value:.4g}"


def side_quantities(rows: Sequence[dict]) -> list[str]:
    """The measured side quantities each verdict rests on (σ_g², ε, Γ, diam(W), the bias, E[τ] and
    how it was obtained, ...), one line per row that has any."""
    import textwrap

    lines = []
    for r in rows:
        extras = r.get("result", {}).get("extras") or {}
        if extras:
            text = f"{r['algorithm']}/{r['pattern']}: " + ", ".join(f"{k} = {_side_value(v)}" for k, v in extras.items())
            lines += textwrap.wrap(text, 110, initial_indent="  ", subsequent_indent="      ", break_on_hyphens=False)
    return ["measured beside the verdicts:", *lines] if lines else []


def check_footnotes(rows: Sequence[dict], theorem: str) -> list[str]:
    """The footnotes the labels point to: violated hypotheses (*), step sizes outside the
    theorem's (†), one fixed trace for an expectation (‡), diverged runs, reference rows (ref),
    admissible-step rows (adm), then the measured side quantities."""
    from .verdicts import MARKS

    notes = []
    violated: dict[str, dict[str, None]] = {}
    for r in rows:
        for name in r["violated_conditions"]:
            violated.setdefault(r["algorithm"], {})[name] = None
    covered = {r["algorithm"] for r in rows if r["covered"]}
    fedsum = theorem.startswith("fedsum.")
    for algorithm, names in violated.items():
        why = (" (the theorem's own step sizes break a hypothesis of the lemma its proof uses: a gap in the paper's proof)"
               if algorithm in covered and fedsum else "")
        notes.append(f"* {algorithm}: hypothesis violated at the {'prescribed ' if fedsum else ''}step sizes"
                     f"{'' if fedsum else ' used'}: {'; '.join(names)}{why}. "
                     f"{theorem} is then not proved for this run; the verdict compares the numbers only.")
    outside = {r["algorithm"]: r["result"].get("steps_outside") for r in rows if r.get("result", {}).get("steps_outside")}
    for algorithm, why in outside.items():
        notes.append(f"† {algorithm}: {why}; {MARKS['†']}")
    fixed = [f"{r['algorithm']}/{r['pattern']}" for r in rows if r.get("result", {}).get("fixed_trace")]
    if fixed:
        notes.append(f"‡ {', '.join(fixed)}: {MARKS['‡']}")
    diverged = [f"{r['algorithm']}/{r['pattern']}" for r in rows if r.get("result", {}).get("diverged")]
    if diverged:
        notes.append(f"(diverged) {', '.join(diverged)}: {MARKS['(diverged)']}")
    reference = list(dict.fromkeys(r["algorithm"] for r in rows if not r["covered"]))
    if reference and fedsum:
        notes.append(f"(ref) {', '.join(reference)}: not covered by {theorem}; run at the step sizes it prescribes "
                     "(FedSUM-B's) and compared with its value, for reference only.")
    for algorithm in reference if not fedsum else ():
        said = [n for r in rows if r["algorithm"] == algorithm and not r["covered"]
                for n in r.get("result", {}).get("notes", ()) if "for reference" in n]
        notes.append(f"(ref) {algorithm}: " + ("; ".join(dict.fromkeys(said)) if said else
                                              f"not covered by {theorem}; compared with its value for reference only"))
    admissible = list(dict.fromkeys(r["algorithm"] for r in rows if r["algorithm"].endswith(ADMISSIBLE_SUFFIX)))
    if admissible:
        notes.append(f"{', '.join(admissible)}: the same algorithm at the largest η_l at which "
                     "every hypothesis of its lemma holds, so that the row tests the theorem's proof (the bound is the "
                     "lemma at those step sizes where the theorem prescribes its own)")
    stopped = [f"{r['algorithm']}/{r['pattern']}" for r in rows if r.get("stopped")]
    if stopped:
        notes.append(f"runs stopped (non-finite values): {', '.join(stopped)}")
    return notes + side_quantities(rows)


#: How ``fedverify check`` names the row of an algorithm run at its lemma's admissible step sizes.
ADMISSIBLE_SUFFIX = ":adm"


def _quiet_log_axis(ax) -> None:
    """Log y axis labelled at 1, 2, 5 × 10^k in plain numbers; other ticks unlabelled."""
    from matplotlib.ticker import FormatStrFormatter, LogLocator, NullFormatter

    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
    ax.yaxis.set_minor_formatter(NullFormatter())


def plot_check(rows: Sequence[dict], path, title: str = "") -> Path:
    """One panel per pattern: running average (1/t) Σ_{s<t} ‖∇f(x_s)‖² of seed 0 for each
    algorithm (solid, with its own staggered markers, since curves often coincide), the
    measured mean over seeds at T (dot) and the bound (dashed, black;
    one line per distinct value, labelled with the algorithms it is for when they differ).
    One legend for the figure, below the panels."""
    several = len({r.get("theorem") for r in rows}) > 1
    panel = (lambda r: f"{r['theorem']}, {r['pattern']}") if several else (lambda r: r["pattern"])
    patterns = list(dict.fromkeys(panel(r) for r in rows))
    algorithms = list(dict.fromkeys(r["algorithm"] for r in rows))
    fig, axes = figure(1, len(patterns), size=(4.4, 3.4))
    colours = {a: f"C{i}" for i, a in enumerate(algorithms)}
    markers = {a: "osD^vx+*"[i % 8] for i, a in enumerate(algorithms)}
    styles = ("--", "-.", ":")
    for ax, pattern in zip(axes.ravel(), patterns):
        here = [r for r in rows if panel(r) == pattern]
        for r in here:
            c = colours[r["algorithm"]]
            curve = np.asarray(r["curve"], dtype=float)
            if curve.size:
                k = algorithms.index(r["algorithm"])     # staggered markers keep overlapping curves apart
                ax.plot(np.arange(1, curve.size + 1), curve, color=c, lw=1.3, alpha=0.9, marker=markers[r["algorithm"]],
                        ms=4, markevery=(k * max(1, curve.size // (8 * len(algorithms))), max(1, curve.size // 8)),
                        label=r["algorithm"] + ("" if r["covered"] else " (ref)"))
            if math.isfinite(r["measured"]) and r["measured"] > 0:
                ax.plot([r["rounds"]], [r["measured"]], "o", color=c, ms=4)
        bounds: dict[float, list[str]] = {}
        for r in here:
            if math.isfinite(r["bound"]) and r["bound"] > 0:
                bounds.setdefault(round(r["bound"], 12), []).append(r["algorithm"])
        for k, (value, names) in enumerate(bounds.items()):
            which = "" if len(bounds) == 1 else f" ({', '.join(names)})"
            ax.axhline(value, color="k", ls=styles[k % len(styles)], lw=1.0, label=f"bound{which}")
        first = here[0]
        ax.set_title(f"{pattern}: τ_max = {first['tau_max']:.3g}, τ_avg = {first['tau_avg']:.3g}"
                     if math.isfinite(first["tau_max"]) else pattern, fontsize=9)
        ax.set_xlabel("round t")
        _quiet_log_axis(ax)
        ax.grid(True, which="major", alpha=0.3)
    lhs = {r.get("result", {}).get("lhs") for r in rows}
    axes.ravel()[0].set_ylabel("running mean of ‖∇f(x_t)‖² (seed 0)" if lhs <= {None, "(1/T) Σ_{t<T} ‖∇f(x_t)‖²"}
                               else "measured left side (dots) and bound")
    handles = {}
    for ax in axes.ravel():
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    fig.legend(list(handles.values()), list(handles.keys()), loc="outside lower center",
               ncol=min(len(handles), 6), fontsize=8, frameon=False)
    if title:
        fig.suptitle(title, fontsize=9)
    return save_figure(fig, path)


# ---------------------------------------------------------------------------- delays, mc


def plot_delays(series: dict[str, np.ndarray], path, title: str = "") -> Path:
    """τ_t against t, one line per trace, with its τ_avg as a dotted line."""
    fig, axes = figure(1, 1, size=(7.0, 3.8))
    ax = axes.ravel()[0]
    for i, (name, tau) in enumerate(series.items()):
        tau = np.asarray(tau)
        ax.plot(np.arange(tau.size), tau, color=f"C{i}", lw=0.9,
                label=f"{name} (τ_max={tau.max()}, τ_avg={tau.mean():.3g})")
        ax.axhline(tau.mean(), color=f"C{i}", ls=":", lw=0.8)
    ax.set_xlabel("round t")
    ax.set_ylabel("τ_t = max_i (t − a_i,t)")
    ax.legend(fontsize=7, title="dotted: τ_avg", title_fontsize=7)
    if title:
        ax.set_title(title, fontsize=9)
    return save_figure(fig, path)


def plot_mc(cases: Sequence[dict], path) -> Path:
    """Per case, histograms of τ_max and τ_avg over the replicates with the Monte-Carlo mean,
    its confidence interval and the exact value. The paper's bound is usually far to the
    right of every sample; drawing it would shrink the histogram to a sliver, so it is drawn
    only when it lies within twice the samples' range and is otherwise written in the panel."""
    fig, axes = figure(2, len(cases), size=(4.4, 3.2))
    labels = {"tau_max": ("τ_max of one trace", "E[τ_max]"), "tau_avg": ("τ_avg of one trace", "E[τ_avg]")}
    for j, case in enumerate(cases):
        for i, key in enumerate(("tau_max", "tau_avg")):
            ax, est = axes[i, j], case["estimates"][key]
            samples = np.asarray(case["samples"][key], dtype=float)
            integer = key == "tau_max" and np.all(samples == np.round(samples))
            bins = (np.arange(samples.min(), samples.max() + 2) - 0.5 if integer and np.ptp(samples) < 60 else 30)
            ax.hist(samples, bins=bins, color="0.78", edgecolor="0.6", lw=0.4)
            ax.axvspan(est.ci_low, est.ci_high, color="C0", alpha=0.25, label=f"{est.confidence:.0%} CI of the mean")
            ax.axvline(est.mean, color="C0", lw=1.4, label=f"Monte-Carlo mean {est.mean:.4g}")
            exact = case["exact"][key]
            if exact is not None:
                ax.axvline(exact, color="C1", ls="--", lw=1.4, label=f"exact {exact:.4g}")
            bound = case["bound"][key]
            span = max(float(np.ptp(samples)), 1.0)
            if bound is not None and bound <= samples.max() + span:
                ax.axvline(bound, color="C3", ls=":", lw=1.4, label=f"paper bound {bound:.4g}")
            elif bound is not None:
                ax.text(0.98, 0.97, f"paper bound on E[τ_max]: {bound:.4g}\n(off this scale, →)", transform=ax.transAxes,
                        ha="right", va="top", fontsize=7, color="C3")
            ax.set_title(f"{case['name']}: {labels[key][1]}", fontsize=9)
            ax.set_xlabel(labels[key][0])
            ax.set_ylabel("traces")
            ax.legend(fontsize=6, loc="upper left")
    return save_figure(fig, path)


# ---------------------------------------------------------------------------- bound


def bound_report(name: str, bound, inputs: dict) -> str:
    """Value, named terms, prescribed step sizes and conditions of a ``Bound``."""
    value = (f"{bound.value:.6g}" if math.isfinite(bound.value) or bound.log_value is None
             else f"exp({bound.log_value:.6g})")
    lines = [f"{name}: {bound.source}" + (f" [variant {bound.variant}]" if bound.variant else ""),
             "inputs: " + ", ".join(f"{k}={v}" for k, v in inputs.items()),
             f"value: {value}", "terms:"]
    lines += [f"  {k} = {v:.6g}" for k, v in bound.terms.items()]
    if bound.step_sizes:
        lines.append("step sizes: " + ", ".join(f"{k} = {v:.6g}" for k, v in bound.step_sizes.items()))
    lines.append("conditions:" + ("" if bound.conditions else " none"))
    lines += [f"  {c}" for c in bound.conditions]
    lines.append(f"valid: {'yes' if bound.valid else 'NO: ' + '; '.join(c.name for c in bound.violated)}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------- check rows


def check_row(result, pattern: str, theorem: str, curve, algorithm: str | None = None) -> dict:
    """One table row of ``result``; ``algorithm`` labels it (default: the result's algorithm)."""
    covered = result.covered is not False
    violated = [c.name for c in result.violated_conditions]
    label = result.label
    return {"theorem": theorem, "algorithm": algorithm or result.algorithm, "pattern": pattern, "rounds": result.rounds, "tau_max": result.tau_max,
            "tau_avg": result.tau_avg, "measured": result.measured, "lower": result.lower, "upper": result.upper,
            "bound": result.bound_value, "ratio": result.ratio, "verdict": result.verdict, "label": label,
            "expectation": bool(result.expectation),
            "covered": covered, "violated_conditions": violated, "eta_g": result.step_sizes.get("eta_g"),
            "eta_l": result.step_sizes.get("eta_l", result.step_sizes.get("eta", result.step_sizes.get("eta_1"))), "stopped": bool(result.stopped), "curve": curve,
            "plotted_run": {"seed": result.seeds[0] if result.seeds else None,
                            "mean": number(curve[-1]) if curve.size else None},
            "result": result.to_dict()}


def json_row(row: dict) -> dict:
    return {k: (number(v) if isinstance(v, float) else v) for k, v in row.items() if k != "curve"}
