"""``fedverify delays``: E[τ_avg], E[τ_max] per preset (exact, Monte-Carlo, the paper's
bound), or the metrics of a trace file."""
from __future__ import annotations

from pathlib import Path

from ...choices import MAIN_PRESETS, REFERENCE_PRESETS, DefaultNames
from ..usage import UsageError
from . import (add_long_option, announce, announce_mc, arguments, check_plot, require_long, require_trace_memory,
               show_progress, trace_or_presets)

HELP = "E[τ_avg], E[τ_max]: exact, Monte-Carlo and the paper's bound, per preset; or the metrics of a trace file"

#: Rounds T of the presets' traces and their Monte-Carlo replicates, when not given.
DEFAULT_ROUNDS, DEFAULT_REPS = 2000, 200

#: Bytes the report on a trace holds at its peak, a cell, the trace included (measured: 6.6 at most,
#: on 2^24-cell traces of several shapes): the never-available columns, the copy of the others, the
#: packed copies of the delay kernel and the drivers' exclusion curves.
REPORT_BYTES = 7
#: Seconds the report on a trace takes, a cell (measured: 1.2e-7 to 2.4e-7 on a busy two-core machine).
REPORT_SECONDS = 2.5e-7

def _trace(args):
    """The trace of --trace: a shipped data set, an event log cut into rounds, or a trace file."""
    from participation import Trace
    from participation.datasets import DATASETS

    rule = {"rule": args.rule, "fraction": args.fraction}
    if args.fraction is not None and args.rule != "fraction":
        raise UsageError(f"--fraction needs --rule fraction, got --rule {args.rule}")
    if args.clients is not None and (args.trace in DATASETS or args.round_seconds is not None):
        raise UsageError(f"--clients {args.clients}: {args.trace} sets its own clients (one per device of the "
                         "data set or event log); --clients is for a bare list of active-id lists")
    if args.trace in DATASETS:
        from participation import datasets

        seconds = args.round_seconds or 600.0
        trace = getattr(datasets, args.trace)(round_seconds=seconds, **rule)
        return trace, f"{args.trace} ({seconds:g} s rounds, rule {args.rule})"
    if args.round_seconds is not None:
        from participation.events import load_events

        log = load_events(args.trace)
        return log.to_trace(args.round_seconds, **rule), f"{Path(args.trace).name} ({args.round_seconds:g} s rounds, rule {args.rule})"
    if Path(args.trace).suffix.lower() == ".jsonl":        # a run record: its replied sets S_t
        from ...records import load_record

        record = load_record(args.trace)
        return record.trace, f"{Path(args.trace).name} (run record: the replied sets S_t)"
    if Path(args.trace).suffix.lower() == ".json" and _looks_like_events(args.trace):
        raise UsageError(f"{Path(args.trace).name} is an availability event log: give --round-seconds to cut it into rounds")
    return Trace.load(args.trace, n_clients=args.clients), Path(args.trace).name


def _looks_like_events(path) -> bool:
    """Whether a .json file starts like an event log rather than a trace."""
    try:
        with open(path, encoding="utf-8") as f:
            head = f.read(4096)
    except (OSError, UnicodeDecodeError):
        return False
    return any(key in head for key in ('"devices"', '"messages"', '"inactive"'))


def first_rounds(trace, rounds, label: str):
    """(``trace`` cut to its first ``rounds`` rounds, its label saying so); ``rounds`` None: the
    whole trace. More rounds than the trace holds is a one-line error."""
    from participation import Trace

    if rounds is None or rounds == trace.n_rounds:
        return trace, label
    if rounds > trace.n_rounds:
        raise UsageError(f"--rounds {rounds}: {label} holds only {trace.n_rounds} rounds (give at most "
                         f"{trace.n_rounds}, or leave --rounds out for the whole trace)")
    return Trace(trace.mask[:rounds]), f"{label}, its first {rounds} of {trace.n_rounds} rounds"


def check_report(trace, label: str, long: bool = False) -> None:
    """Before the report on ``trace``: refuse one that cannot fit the memory limit (its need in
    one line) or whose time is above ``LONG_SECONDS`` without ``long``, and say how long it will
    take when that is more than 20 s. Loading a trace costs little even when it declares billions
    of cells (its mask is allocated as zeros); the report reads every cell several times."""
    from participation.budget import human_seconds, require_memory

    cells = trace.n_rounds * trace.n_clients
    size = f"{trace.n_rounds} round{'s' * (trace.n_rounds != 1)} × {trace.n_clients} clients"
    require_memory(REPORT_BYTES * cells, f"the report on {label} ({size})")
    require_long(REPORT_SECONDS * cells, f"the report on {label} ({size})", long)
    if REPORT_SECONDS * cells > 20:
        announce(f"{label}: the report on {size}, about {human_seconds(REPORT_SECONDS * cells)}")


def trace_report(trace, label: str) -> list[str]:
    """A trace's size, availability and delays, with and without its never-available clients."""
    import numpy as np

    from participation import delay_metrics

    mask = trace.mask
    m = delay_metrics(trace)
    never = ~mask.any(axis=0)
    lines = [f"{label}: T={trace.n_rounds} rounds, N={trace.n_clients} clients, {mask.mean():.1%} of cells available, "
             f"mean |S_t| = {mask.sum(axis=1).mean():.3g}",
             f"  all clients: tau_max={m.tau_max}  tau_avg={m.tau_avg:.4f}"]
    if never.any():
        lines[-1] += (f"  ({int(never.sum())} never available: τ_t = t + 1 for them, so τ_max = T and τ_avg = "
                      "(T + 1)/2; they grow with T without bound)")
        if not never.all():
            seen = delay_metrics(mask[:, ~never])
            lines.append(f"  without the {int(never.sum())} never-available clients: tau_max={seen.tau_max}  "
                         f"tau_avg={seen.tau_avg:.4f}")
    if not never.all():
        lines += _drivers(mask[:, ~never], np.flatnonzero(~never))
    return lines


def _drivers(mask, ids) -> list[str]:
    """Who sets the delays, and the delays after excluding the worst clients
    (participation.drivers), over the clients that appear at least once."""
    import numpy as np

    from participation.drivers import delay_drivers, exclusion_curve

    drivers = delay_drivers(mask)
    n = mask.shape[1]
    top = np.argsort(-drivers.tau_share, kind="stable")[:5]
    lines = ["  what drives the delays (clients seen at least once; ids are columns of the trace):",
             ("    tau_max set by client " + ", ".join(str(int(ids[c])) for c in dict.fromkeys(drivers.setters.tolist()))
              if drivers.setters.size else "    tau_max is 0: no client sets it"),
             "    largest shares of sum_t tau_t: " + ", ".join(
                 f"{int(ids[c])} {drivers.tau_share[c]:.1%} (available {drivers.availability[c]:.1%})" for c in top)]
    ks = sorted({k for k in (1, 5, 10, n // 10, n // 4) if 0 < k < n})
    if not ks:          # one client: there is no one to exclude
        return lines + ["    excluding clients: one client only, none to exclude"]
    for name, order in (("least available", None),
                        ("longest absence", np.argsort(-drivers.longest_absence, kind="stable"))):
        curve = exclusion_curve(mask, ks, order=order)
        lines.append(f"    excluding the k {name} first: " + ", ".join(
            f"k={k}: {tm}/{ta:.0f}" for k, tm, ta in zip(curve.ks, curve.tau_max, curve.tau_avg))
            + " (tau_max/tau_avg)")
    return lines


def _exact_or_dash(function, pattern, rounds) -> str:
    from ...jobs import exact_or_none

    value = exact_or_none(function, pattern, rounds)
    return "—" if value is None else f"{value:.3f}"


def add_arguments(parser) -> None:
    """The options of ``delays``."""
    parser.add_argument("presets", nargs="*", default=DefaultNames(MAIN_PRESETS),
                        help=f"preset names (default: {' '.join(MAIN_PRESETS)}); 'reference' for FedSUM's table; "
                             "see --list")
    parser.add_argument("--trace", metavar="FILE|DATASET", type=arguments.path,
                        help="instead of presets: a saved trace (.npz, .csv, .json; formats in participation.trace), "
                             "a run record (.jsonl: its replied sets S_t), "
                             "an availability event log (JSON: fedverify's, FLASH's or FedScale-style; needs "
                             "--round-seconds) or a shipped real data set (mobiperf)")
    parser.add_argument("--round-seconds", type=arguments.positive(float), metavar="S",
                        help="cut an event log or data set into rounds of S seconds (data sets: default 600)")
    parser.add_argument("--rule", choices=("start", "whole", "fraction"), default="whole",
                        help="a client takes part in a round when available at its start, for the whole round "
                             "(default) or for --fraction of it")
    parser.add_argument("--fraction", type=arguments.positive(float),
                        help="with --rule fraction: the share of the round, in (0, 1]")
    parser.add_argument("--clients", "-N", type=arguments.positive(int),
                        help="number of clients of --trace: needed for a bare JSON list of active-id lists, "
                             "checked otherwise")
    parser.add_argument("--rounds", "-T", type=arguments.positive(int),
                        help=f"rounds T of the presets' traces (default {DEFAULT_ROUNDS}); with --trace, its first T "
                             "rounds (default: all of them; more than it holds is an error)")
    parser.add_argument("--reps", type=arguments.positive(int),
                        help=f"Monte-Carlo replicates of each preset (default {DEFAULT_REPS}; not with --trace)")
    parser.add_argument("--seed", type=arguments.seed,
                        help="seed of the Monte-Carlo traces and of --plot's trace of each preset (default 0; not "
                             "with --trace)")
    parser.add_argument("--list", action="store_true", help="list the presets and exit")
    parser.add_argument("--plot", metavar="FILE", type=arguments.path,
                        help="plot τ_t of the trace (or of each preset's trace of --seed) to FILE (.png, .pdf, .svg)")
    add_long_option(parser)


def run(args) -> str:
    from participation import delay_metrics
    from participation.expected import exact_tau_avg, exact_tau_max, monte_carlo, paper_tau_max_bound
    from participation.patterns import preset, preset_names

    if args.list:
        given = [flag for flag, value in (("presets", args.presets and not isinstance(args.presets, DefaultNames)),
                                          ("--trace", args.trace), ("--round-seconds", args.round_seconds),
                                          ("--rule", args.rule != "whole"), ("--fraction", args.fraction),
                                          ("--clients", args.clients), ("--rounds", args.rounds), ("--reps", args.reps),
                                          ("--seed", args.seed), ("--plot", args.plot), ("--long", args.long))
                 if value not in (None, False)]
        if given:
            raise UsageError(f"--list prints the presets and stops: it takes no {', '.join(given)}")
        return "\n".join(f"{name:24s} {doc}" for name, doc in preset_names().items())
    trace_or_presets(args)          # --trace and presets exclude each other; a FIFO is refused unopened
    check_plot(args.plot)
    if args.trace:
        unused = [flag for flag, value in (("--reps", args.reps), ("--seed", args.seed)) if value is not None]
        if unused:
            raise UsageError(f"{' and '.join(unused)} appl{'ies' if len(unused) == 1 else 'y'} only to the presets' "
                             f"Monte-Carlo traces; --trace {args.trace} is read, not drawn")
        trace, label = _trace(args)
        trace, label = first_rounds(trace, args.rounds, label)
        check_report(trace, label, args.long)
        lines = trace_report(trace, label)
        if args.plot:
            from ...report import plot_delays

            m = delay_metrics(trace)
            lines.append(f"plot: {plot_delays({label: m.tau}, args.plot, 'τ_t of ' + label)}")
        return "\n".join(lines)
    args.rounds = DEFAULT_ROUNDS if args.rounds is None else args.rounds
    args.reps = DEFAULT_REPS if args.reps is None else args.reps
    args.seed = 0 if args.seed is None else args.seed
    names = list(REFERENCE_PRESETS) if args.presets == ["reference"] else args.presets
    patterns = {name: preset(name) for name in names}
    for name, pattern in patterns.items():
        require_trace_memory(name, args.rounds, pattern.n_clients)
    for name, pattern in patterns.items():
        announce_mc(name, pattern, args.rounds, args.reps, long=args.long)
    lines = [f"T={args.rounds}; Monte-Carlo over {args.reps} traces (seed {args.seed}), mean ± standard error; "
             "bound = the paper's bound on E[τ_max] (FedSUM App. F, Lemmas F.1-F.4) as stated / the tightest step "
             "of its proof. The paper publishes these bounds only, no measured E[τ] values. exact: the closed form "
             "(— where none exists); MC: the Monte-Carlo mean ± standard error.",
             f"{'pattern':24s} {'exact avg':>10s} {'MC E[tau_avg]':>17s} {'exact max':>10s} {'MC E[tau_max]':>17s} "
             f"{'bound':>8s} {'proof':>8s}"]
    for name, pattern in patterns.items():
        mc = monte_carlo(pattern, args.rounds, args.reps, args.seed, progress=show_progress(args))
        try:
            bound = paper_tau_max_bound(pattern, args.rounds)
            stated, tightest = f"{bound.value:8.1f}", f"{min(bound.steps.values()):8.1f}"
        except ValueError:
            stated = tightest = f"{'—':>8s}"
        lines.append(f"{name:24s} {_exact_or_dash(exact_tau_avg, pattern, args.rounds):>10s} "
                     f"{mc.tau_avg.mean:9.3f} ± {_stderr(mc.tau_avg.stderr, 3)} "
                     f"{_exact_or_dash(exact_tau_max, pattern, args.rounds):>10s} "
                     f"{mc.tau_max.mean:9.2f} ± {_stderr(mc.tau_max.stderr, 2)} {stated} {tightest}")
    if args.plot:
        from ...report import plot_delays

        series = {name: delay_metrics(p.sample(args.rounds, seed=args.seed)).tau for name, p in patterns.items()}
        lines.append(f"plot: {plot_delays(series, args.plot, f'τ_t of one trace per preset (seed {args.seed})')}")
    return "\n".join(lines)


def _stderr(value: float, digits: int) -> str:
    """A standard error in a 5-wide column; a dash where one replicate gives none."""
    return f"{'—':>5s}" if value != value else f"{value:5.{digits}f}"
