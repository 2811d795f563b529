"""``fedverify experiment fedsum``: FedSUM Section 5."""
from __future__ import annotations

import math
from pathlib import Path

from ..usage import UsageError
from . import announce, device, load_plugins, progress_line, show_progress, writable_folder

#: The files ``experiment`` writes into --output.
OUTPUT_FILES = ("experiment.json", "experiment.csv", "experiment.png", "tuning.csv")

def run(args) -> str:
    """FedSUM Section 5 on the chosen data set; writes experiment.json/.csv/.png."""
    from algorithms import names
    from participation.patterns import preset_names
    from verify import experiment

    load_plugins(args.plugin)
    algorithms = args.algorithms or list(experiment.ALGORITHMS)
    for name in algorithms:
        if name not in names():
            raise UsageError(f"unknown algorithm {name!r}; choose from {', '.join(names())}")
    for pattern in args.patterns:
        if pattern not in preset_names():
            raise UsageError(f"unknown pattern {pattern!r}; choose from {', '.join(preset_names())}")
    if args.tune and args.tune_pattern not in preset_names():
        raise UsageError(f"unknown pattern {args.tune_pattern!r} (--tune-pattern); choose from {', '.join(preset_names())}")
    dataset = args.dataset.lower()
    batch = args.batch or experiment.DEFAULT_BATCH.get(dataset, 128)
    eta_l = args.eta_l if args.eta_l is not None else (0.05 if dataset == "digits" else 0.01)
    for flag, value in (("--alpha", args.alpha), ("--eta-l", eta_l), ("--eta-g", args.eta_g)):
        if not (value > 0 and math.isfinite(value)):
            raise UsageError(f"{flag} must be > 0 and finite, got {value}")
    device(args.device)
    experiment.check_sizes(args.clients, args.rounds, args.patterns)
    writable_folder(Path(args.output), "--output", OUTPUT_FILES)
    problem = experiment.build_problem(dataset, args.root, args.clients, args.alpha, batch, args.seed,
                                       args.limit, args.device)
    # what a saved run was made from, so that a resumed experiment reads back only its own runs
    key = {"dataset": dataset, "limit": args.limit, "alpha": args.alpha, "batch": batch, "problem": repr(problem),
           "clients_data": experiment.data_digest(problem)}
    runs_folder = Path(args.output) / "runs"
    options = dict(local_steps=args.local_steps, seed=args.seed, device=args.device,
                   local_schedule=None if args.constant_rate else "sqrt", record_every=args.record_every)
    tune_rounds = args.tune_rounds or min(500, args.rounds)
    from ..budget import human_seconds

    tuning = []
    if args.tune:
        todo = sum(experiment.pending_runs(problem, tune_rounds, runs_folder, key, algorithms=("fedavg",),
                                           patterns=(args.tune_pattern,), eta_l=e0, eta_g=eg, **options)
                   for e0, eg in experiment.RATE_GRID)
        seconds = todo and todo * experiment.estimate_seconds(problem, tune_rounds, ("fedavg",), (args.tune_pattern,),
                                                     eta_l=experiment.RATE_GRID[0][0], **options)
        announce(f"experiment: tuning (eta_0, eta_g) on FedAvg under {args.tune_pattern}: {todo} runs of {tune_rounds} "
                 f"rounds to go, about {human_seconds(seconds)}")
        tuning = experiment.tune_rates(problem, tune_rounds, pattern=args.tune_pattern, runs_folder=runs_folder,
                                       problem_key=key, **options)
        progress_line(experiment.tuning_table(tuning))
        eta_l, eta_g = next((r["eta_0"], r["eta_g"]) for r in tuning if r["chosen"])
    else:
        eta_g = args.eta_g
    rates = dict(eta_l=eta_l, eta_g=eta_g)
    runs = len(algorithms) * len(args.patterns)
    todo = experiment.pending_runs(problem, args.rounds, runs_folder, key, algorithms=algorithms,
                                   patterns=args.patterns, **rates, **options)
    per_run = todo and experiment.estimate_seconds(problem, args.rounds, algorithms[:1], args.patterns[:1], **rates,
                                                   **options)
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
    paths = experiment.write(result, args.output)
    head = (f"FedSUM Section 5 on {dataset}: N={args.clients}, Dirichlet({args.alpha}), K={args.local_steps}, "
            f"T={args.rounds}, batch {batch}, eta_l={eta_l:g}"
            f"{' (constant)' if args.constant_rate else '/sqrt(t/10+1)'}, eta_g={eta_g:g}")
    return "\n".join([head, result.table(), "wrote " + ", ".join(str(p) for p in paths)])
