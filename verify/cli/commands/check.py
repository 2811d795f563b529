"""``fedverify check``, the main job: a theorem's measured left side per algorithm and pattern
against its bound (FedSUM Thm 4.1 by default; any theorem ``bound --list`` prints; ``--paper``
runs every theorem of one paper, one table each)."""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from ...choices import (CHECK_ALGORITHMS, CONSTANT_SOURCES, DEFAULT_CLIENTS, MAIN_PRESETS, PAPERS,
                         PROBLEMS, DefaultNames, build_problem, is_trace_file, resolve_patterns, split_names,
                         trace_clients)
from ...check_tables import (CheckSettings, RecordWriter, compute_rows, default_names, noise_free_problem,
                             paper_theorems)
from ..usage import UsageError
from . import add_long_option, announce, arguments, early_checks, require_long, device as _device, load_plugins, parse_setting, show_progress, writable_folder

HELP = "the main job: measured (1/T) Σ‖∇f‖² against a theorem's bound, per algorithm and pattern"

DESCRIPTION = f"""\
Runs each algorithm on the problem under each participation pattern with the step sizes
the theorem prescribes (at the trace's τ_max, τ_avg), and compares the measured
(1/T) Σ_t ‖∇f(x_t)‖² (mean over --seeds noise seeds, one-sided 95% limits) with the bound:
"holds" (upper limit ≤ bound), "violated" (lower limit > bound), else "inconclusive".

Default: {', '.join(CHECK_ALGORITHMS)} under P1, P2, P3 scaled
to N = {DEFAULT_CLIENTS} clients (S = N/5 per round), T = 500 rounds, K = 5 local steps,
5 seeds, FedSUM Theorem 4.1, on the problem 'quadratic'. Problems (nothing is downloaded):
  quadratic           {DEFAULT_CLIENTS} random quadratic clients, dim 10, heterogeneity 1, Gaussian
                      gradient noise std 0.5, seed 0: L, σ², Δ_f, F_0 all exact (the default,
                      so the bound is computed from exact constants)
  logistic-digits     10-class logistic regression on scikit-learn's bundled digits,
                      Dirichlet(0.5) split, mini-batch 16 (σ² exact at x⁰ and x* only)
  logistic-synthetic  logistic regression on a Gaussian mixture, Dirichlet(0.5) split
  cnn-digits          the digits CNN (non-convex): L, σ², f*, Δ_f estimated (about half a
                      minute; --constants problem takes the problem's cheaper estimates at x⁰)

Algorithms (--algorithms): --list-algorithms names every one with its paper, the built-in
ones, a user's own through --plugin and those installed packages declare.

Verdict labels:
  holds*      a hypothesis of the theorem fails at the prescribed step sizes (FedSUM-CR:
              Lemma E.6 needs a smaller η_l than Theorem 4.1 prescribes, a gap in the
              paper's proof); a footnote lists the condition. The theorem is not proved
              for that run, so the verdict compares numbers only.
  ... (ref)   the theorem does not cover the algorithm (FedAvg, SCAFFOLD): it runs at the
              theorem's step sizes (FedSUM-B's) and is compared with the theorem's value,
              for reference, not as a test.
  inconclusive  the confidence interval straddles the bound; with --seeds 1 there is no
              interval at all (one run has no spread), so use --seeds 2 or more.
  outside the class  a noise-free run measured above its certified worst case (below):
              it breaks an assumption of the theorem, so the bound is not tested by it.

Worst case (column "worst"): on a noise-free run (--noise-free; σ² = 0) of a theorem that
verify.worst_case covers (FedSUM's, server momentum Thms 4.1 and 4.6) and an algorithm it
transcribes, the largest left side any problem of the theorem's class gives at the row's step
sizes and trace, a semidefinite programme solved exactly; "slack" = bound / worst. On by default
where a row's programmes are predicted to take under 5 s; --worst-case solves up to
FEDVERIFY_WORST_CASE_SECONDS (default 120 s), --no-worst-case never. A row whose measured side
is above its certified worst case is "outside the class": the run breaks an assumption (a
constant given too small, or another algorithm); a footnote names the constants to look at.
Rows without a worst case say why in a footnote.

Writes check.json, check.csv and check.png (running mean of ‖∇f‖² of seed 0 against the
bound, one panel per pattern; for a left side of one number per run, the seeds' mean with its
limits against the bound per algorithm; with --paper one check-THEOREM.png per theorem) into
--output; each file is written atomically."""

FORMATTER_CLASS = argparse.RawDescriptionHelpFormatter

#: The files ``check`` writes into --output.
OUTPUT_FILES = ("check.json", "check.csv", "check.png")


def _clients(args, patterns) -> int:
    if args.clients:
        return args.clients
    counts = {trace_clients(t) for t in patterns if is_trace_file(t)}
    if len(counts) > 1:
        raise UsageError(f"the trace files have different client counts ({', '.join(map(str, sorted(counts)))}); set --clients")
    return counts.pop() if counts else DEFAULT_CLIENTS


def _names(values, flag: str, what: str) -> list[str]:
    """The names of ``values`` (words or comma-separated); none at all is refused."""
    names = split_names(values)
    if not names:
        shown = " ".join(repr(v) for v in values)[:80]
        raise UsageError(f"{flag} {shown} names no {what}")
    return names


def _algorithms(values) -> list[str]:
    import algorithms

    return list(dict.fromkeys(algorithms.get(name).name for name in _names(values, "--algorithms", "algorithm")))


def _hparams(items) -> dict:
    settings = dict(parse_setting(item) for item in items)
    for name in ("eta_l", "eta_g"):
        if name in settings:
            raise UsageError(f"--set {name}=...: step sizes are options of their own; use --eta-l and --eta-g "
                             "(the rows then run at those step sizes, marked where the theorem prescribes others)")
    return settings


def _steps(args) -> None:
    """``--eta-l`` and ``--eta-g`` come together (a lone one would leave the other to a default)."""
    given = [flag for flag, value in (("--eta-l", args.eta_l), ("--eta-g", args.eta_g)) if value is not None]
    if len(given) == 1:
        raise UsageError(f"{given[0]} needs {'--eta-g' if given[0] == '--eta-l' else '--eta-l'} too: give both step "
                         "sizes, or neither for the theorem's own")


def _curve(result):
    """Running mean (1/t) Σ_{s<t} ‖∇f(x_s)‖² of the first run, when that is the measured quantity; else empty."""
    import numpy as np

    from ...verdicts import AVERAGE_GRAD_NORM2

    if result.lhs != AVERAGE_GRAD_NORM2 or result.first_run is None:
        return np.zeros(0)
    g = np.asarray(result.first_run.grad_norm2, dtype=float)
    return np.cumsum(g) / np.arange(1, g.size + 1)


def _theorem(name: str):
    from ...theorems import get

    try:
        theorem = get(name)
    except ValueError as err:
        raise UsageError(str(err)) from None
    theorem.require_checkable()
    return theorem


def _plan(args) -> list[tuple[object, list[str], list[str]]]:
    """(theorem, algorithm names, pattern names) per table."""
    if args.paper:
        if args.theorem != "fedsum.theorem_4_1":
            raise UsageError("give --paper or --theorem, not both")
        theorems = paper_theorems(args.paper)
    else:
        theorems = [_theorem(args.theorem)]
    tables = []
    for theorem in theorems:
        try:
            default_algorithms, default_patterns = default_names(theorem, MAIN_PRESETS)
        except ValueError as err:
            if isinstance(args.algorithms, DefaultNames):
                raise UsageError(str(err)) from None
            default_algorithms, default_patterns = [], list(theorem.patterns or MAIN_PRESETS)
        names = default_algorithms if isinstance(args.algorithms, DefaultNames) else _algorithms(args.algorithms)
        if isinstance(args.patterns, DefaultNames):
            patterns = default_patterns
        else:
            patterns = _names(args.patterns, "--patterns", "pattern or trace file")
        tables.append((theorem, names, patterns))
    return tables


def _check_inputs(args):
    if not 0.5 <= args.confidence < 1:
        raise UsageError(f"--confidence must lie in [0.5, 1), got {args.confidence}")
    _steps(args)
    if isinstance(args.algorithms, DefaultNames) is False:
        _algorithms(args.algorithms)
    tables = _plan(args)
    device = _device(args.device)
    n_clients = _clients(args, [p for _, _, patterns in tables for p in patterns])
    resolved = [(theorem, names, resolve_patterns(patterns, n_clients)) for theorem, names, patterns in tables]
    return resolved, device, n_clients, Path(args.output), _hparams(args.hparams)


#: Runs of the largest batch the time estimate runs; larger batches are extrapolated along the line
#: through the times of one run and of this many (a batch runs no slower per run than one run).
TIMED_RUNS = 4


def _timed_batch(algorithm, problem, traces, device) -> float:
    """Seconds of one ``run_batch`` of ``traces`` (seeds 0, 1, ...)."""
    import algorithms

    start = time.perf_counter()
    algorithms.run_batch(algorithm, problem, traces, list(range(len(traces))), device=device)
    return time.perf_counter() - start


def _announce_check(tables, problem, args, device, hparams) -> None:
    """Time a short batch of each algorithm, as the check will run it (its seeds × patterns in
    one batch), and say how long the whole check will take when that is long."""
    import algorithms
    from participation import Trace

    from participation.budget import human_seconds

    # bounded: a huge K, T or batch is scaled, not run (the timing must never be the long job)
    short, steps = min(args.rounds, 3), min(args.local_steps, 5)
    per_batch: dict = {}
    seconds = 0.0
    for theorem, names, patterns in tables:
        size = args.seeds * len(patterns)
        traces = [Trace(source.mask[:short]) if isinstance(source, Trace) else source.sample(short, seed=0)
                  for _, source in patterns]
        options = {k: v for k, v in hparams.items() if k not in theorem.options and k not in ("eta_l", "eta_g")}
        for name in names:
            key = (name, size)
            if key not in per_batch:
                try:
                    algorithm = algorithms.get(name, eta_l=1e-3, local_steps=steps, **options)
                except (ValueError, TypeError):
                    per_batch[key] = 0.0
                    continue
                timed = min(size, TIMED_RUNS)
                batch = [traces[j % len(traces)] for j in range(timed)]
                if not per_batch:                              # the first call pays for warming up
                    algorithms.run_batch(algorithm, problem, batch[:1], [0], device=device)
                # a batch's time grows by a fixed cost per run beyond the first: line through 1 and `timed` runs
                one = _timed_batch(algorithm, problem, batch[:1], device)
                many = one if timed == 1 else _timed_batch(algorithm, problem, batch, device)
                per_run = max(many - one, 0.0) / max(timed - 1, 1)
                per_batch[key] = (one + per_run * (size - 1)) / short * args.rounds * args.local_steps / steps
            seconds += per_batch[key]
    runs = sum(len(n) * len(p) for _, n, p in tables) * args.seeds
    require_long(seconds, f"check: {runs} runs of {args.rounds} rounds", args.long)
    if seconds > 30 or args.paper:
        which = f"{len(tables)} theorems of {args.paper}, " if args.paper else ""
        announce(f"check: {which}{runs} runs of {args.rounds} rounds in batches, about {human_seconds(seconds)}")


def add_arguments(parser) -> None:
    """The options of ``check``."""
    parser.add_argument("--list-algorithms", action="store_true",
                        help="print every algorithm name --algorithms takes (with --plugin, the plugin's too) and stop")
    parser.add_argument("--algorithms", nargs="+", default=DefaultNames(CHECK_ALGORITHMS), metavar="NAME",
                        help=f"algorithm names (default: {' '.join(CHECK_ALGORITHMS)} for FedSUM's theorems, else the "
                             "algorithms the theorem covers; all: see above)")
    parser.add_argument("--patterns", nargs="+", default=DefaultNames(MAIN_PRESETS), metavar="PRESET|FILE",
                        help="preset names (scaled to --clients; see delays --list) or trace files (.npz, .csv, .json); "
                             "default: P1 P2 P3 for FedSUM's theorems, else the participation the theorem assumes")
    parser.add_argument("--problem", default="quadratic", help=f"one of {', '.join(PROBLEMS)} (default quadratic)")
    parser.add_argument("--noise-free", action="store_true",
                        help="exact client gradients (σ² = 0): the problem 'quadratic' without its gradient noise, so "
                             "that each row gets its worst case")
    parser.add_argument("--constants", choices=CONSTANT_SOURCES, default="estimate",
                        help="estimate: the problem's exact constants, the others by verify.estimate_constants "
                             "(default); problem: the problem's own constants() as they are")
    parser.add_argument("--clients", "-N", type=arguments.positive(int), default=None,
                        help=f"number of clients N (default: the trace files' N, else {DEFAULT_CLIENTS})")
    parser.add_argument("--rounds", "-T", type=arguments.positive(int), default=500,
                        help="rounds T (default 500; a shorter trace file uses its own length)")
    parser.add_argument("--local-steps", "-K", type=arguments.positive(int), default=5, help="local steps K (default 5)")
    parser.add_argument("--seeds", type=arguments.positive(int), default=5, help="noise seeds per run (default 5)")
    parser.add_argument("--theorem", default="fedsum.theorem_4_1",
                        help="any theorem that `fedverify bound --list` prints (default fedsum.theorem_4_1)")
    parser.add_argument("--paper", choices=PAPERS, default=None,
                        help="check every theorem of one paper, each on its default algorithms and patterns "
                             "(one table each)")
    parser.add_argument("--eta-l", type=arguments.positive(float), default=None, metavar="η_l",
                        help="run every row at this local step size (with --eta-g) instead of the theorem's own; rows "
                             "whose theorem prescribes other step sizes are marked †")
    parser.add_argument("--eta-g", type=arguments.positive(float), default=None, metavar="η_g",
                        help="the global step size that goes with --eta-l")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", dest="hparams",
                        help="an algorithm or theorem option, e.g. --set beta=0.5, --set stages=2,1,0.5 (momentum), "
                             "--set surrogate=last (LOGIT), --set decay=0.75 (CA-Fed); repeatable")
    arguments.add_confidence(parser)
    parser.add_argument("--device", default=None, help="torch device for the runs (default: cpu)")
    parser.add_argument("--output", "-o", type=arguments.path, default="fedverify-check",
                        help="output folder, created (default fedverify-check)")
    arguments.add_plugin(parser)
    add_worst_case(parser)
    add_long_option(parser)
    parser.add_argument("--record", type=arguments.path, default=None, metavar="DIR",
                        help="also write every run as a run record (ALGORITHM_PATTERN_t<trace>_s<seed>.jsonl) into DIR, "
                             "the format `fedverify check-run` reads")
    arguments.add_no_progress(parser)


def add_worst_case(parser) -> None:
    """``--worst-case`` / ``--no-worst-case`` (default: on where a row solves within a few seconds)."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--worst-case", dest="worst_case", action="store_const", const=True, default="auto",
                       help="solve every row's worst case up to FEDVERIFY_WORST_CASE_SECONDS (default: only rows "
                            "predicted under 5 s)")
    group.add_argument("--no-worst-case", dest="worst_case", action="store_const", const=False,
                       help="no worst-case column")


def algorithm_list() -> str:
    """One line per registered algorithm: its name and the first paragraph of its class's
    docstring, on one line and cut to about 100 characters."""
    import algorithms
    from algorithms.registry import algorithm_class

    names = algorithms.names()
    width = max(map(len, names))
    lines = []
    for name in names:
        summary = " ".join((algorithm_class(name).__doc__ or "").strip().split("\n\n")[0].split())
        if len(summary) > 100:
            summary = summary[:99].rstrip() + "…"
        lines.append(f"{name:<{width}}  {summary}".rstrip())
    return "\n".join(lines)


def run(args) -> str:
    early_checks(theorem=None if args.paper else args.theorem, plugins=args.plugin,
                 patterns=[] if isinstance(args.patterns, DefaultNames) else args.patterns)
    writable_folder(args.output, "--output")
    from tqdm.auto import tqdm

    from ...constants import estimate_constants, problem_constants
    from ...report import (ADMISSIBLE_SUFFIX, CSV_FIELDS, check_figure_paths, check_footnotes, check_row, check_table,
                          json_row, plot_checks, write_csv, write_json)

    load_plugins(args.plugin)
    if args.list_algorithms:
        return algorithm_list()
    tables, device, n_clients, output, hparams = _check_inputs(args)
    from participation.budget import require_memory

    # per run: the trace (T × N booleans) and the history (a few float64 per round)
    require_memory(args.rounds * (n_clients + 64), f"check at T={args.rounds}, N={n_clients}: one run's trace and history")
    # per seed: its number and measured value, kept for the confidence limits
    require_memory(args.seeds * 128, f"--seeds {args.seeds}: the seeds' results")
    figures = [p.name for p in check_figure_paths(output / "check.png", [t.name for t, _, _ in tables])]
    writable_folder(output, "--output", [*(n for n in OUTPUT_FILES if not n.endswith(".png")), *figures])
    problem = build_problem(args.problem, n_clients)
    if args.noise_free:
        problem = noise_free_problem(args.problem, problem)
    consts = problem_constants(problem) if args.constants == "problem" else estimate_constants(problem)
    _announce_check(tables, problem, args, device, hparams)
    writer = None
    if args.record is not None:
        writable_folder(args.record, "--record", ())
        writer = RecordWriter(args.record, problem, args.problem, hparams, prefixed=len(tables) > 1)
    settings = CheckSettings(problem, consts, args.rounds, args.local_steps, args.seeds, args.confidence, device,
                             hparams, args.worst_case, args.eta_l, args.eta_g)
    rows, notes, sections, footnotes = [], {}, [], []
    total = sum(len(n) * len(p) for _, n, p in tables) * args.seeds
    bar = tqdm(total=total, unit="run", desc="fedverify check", disable=not show_progress(args), file=sys.stderr)
    with bar:
        bar.set_postfix_str(f"{sum(len(n) * len(p) for _, n, p in tables)} rows in batches")
        cells, results, admissible = compute_rows(tables, settings, writer.for_row if writer else None)
        bar.update(total)
        if writer is not None:
            writer.finish(cells, results)
        by_theorem: dict = {}
        for (theorem, name, label, _), result in zip(cells, results):
            here = by_theorem.setdefault(theorem.name, [])
            here.append(check_row(result, label, theorem.name, _curve(result)))
            notes.update(dict.fromkeys(n for n in result.notes if n.startswith("one run gives no confidence")))
            if id(result) in admissible:
                more = admissible[id(result)]
                here.append(check_row(more, label, theorem.name, _curve(more), algorithm=name + ADMISSIBLE_SUFFIX))
        for theorem, _, _ in tables:
            here = by_theorem.get(theorem.name, [])
            rows += here
            foot = check_footnotes(here, theorem.name)
            sections.append(f"{theorem.name}: measured {theorem.lhs}\n{check_table(here)}" + "".join(f"\n{n}" for n in foot))
            footnotes += foot
    extra = [f"--seeds {args.seeds}: {n}" for n in notes]
    if consts.estimated:
        extra.append(f"estimated constants ({', '.join(consts.estimated)}): every verdict rests on these estimates, "
                     "not on exact constants")
    extra += [f"{label}: T={n} (the trace file's length)" for label, n in
              dict.fromkeys((r["pattern"], r["rounds"]) for r in rows if r["rounds"] < args.rounds)]
    names = [t.name for t, _, _ in tables]
    which = args.paper if args.paper else names[0]
    header = (f"{which} on {args.problem}{' (noise-free)' if args.noise_free else ''} (N={n_clients}, "
              f"K={args.local_steps}, T={args.rounds}), "
              f"{args.seeds} seeds, {args.confidence:.0%} one-sided limits")
    summary = {"command": "check", "theorem": names[0] if len(names) == 1 else names,
               "problem": {"name": args.problem, "description": PROBLEMS[args.problem], "n_clients": n_clients,
                           "noise_free": bool(args.noise_free), "constants": consts.to_dict()},
               "rounds": args.rounds, "local_steps": args.local_steps, "seeds": args.seeds, "confidence": args.confidence,
               "hparams": {k: list(v) if isinstance(v, tuple) else v for k, v in hparams.items()},
               "footnotes": footnotes + extra, "rows": [json_row(r) for r in rows]}
    files = [write_json(output / "check.json", summary), write_csv(output / "check.csv", rows, CSV_FIELDS),
             *plot_checks(rows, output / "check.png", header)]
    if args.record is not None:
        files.append(f"run records in {Path(args.record)}")
    return "\n".join([header, "\n\n".join(sections), *extra, "wrote " + ", ".join(map(str, files))])
