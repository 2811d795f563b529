"""Tables, plots and files for the ``fedverify`` command.

Every file is written atomically (a temporary file in the same folder, then
``os.replace``), so a reader never sees half a file. Plots use matplotlib's Agg canvas
directly: importing this module never changes the global backend.
"""
from __future__ import annotations

import csv
import io
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np

__all__ = ["atomic_write", "write_json", "write_csv", "plot_format", "save_figure", "figure", "number",
           "check_table", "check_footnotes", "plot_check", "plot_delays", "plot_mc", "bound_report",
           "CSV_FIELDS"]

#: Columns of the check CSV (and the flat part of each JSON row).
CSV_FIELDS = ("algorithm", "pattern", "rounds", "tau_max", "tau_avg", "measured", "lower", "upper", "bound", "ratio",
              "verdict", "label", "covered", "violated_conditions", "eta_g", "eta_l")


# ---------------------------------------------------------------------------- files


def atomic_write(path, write: Callable[[io.IOBase], None], *, binary: bool = False) -> Path:
    """Call ``write(f)`` on a temporary file beside ``path``, then rename it to ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb" if binary else "w", **({} if binary else {"encoding": "utf-8", "newline": ""})) as f:
            write(f)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


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
    """Save ``fig`` atomically; the format follows the suffix (png, pdf, svg, ...)."""
    fmt = plot_format(path)
    return atomic_write(path, lambda f: fig.savefig(f, format=fmt, dpi=120), binary=True)


# ---------------------------------------------------------------------------- check


def _fmt(value: float, width: int, digits: int = 4) -> str:
    return f"{value:>{width}.{digits}g}" if math.isfinite(value) else f"{str(value):>{width}s}"


def check_table(rows: Sequence[dict]) -> str:
    """One line per (algorithm, pattern): τ_max, τ_avg, measured, bound, ratio, verdict label."""
    head = f"{'algorithm':10s} {'pattern':10s} {'tau_max':>7s} {'tau_avg':>7s} {'measured':>10s} {'bound':>10s} {'ratio':>7s}  verdict"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['algorithm']:10s} {r['pattern']:10s} {_fmt(r['tau_max'], 7, 3)} {_fmt(r['tau_avg'], 7, 4)} "
                     f"{_fmt(r['measured'], 10)} {_fmt(r['bound'], 10)} {_fmt(r['ratio'], 7, 3)}  {r['label']}")
    return "\n".join(lines)


def check_footnotes(rows: Sequence[dict], theorem: str) -> list[str]:
    """The footnotes the labels point to: violated hypotheses (*) and reference rows (ref)."""
    notes = []
    violated: dict[str, dict[str, None]] = {}
    for r in rows:
        for name in r["violated_conditions"]:
            violated.setdefault(r["algorithm"], {})[name] = None
    covered = {r["algorithm"] for r in rows if r["covered"]}
    for algorithm, names in violated.items():
        why = (" (the theorem's own step sizes break a hypothesis of the lemma its proof uses: a gap in the paper's proof)"
               if algorithm in covered else "")
        notes.append(f"* {algorithm}: hypothesis violated at the prescribed step sizes: {'; '.join(names)}{why}. "
                     f"{theorem} is then not proved for this run; the verdict compares the numbers only.")
    reference = list(dict.fromkeys(r["algorithm"] for r in rows if not r["covered"]))
    if reference:
        notes.append(f"(ref) {', '.join(reference)}: not covered by {theorem}; run at the step sizes it prescribes "
                     "(FedSUM-B's) and compared with its value, for reference only.")
    stopped = [f"{r['algorithm']}/{r['pattern']}" for r in rows if r.get("stopped")]
    if stopped:
        notes.append(f"runs stopped (non-finite values): {', '.join(stopped)}")
    return notes


def plot_check(rows: Sequence[dict], path, title: str = "") -> Path:
    """One panel per pattern: running average (1/t) Σ_{s<t} ‖∇f(x_s)‖² of seed 0 for each
    algorithm (solid), its bound (dashed, same colour) and the measured mean over seeds at T (dot)."""
    patterns = list(dict.fromkeys(r["pattern"] for r in rows))
    algorithms = list(dict.fromkeys(r["algorithm"] for r in rows))
    fig, axes = figure(1, len(patterns), size=(4.6, 3.6))
    colours = {a: f"C{i}" for i, a in enumerate(algorithms)}
    for ax, pattern in zip(axes.ravel(), patterns):
        for r in (r for r in rows if r["pattern"] == pattern):
            c = colours[r["algorithm"]]
            curve = np.asarray(r["curve"], dtype=float)
            if curve.size:
                ax.plot(np.arange(1, curve.size + 1), curve, color=c, lw=1.2, label=r["algorithm"])
            if math.isfinite(r["bound"]):
                ax.axhline(r["bound"], color=c, ls="--", lw=0.8, alpha=0.7)
            if math.isfinite(r["measured"]):
                ax.plot([r["rounds"]], [r["measured"]], "o", color=c, ms=4)
        first = next(r for r in rows if r["pattern"] == pattern)
        ax.set_title(f"{pattern}: τ_max={first['tau_max']:.3g}, τ_avg={first['tau_avg']:.3g}", fontsize=9)
        ax.set_xlabel("round t")
        ax.set_yscale("log")
    axes.ravel()[0].set_ylabel("running mean of ‖∇f(x_t)‖²  (dashed: bound)")
    axes.ravel()[0].legend(fontsize=7)
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
    ax.legend(fontsize=7)
    if title:
        ax.set_title(title, fontsize=9)
    return save_figure(fig, path)


def plot_mc(cases: Sequence[dict], path) -> Path:
    """Per case, histograms of τ_max and τ_avg over the replicates with the Monte-Carlo mean,
    its confidence interval, the exact value and the paper's bound (where they exist)."""
    fig, axes = figure(2, len(cases), size=(4.2, 3.0))
    for j, case in enumerate(cases):
        for i, key in enumerate(("tau_max", "tau_avg")):
            ax, est = axes[i, j], case["estimates"][key]
            ax.hist(case["samples"][key], bins=30, color="0.75")
            ax.axvline(est.mean, color="C0", label=f"MC mean {est.mean:.4g}")
            ax.axvspan(est.ci_low, est.ci_high, color="C0", alpha=0.2, label=f"{est.confidence:.0%} CI")
            if case["exact"][key] is not None:
                ax.axvline(case["exact"][key], color="C1", ls="--", label=f"exact {case['exact'][key]:.4g}")
            if case["bound"][key] is not None:
                ax.axvline(case["bound"][key], color="C3", ls=":", label=f"paper bound {case['bound'][key]:.4g}")
            ax.set_title(f"{case['name']}: {key}", fontsize=9)
            ax.legend(fontsize=6)
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
