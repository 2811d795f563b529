"""Tables, plots and files for the ``fedverify`` command.

Every file is written atomically (a temporary file in the same folder, then
``os.replace``), so a reader never sees half a file. Plots use matplotlib's Agg canvas
directly: importing this module never changes the global backend.
"""
from __future__ import annotations

import csv
import json
import math
import re
import textwrap
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from participation.files import atomic_write as write_atomically


def atomic_write(path, write, *, binary: bool = False) -> Path:
    """``participation.files.atomic_write``, under the name the studies and the sweep write through."""
    return write_atomically(path, write, binary=binary)


__all__ = ["atomic_write", "write_json", "write_csv", "plot_format", "save_figure", "figure", "number",
           "check_table", "check_footnotes", "check_figure", "check_figure_paths", "plot_check", "plot_checks",
           "plot_delays", "plot_mc", "histogram_bins", "bound_report", "worst_case_fields", "worst_case_notes",
           "CSV_FIELDS", "WORST_CASE_FIELDS"]

#: The worst-case columns of a check row (see ``verify.verdicts.WorstCaseColumn``): the value, its
#: label, the solver's status, name and accuracy, the class, slack = bound / worst case, benignness =
#: worst case / measured, and the reason where there is no value.
WORST_CASE_FIELDS = ("worst_case", "worst_case_label", "worst_case_status", "worst_case_solver", "worst_case_accuracy",
                     "worst_case_class", "slack", "benignness", "worst_case_reason")

#: Columns of the check CSV (and the flat part of each JSON row).
CSV_FIELDS = ("theorem", "algorithm", "pattern", "rounds", "tau_max", "tau_avg", "measured", "lower", "upper", "bound", "ratio",
              "verdict", "label", "covered", "violated_conditions", "eta_g", "eta_l") + WORST_CASE_FIELDS


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
    worst = any(r.get("worst_case") is not None for r in rows)
    head = (f"{'algorithm':{wa}s} {'pattern':10s} {tmax:>{len(tmax)}s} {tavg:>{len(tavg)}s} {'measured':>10s} "
            + (f"{'worst':>10s} " if worst else "") + f"{'bound':>10s} {'ratio':>7s}"
            + (f" {'slack':>7s}" if worst else "") + "  verdict")
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['algorithm']:{wa}s} {r['pattern']:10s} {_fmt(r['tau_max'], len(tmax), 3)} "
                     f"{_fmt(r['tau_avg'], len(tavg), 4)} {_fmt(r['measured'], 10)} "
                     + (f"{_fmt(_or_nan(r.get('worst_case')), 10)} " if worst else "") + f"{_fmt(r['bound'], 10)} "
                     f"{_fmt(r['ratio'], 7, 3)}" + (f" {_fmt(_or_nan(r.get('slack')), 7, 3)}" if worst else "")
                     + f"  {r['label']}")
    return "\n".join(lines)


def _or_nan(value) -> float:
    return math.nan if value is None else float(value)


def worst_case_fields(result) -> dict:
    """The flat worst-case fields of a check row (:data:`WORST_CASE_FIELDS`), None where the result
    has no worst-case column at all."""
    column = getattr(result, "worst_case", None)
    if column is None:
        return dict.fromkeys(WORST_CASE_FIELDS)
    return {"worst_case": column.value, "worst_case_label": column.label or None, "worst_case_status": column.status,
            "worst_case_solver": column.solver, "worst_case_accuracy": column.accuracy,
            "worst_case_class": column.function_class, "slack": column.slack, "benignness": column.benignness,
            "worst_case_reason": column.reason}


def worst_case_notes(rows: Sequence[dict]) -> list[str]:
    """What the worst-case column of ``rows`` means (the class, the label, slack), the reason of every
    row without a value (grouped), and the note of every row outside the class."""
    notes = []
    solved = [r for r in rows if r.get("worst_case") is not None]
    if solved:
        classes = list(dict.fromkeys(r["worst_case_class"] for r in solved))
        labels = list(dict.fromkeys(r["worst_case_label"] for r in solved if r["worst_case_label"]))
        solvers = ", ".join(dict.fromkeys(str(r["worst_case_solver"]) for r in solved))
        over = f"over {classes[0]}" if len(classes) == 1 else "over each row's class (worst_case_class in check.json)"
        benign = [r["benignness"] for r in solved if r.get("benignness") is not None]
        notes.append(f"worst: the largest left side any problem of the theorem's class can give at the row's step "
                     f"sizes and trace ({'; '.join(labels)}), {over}, "
                     f"σ² = 0 (performance estimation, {solvers}); slack = bound / worst"
                     + (f"; worst / measured from {min(benign):.3g} to {max(benign):.3g}" if benign else ""))
    missing: dict[str, list[str]] = {}
    for r in rows:
        if r.get("worst_case") is None and r.get("worst_case_reason"):
            missing.setdefault(r["worst_case_reason"], []).append(f"{r['algorithm']}/{r['pattern']}")
    for reason, which in missing.items():
        where = "every row" if len(which) == len(rows) else ", ".join(which)
        notes.append(f"worst case not computed ({where}): {reason}")
    for r in rows:
        said = [n for n in r.get("result", {}).get("notes", ()) if n.startswith("outside the class:")]
        if said:
            notes.append(f"{r['algorithm']}/{r['pattern']} {said[0]}")
    return notes


def _side_value(value) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    return f"{value:.4g}"


def side_quantities(rows: Sequence[dict]) -> list[str]:
    """The measured side quantities each verdict rests on (σ_g², ε, Γ, diam(W), the bias, E[τ] and
    how it was obtained, ...), one line per row that has any."""
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
    admissible-step rows (adm), then the worst-case column (:func:`worst_case_notes`) and the
    measured side quantities."""
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
    return notes + worst_case_notes(rows) + side_quantities(rows)


#: How ``fedverify check`` names the row of an algorithm run at its lemma's admissible step sizes.
ADMISSIBLE_SUFFIX = ":adm"


def _quiet_log_axis(ax) -> None:
    """Log y axis labelled in plain numbers at 1, 2, 5 × 10^k (at 10^k alone when it spans more
    than three decades); other ticks unlabelled."""
    from matplotlib.ticker import FormatStrFormatter, LogLocator, NullFormatter

    ax.set_yscale("log")
    low, high = ax.get_ylim()
    subs = (1.0,) if high > 1e3 * low else (1.0, 2.0, 5.0)
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=subs))
    ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
    ax.yaxis.set_minor_formatter(NullFormatter())


#: The most panels in one row of a check figure, and the size of one panel in inches: four
#: columns make a figure 17.6 inches (2,112 pixels at ``save_figure``'s 120 dpi) wide.
CHECK_COLUMNS = 4
CHECK_PANEL = (4.4, 3.4)


def _is_curve(row: dict) -> bool:
    """Whether ``row`` has a per-round curve of the running mean of ‖∇f(x_t)‖² to draw."""
    from .verdicts import AVERAGE_GRAD_NORM2

    curve = row.get("curve")
    return (curve is not None and np.asarray(curve).size > 0
            and row.get("result", {}).get("lhs", AVERAGE_GRAD_NORM2) == AVERAGE_GRAD_NORM2)


def _positive(value) -> bool:
    return value is not None and math.isfinite(value) and value > 0


def _limits(row: dict) -> tuple[float, float]:
    """The measured mean's (lower, upper) confidence limits; NaN where the row has none."""
    return float(row.get("lower", math.nan)), float(row.get("upper", math.nan))


def _bar(mean: float, low: float, high: float):
    """``errorbar``'s yerr for the limits (low, high) around ``mean``; None (no bar) unless both
    are finite."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return None
    return [[max(mean - low, 0.0)], [max(high - mean, 0.0)]]


def _confidence(rows: Sequence[dict]) -> str:
    """'95% one-sided limits' from the rows' confidence level, or 'one-sided confidence limits'
    when they give none or several."""
    levels = {r.get("result", {}).get("confidence") for r in rows} - {None}
    return f"{levels.pop():.0%} one-sided limits" if len(levels) == 1 else "one-sided confidence limits"


def _panel_title(pattern: str, first: dict) -> str:
    return (f"{pattern}: τ_max = {first['tau_max']:.3g}, τ_avg = {first['tau_avg']:.3g}"
            if math.isfinite(first["tau_max"]) else pattern)


def _draw_curves(ax, here: Sequence[dict], algorithms: list[str], limits: str) -> str:
    """A curve panel: the running mean (1/t) Σ_{s<t} ‖∇f(x_s)‖² of seed 0 per algorithm (solid,
    with staggered markers, since curves often coincide), the mean over the seeds at t = T
    with its confidence limits (dot and bar), and the bound (dashed, black; one line per
    distinct value, labelled with the algorithms it is for when they differ). Returns the y
    label."""
    styles = ("--", "-.", ":")
    dots = False
    for r in here:
        c, k = f"C{algorithms.index(r['algorithm']) % 10}", algorithms.index(r["algorithm"])
        curve = np.asarray(r["curve"], dtype=float)
        if curve.size:
            ax.plot(np.arange(1, curve.size + 1), curve, color=c, lw=1.3, alpha=0.9, marker="osD^vx+*"[k % 8],
                    ms=4, markevery=(k * max(1, curve.size // (8 * len(algorithms))), max(1, curve.size // 8)),
                    label=r["algorithm"] + ("" if r["covered"] else " (ref)"))
        if _positive(r["measured"]):
            low, high = _limits(r)
            ax.errorbar([r["rounds"]], [r["measured"]], yerr=_bar(r["measured"], low if low > 0 else math.nan, high),
                        fmt="o", color=c, ms=4, capsize=3, lw=1.0)
            dots = True
    bounds: dict[float, list[str]] = {}
    for r in here:
        if _positive(r["bound"]):
            bounds.setdefault(round(r["bound"], 12), []).append(r["algorithm"])
    for k, (value, names) in enumerate(bounds.items()):
        which = "" if len(bounds) == 1 else f" ({', '.join(names)})"
        ax.axhline(value, color="k", ls=styles[k % len(styles)], lw=1.0, label=f"bound{which}")
    if dots:                                   # the legend's entry for the dots, in no algorithm's colour
        ax.errorbar([], [], yerr=[], fmt="o", color="0.3", ms=4, capsize=3, lw=1.0,
                    label=f"measured at t = T: mean over the seeds ({limits})")
    ax.set_xlabel("round t")
    _quiet_log_axis(ax)
    return "running mean of ‖∇f(x_t)‖² (seed 0)"


def _interval_values(here: Sequence[dict]) -> list[float]:
    """Every finite value an interval panel draws: means, limits, bounds and bound ranges."""
    values = []
    for r in here:
        values += [r["measured"], *_limits(r), r["bound"], *(r.get("result", {}).get("bound_range") or ())]
    return [float(v) for v in values if v is not None and math.isfinite(v)]


def _interval_scale(ax, values: Sequence[float]) -> None:
    """Log y axis; symmetric log when a value is zero or negative (linear up to the power of ten
    at or above the smallest nonzero magnitude), with the zero line drawn. Ticks at powers of ten
    in plain numbers."""
    from matplotlib.ticker import FormatStrFormatter

    if all(v > 0 for v in values):
        if values:                             # margins in log10, kept inside the float range
            low, high = math.log10(min(values)), math.log10(max(values))
            pad = max(0.12 * (high - low), 0.05)
            ax.set_ylim(10.0 ** max(low - pad, -307.0), 10.0 ** min(high + pad, 307.0))
        _quiet_log_axis(ax)
        return
    magnitudes = [abs(v) for v in values if v != 0]
    linthresh = 10.0 ** math.ceil(math.log10(min(magnitudes))) if magnitudes else 1.0
    ax.set_yscale("symlog", linthresh=linthresh)
    ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
    ax.axhline(0.0, color="0.6", lw=0.6)
    ax.autoscale_view()                        # margins in the symmetric-log scale, not the linear one


def _draw_intervals(ax, here: Sequence[dict], limits: str) -> str:
    """An interval panel, for a left side that is one number per run: per algorithm (x axis) the
    mean over the seeds with its confidence limits (dot and bar), its bound (black segment, the
    value written above), the bound's range when it is uncertain (grey span) and a red cross
    where the verdict is "violated"; under each name its verdict label. Returns the y label:
    the left side the theorem bounds."""
    for i, r in enumerate(here):
        low, high = _limits(r)
        if math.isfinite(r["measured"]):
            ax.errorbar([i], [r["measured"]], yerr=_bar(r["measured"], low, high), fmt="o", color="0.2", ms=5,
                        capsize=4, lw=1.2, label=f"measured: mean over the seeds ({limits})")
            if r.get("verdict") == "violated":
                ax.plot([i], [r["measured"]], "x", color="red", ms=11, mew=2.2,
                        label="violated: lower limit above the bound")
        span = r.get("result", {}).get("bound_range")
        if span and all(math.isfinite(v) for v in span):
            ax.fill_between([i - 0.3, i + 0.3], span[0], span[1], color="0.5", alpha=0.3, lw=0,
                            label="range of the bound (its estimate's uncertainty)")
        if math.isfinite(r["bound"]):
            ax.hlines(r["bound"], i - 0.3, i + 0.3, colors="k", lw=2.0, label="bound")
            ax.annotate(f"{r['bound']:.3g}", (i, r["bound"]), xytext=(0, 2), textcoords="offset points",
                        ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(here)), [f"{r['algorithm']}\n{r.get('label', '')}" for r in here], fontsize=8)
    ax.set_xlim(-0.6, len(here) - 0.4)
    ax.margins(y=0.12)                         # room for the value written above the highest bound
    _interval_scale(ax, _interval_values(here))
    return here[0].get("result", {}).get("lhs") or "measured left side"


def _wrapped(text: str, width: int = 28) -> str:
    return "\n".join(textwrap.wrap(text, width, break_on_hyphens=False)) or text


def check_figure(rows: Sequence[dict], title: str = ""):
    """The figure of :func:`plot_check`, not saved: one panel per (theorem, pattern), at most
    :data:`CHECK_COLUMNS` to a row. A panel whose rows each have a curve of the running mean of
    ‖∇f(x_t)‖² draws the curves (:func:`_draw_curves`); any other, whose left side is one number
    per run, draws intervals per algorithm (:func:`_draw_intervals`). Every panel whose y label
    differs from its left neighbour's (the first column always) is labelled; one legend for
    the figure, below the panels."""
    several = len({r.get("theorem") for r in rows}) > 1
    panel = (lambda r: f"{r['theorem']}, {r['pattern']}") if several else (lambda r: r["pattern"])
    patterns = list(dict.fromkeys(panel(r) for r in rows))
    algorithms = list(dict.fromkeys(r["algorithm"] for r in rows if _is_curve(r)))     # those with a colour
    columns = max(1, min(CHECK_COLUMNS, len(patterns)))
    fig, axes = figure(-(-len(patterns) // columns), columns, size=CHECK_PANEL)
    limits = _confidence(rows)
    previous = None
    for j, (ax, pattern) in enumerate(zip(axes.ravel(), patterns)):
        here = [r for r in rows if panel(r) == pattern]
        label = (_draw_curves(ax, here, algorithms, limits) if all(_is_curve(r) for r in here)
                 else _draw_intervals(ax, here, limits))
        if j % columns == 0 or label != previous:
            ax.set_ylabel(_wrapped(label), fontsize=8)
        previous = label
        ax.set_title(_panel_title(pattern, here[0]), fontsize=9)
        ax.grid(True, which="major", alpha=0.3)
    for ax in axes.ravel()[len(patterns):]:
        ax.remove()
    handles = {}
    for ax in fig.axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    fig.legend(list(handles.values()), list(handles.keys()), loc="outside lower center",
               ncol=max(1, min(len(handles), columns)), fontsize=8, frameon=False)
    if title:                                  # wrapped to the figure's width, about 60 characters a panel
        fig.suptitle("\n".join(_wrapped(line, 60 * columns) for line in title.splitlines()), fontsize=9)
    return fig


def plot_check(rows: Sequence[dict], path, title: str = "") -> Path:
    """Save :func:`check_figure` of ``rows`` to ``path``."""
    return save_figure(check_figure(rows, title), path)


def check_figure_paths(path, theorems: Sequence[str]) -> list[Path]:
    """Where :func:`plot_checks` writes the figures of ``theorems``: ``path`` itself for one
    theorem, else ``<stem>-<theorem><suffix>`` beside it per theorem (in the theorem's name,
    every run of characters other than letters, digits, '.', '_' and '-' becomes '_')."""
    path, names = Path(path), list(dict.fromkeys(theorems))
    if len(names) <= 1:
        return [path]
    return [path.with_name(f"{path.stem}-{re.sub(r'[^A-Za-z0-9._-]+', '_', name).strip('.')}{path.suffix}")
            for name in names]


def plot_checks(rows: Sequence[dict], path, title: str = "") -> list[Path]:
    """One check figure per theorem of ``rows`` (:func:`check_figure_paths` names the files), the
    theorem named under ``title`` when there are several; the paths written."""
    theorems = list(dict.fromkeys(r.get("theorem") for r in rows))
    if len(theorems) <= 1:
        return [plot_check(rows, path, title)]
    return [plot_check([r for r in rows if r.get("theorem") == theorem], target,
                       f"{title}\n{theorem}" if title else str(theorem))
            for theorem, target in zip(theorems, check_figure_paths(path, [str(t) for t in theorems]))]


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


def histogram_bins(samples, integer: bool, most: int = 60):
    """Bin edges for a histogram of ``samples``: for integer values, bins of a whole number of
    values each (one per value up to ``most`` values, else ⌈range/most⌉), edges halfway between
    integers, so that no bin holds more integers than its neighbours; otherwise 30 equal bins."""
    samples = np.asarray(samples, dtype=float)
    if not (integer and samples.size and np.all(samples == np.round(samples))):
        return 30
    width = max(1, int(math.ceil((np.ptp(samples) + 1) / most)))
    return np.arange(samples.min(), samples.max() + width + 1, width) - 0.5


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
            bins = histogram_bins(samples, integer=key == "tau_max")
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
            **worst_case_fields(result), "result": result.to_dict()}


def json_row(row: dict) -> dict:
    return {k: (number(v) if isinstance(v, float) else v) for k, v in row.items() if k != "curve"}
