"""``fedverify mc``: E[τ_max] and E[τ_avg] per preset with confidence intervals and quantiles.

``--workers N`` runs the replicates on the sweep's local process pool
(``verify.sweep.executors.open_executor``): workers deaf to Ctrl-C, stopped at once on an
interrupt, dying with this process however it ends, and never more of them than replicates."""
from __future__ import annotations

from ..usage import UsageError
from . import add_long_option, announce_mc, arguments, check_plot, parse_setting, require_mc_memory, show_progress

HELP = "E[τ_max] and E[τ_avg] per preset: exact, Monte-Carlo with confidence intervals, paper bound"

#: The most replicates --stderr may use, when --max-reps is not given.
MAX_REPS = 1 << 20

#: What a worker runs, imported once by the forkserver (not the sweep's torch).
_WORKER_MODULES = ("participation.expected.montecarlo", "participation.patterns")


def _pattern(name, args):
    """The preset with the command's ``--set`` overrides (a bad name or option: exit 2)."""
    from participation.patterns import preset

    overrides = dict(parse_setting(text) for text in args.set or ())
    try:
        return preset(name, **overrides)
    except ValueError as err:
        raise UsageError(str(err)) from None


def _mc_case(name, args, executor) -> dict:
    from ...jobs import delay_case

    pattern = _pattern(name, args)
    shared = dict(executor=executor, confidence=args.confidence, keep_samples=bool(args.plot),
                  progress=show_progress(args), method=args.method)
    if args.stderr is not None:
        case = delay_case(pattern, args.rounds, seed=args.seed, target_stderr=args.stderr, max_reps=args.max_reps,
                          chunk_size=max(1, 256 // args.workers) if executor else None, **shared)
    else:
        case = delay_case(pattern, args.rounds, args.reps, args.seed,
                          chunk_size=max(1, args.reps // (4 * args.workers)) if executor else None, **shared)
    return {"name": name, "estimates": case.estimates, "exact": case.exact, "bound": case.bound,
            "samples": case.samples, "reps": case.reps,
            "cells_per_second": case.reps * args.rounds * case.n_clients / max(case.seconds, 1e-9),
            "seconds": case.seconds, "method": case.method, "n_clients": case.n_clients}


def _mc_lines(case, args) -> list[str]:
    cell = lambda v: "—" if v is None else f"{v:.4g}"
    quant = lambda e: "  ".join(f"q{q:g}={v:g}" for q, v in e.quantiles.items())
    how = f" (to stderr ≤ {args.stderr:g})" if args.stderr is not None else ""
    lines = [f"{case['name']}: N={case['n_clients']}, T={args.rounds}, {case['reps']} replicates{how}, seed {args.seed}, "
             f"method {case['method']}; {case['seconds']:.2f} s, {case['cells_per_second']:.3g} trace cells/s",
             f"{'':8s} {'exact':>9s} {'paper bound':>11s}  Monte-Carlo mean ± stderr (CI)   quantiles"]
    for key in ("tau_max", "tau_avg"):
        est = case["estimates"][key]
        lines.append(f"{key:8s} {cell(case['exact'][key]):>9s} {cell(case['bound'][key]):>11s}  {est}   {quant(est)}")
    return lines


def add_arguments(parser) -> None:
    """The options of ``mc``."""
    parser.add_argument("presets", nargs="+", metavar="PRESET", help="preset names (see delays --list)")
    parser.add_argument("--rounds", "-T", type=arguments.positive(int), default=2000,
                        help="rounds T of each trace (default 2000)")
    parser.add_argument("--reps", type=arguments.positive(int), default=None,
                        help="independent traces (replicates) per preset (default 1000, or as many as --stderr needs)")
    parser.add_argument("--stderr", type=float, default=None, metavar="SE",
                        help="instead of --reps: replicates until both standard errors are ≤ SE (checked after 64, 128, "
                             "256, … replicates, so the answer does not depend on --workers); at most --max-reps")
    parser.add_argument("--max-reps", type=arguments.positive(int), default=None,
                        help=f"with --stderr: the most replicates it may use (default {MAX_REPS})")
    parser.add_argument("--seed", type=arguments.seed, default=0,
                        help="seed of the replicates (default 0); the same seed gives the same numbers for any --workers")
    parser.add_argument("--workers", type=arguments.processes, default=1,
                        help="processes for the replicates (default 1; never more than the replicates)")
    parser.add_argument("--confidence", type=float, default=0.95,
                        help="level of the two-sided Student-t confidence intervals, in (0, 1) (default 0.95)")
    parser.add_argument("--plot", metavar="FILE", type=arguments.path,
                        help="histograms of τ_max and τ_avg with the estimates to FILE (.png, .pdf, .svg)")
    arguments.add_no_progress(parser)
    add_long_option(parser)
    parser.add_argument("--set", action="append", metavar="NAME=VALUE",
                        help="change a preset's setting, e.g. --set n_clients=10000 (repeatable; see "
                             "participation.patterns.preset)")
    parser.add_argument("--method", default="auto",
                        help="how replicates are drawn: auto (default: the cheapest exact method that applies; the "
                             "output names it), trace (whole traces) or one of the samplers of "
                             "participation.expected.monte_carlo's method table (a name it lacks is refused with the "
                             "list)")


def run(args) -> str:
    from ...sweep.executors import open_executor

    if not 0 < args.confidence < 1:
        raise UsageError(f"--confidence must lie in (0, 1), got {args.confidence}")
    check_plot(args.plot)
    if args.stderr is not None:
        if args.reps is not None:
            raise UsageError("give --reps or --stderr, not both")
        if not 0 < args.stderr < float("inf"):
            raise UsageError(f"--stderr must be a positive number, got {args.stderr}")
        args.max_reps = MAX_REPS if args.max_reps is None else args.max_reps
    else:
        if args.max_reps is not None:
            raise UsageError("--max-reps bounds the replicates of --stderr: give it with --stderr")
        if args.reps is None:
            args.reps = 1000
    from participation.expected.montecarlo import METHODS

    if args.method not in METHODS:
        raise UsageError(f"--method {args.method!r} is not one of {', '.join(METHODS)}")
    require_mc_memory(args.reps if args.reps is not None else args.max_reps)
    patterns = {name: _pattern(name, args) for name in args.presets}    # unknown names fail before any work
    for name, pattern in patterns.items():
        if args.reps is not None:
            announce_mc(name, pattern, args.rounds, args.reps, args.workers, args.method, long=args.long)
        else:
            announce_mc(name, pattern, args.rounds, args.max_reps, args.workers, args.method, stderr=args.stderr,
                        long=args.long)
    args.workers = min(args.workers, args.reps if args.reps is not None else args.max_reps)   # no idle workers
    with open_executor(processes=args.workers, preload=_WORKER_MODULES) as executor:
        cases = [_mc_case(name, args, executor) for name in args.presets]
    lines = [line for case in cases for line in _mc_lines(case, args)]
    lines.append("paper bound: FedSUM App. F on E[τ_max] as stated; it bounds E[τ_avg] too, since τ_avg ≤ τ_max")
    if args.plot:
        from ...report import plot_mc

        lines.append(f"plot: {plot_mc(cases, args.plot)}")
    return "\n".join(lines)
