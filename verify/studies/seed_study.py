"""Several seeds of the FedSUM experiment: means, confidence intervals and paired differences.

One seed of :func:`verify.studies.experiment.fedsum_experiment` fixes the Dirichlet split, the
network's initialisation, the participation traces and the mini-batches; every algorithm of
that seed sees the same four. A comparison of two algorithms is therefore *paired*: per seed,
the difference of their losses, and over the n seeds the mean difference with its two-sided
Student-t interval, mean ± t_{1−(1−level)/2, n−1} · s/√n (s the sample standard deviation of
the n differences). A difference whose interval contains 0 is *unresolved*: the seeds do not
tell the two algorithms apart at that round.

The study reads every saved run in ``<folder>/runs`` (as :func:`fedsum_experiment` writes
them), so runs of one setting made by several invocations — some algorithms to 500 rounds,
others to 200 — join one table. The run of an algorithm, a pattern and a seed to a longer
horizon contains the shorter one: the rates, the traces and the mini-batches of round t do
not depend on T, so the recorded points up to the shorter horizon agree, and the study keeps
the longer run after checking that they do.

Besides the loss at given rounds, the study measures what the paper asserts in words
(FedSUM, arXiv:2512.18275, Section 5: the FedSUM family converges "faster and more stably"):

* *late-round variability* over the last ``window`` rounds (the paper's Fig. 8 shows the last
  160 of 2000): at every recorded round, the median across the seeds of the second difference
  |y_{t+} − 2y_t + y_{t−}| of each run's recorded losses, then the median over the rounds,
  scaled to estimate a standard deviation (:func:`verify.studies.report_statistics.late_variability`),
  so that neither the downward trend, nor one round at the window's boundary, nor one seed of
  three moves it;
* *loss at equal communication*: the training loss at a given number of full models sent
  (uplink and downlink, Fig. 1b's axis), read off the recorded points by linear
  interpolation in the models sent.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .experiment import ALGORITHMS, read_saved_run
from ..algorithm_styles import style
from ..report import atomic_write, figure, number, save_figure, write_csv, write_json
from .report_statistics import SECOND_DIFFERENCE_SCALE, comparisons, holm_markdown
from .report_statistics import late_variability as robust_late_variability

#: Keys of a saved run's configuration that differ from seed to seed by construction.
SEED_KEYS = {"setting": ("seed", "rounds"), "problem": ("problem", "clients_data")}
#: Confidence level of every interval.
LEVEL = 0.95
#: Rounds over which late-round variability is measured (FedSUM Fig. 8 shows the last 160).
LATE_WINDOW = 160
#: Recorded points averaged into one reading of the loss (mini-batch noise makes single points jumpy).
READING_WINDOW = 3
CSV_FIELDS = ("algorithm", "pattern", "seed", "round", "loss", "accuracy", "models_sent")


def interval(values, level: float = LEVEL) -> tuple[float, float, int]:
    """(mean, half-width, n) of the two-sided Student-t interval of ``values``; the half-width
    is NaN for fewer than two values (no spread to measure)."""
    from scipy import stats

    values = np.asarray(values, dtype=np.float64)
    n = values.size
    if n == 0:
        return float("nan"), float("nan"), 0
    mean = float(values.mean())
    if n < 2:
        return mean, float("nan"), 1
    half = float(stats.t.ppf(0.5 + level / 2, n - 1) * values.std(ddof=1) / math.sqrt(n))
    return mean, half, n


def verdict(mean: float, half: float, first: str, second: str) -> str:
    """Which of two algorithms has the lower loss, given the interval of first − second."""
    if not math.isfinite(half):
        return "one seed: unresolved"
    if mean + half < 0:
        return f"{first} lower"
    if mean - half > 0:
        return f"{second} lower"
    return "unresolved"


def reading(curve: dict, at_round: int | None = None, metric: str = "loss", window: int = READING_WINDOW):
    """The mean of ``metric`` over the ``window`` recorded points ending at the last recorded
    round ≤ ``at_round`` (the last round when None); None when the run ends before
    ``at_round`` or has nothing recorded there."""
    rounds = curve["rounds"]
    if at_round is not None and (rounds.size == 0 or rounds[-1] < at_round):
        return None
    upto = int(np.searchsorted(rounds, np.inf if at_round is None else at_round, side="right"))
    values = curve[metric]
    if upto == 0 or values.size < upto:
        return None
    return float(np.mean(values[max(0, upto - window):upto]))


def late_variability(curve: dict, window: int = LATE_WINDOW) -> float:
    """Standard deviation (ddof 2: a line has two parameters) of the recorded losses of the
    last ``window`` rounds about their least-squares line: one run's scatter, which a single
    recorded point at the window's boundary can change several-fold (the tables use
    :meth:`SeedStudy.variability`)."""
    rounds, loss = curve["rounds"], curve["loss"]
    keep = rounds > rounds[-1] - window
    if keep.sum() < 3:
        raise ValueError(f"fewer than 3 recorded points in the last {window} rounds")
    x, y = rounds[keep].astype(np.float64), loss[keep]
    slope, intercept = np.polyfit(x, y, 1)
    residual = y - (slope * x + intercept)
    return float(np.sqrt(residual @ residual / (y.size - 2)))


def loss_at_models(curve: dict, models: float):
    """Training loss at ``models`` full models sent, interpolated linearly between the recorded
    points; None when the run never sent that many."""
    sent, loss = curve["communication"], curve["loss"]
    if sent.size == 0 or models > sent[-1] or models < sent[0]:
        return None
    return float(np.interp(models, sent, loss))


@dataclass
class SeedStudy:
    """The runs of one setting: ``runs[(algorithm, pattern)][seed]`` is a curve (rounds, loss,
    accuracy, communication as numpy arrays); ``horizon[(algorithm, pattern, seed)]`` its T."""

    setting: dict
    runs: dict[tuple[str, str], dict[int, dict]] = field(default_factory=dict)
    horizon: dict[tuple[str, str, int], int] = field(default_factory=dict)

    @property
    def algorithms(self) -> list[str]:
        """In the experiment's order (FedSUM Fig. 1's), others by name after them."""
        names = set(a for a, _ in self.runs)
        return sorted(names, key=lambda a: (ALGORITHMS.index(a) if a in ALGORITHMS else len(ALGORITHMS), a))

    def common_end(self, first: str, second: str, pattern: str) -> int:
        """The last round both algorithms reached under ``pattern`` in every seed."""
        ends = [self.horizon[(a, pattern, s)] for a in (first, second) for s in self.runs.get((a, pattern), {})]
        if not ends:
            raise ValueError(f"no runs of {first} or {second} under {pattern}")
        return min(ends)

    @property
    def patterns(self) -> list[str]:
        return sorted({p for _, p in self.runs})

    @property
    def seeds(self) -> list[int]:
        return sorted({s for runs in self.runs.values() for s in runs})

    def values(self, algorithm: str, pattern: str, at_round: int | None = None, metric: str = "loss") -> dict:
        """seed -> the run's reading at ``at_round`` (runs that end before it left out)."""
        out = {}
        for seed, curve in self.runs.get((algorithm, pattern), {}).items():
            value = reading(curve, at_round, metric)
            if value is not None:
                out[seed] = value
        return out

    def summary(self, algorithm: str, pattern: str, at_round: int | None = None, metric: str = "loss"):
        """(mean, half-width, n) over the seeds."""
        return interval(list(self.values(algorithm, pattern, at_round, metric).values()))

    def difference(self, first: str, second: str, pattern: str, at_round: int | None = None) -> dict:
        """The paired difference first − second of the loss at ``at_round`` (default: the last
        round both reached, :meth:`common_end`) over the seeds both have: mean, half-width, n,
        and the verdict."""
        if at_round is None:
            at_round = self.common_end(first, second, pattern)
        a, b = self.values(first, pattern, at_round), self.values(second, pattern, at_round)
        common = sorted(set(a) & set(b))
        mean, half, n = interval([a[s] - b[s] for s in common])
        return {"first": first, "second": second, "pattern": pattern, "round": at_round, "mean": mean,
                "half": half, "n": n, "verdict": verdict(mean, half, first, second) if n else "no common seed"}

    def variability(self, algorithm: str, pattern: str, window: int = LATE_WINDOW) -> tuple[float, int]:
        """(value, n) of the robust late-round variability of the n seeds' runs
        (:func:`verify.studies.report_statistics.late_variability`; NaN and 0 when no run recorded 3
        points in the window)."""
        runs = self.runs.get((algorithm, pattern), {})
        return robust_late_variability([runs[s] for s in sorted(runs)], window)

    def at_models(self, algorithm: str, pattern: str, models: float) -> dict:
        """seed -> loss at ``models`` models sent (seeds whose run never sent that many left out)."""
        out = {}
        for seed, curve in self.runs.get((algorithm, pattern), {}).items():
            value = loss_at_models(curve, models)
            if value is not None:
                out[seed] = value
        return out

    def final_models(self, algorithm: str, pattern: str) -> float:
        """The smallest final number of models sent over the seeds of ``algorithm``: a budget every one
        of its runs reached."""
        runs = self.runs.get((algorithm, pattern), {})
        if not runs:
            raise ValueError(f"no runs of {algorithm} under {pattern}")
        return float(min(c["communication"][-1] for c in runs.values()))

    @classmethod
    def from_result(cls, result) -> "SeedStudy":
        """The one-seed study of an :class:`verify.studies.experiment.ExperimentResult` (its setting's seed
        and rounds); a run that stopped is left out."""
        seed, rounds = int(result.setting.get("seed", 0)), int(result.setting["rounds"])
        study = cls({k: v for k, v in result.setting.items() if k not in SEED_KEYS["setting"]})
        for (algorithm, pattern), curve in result.curves.items():
            if (algorithm, pattern) not in result.stopped:
                study.runs.setdefault((algorithm, pattern), {})[seed] = curve
                study.horizon[(algorithm, pattern, seed)] = rounds
        return study

    def to_dict(self) -> dict:
        return {"setting": self.setting, "runs": [
            {"algorithm": a, "pattern": p, "seed": s, "horizon": self.horizon[(a, p, s)],
             **{k: [number(v) for v in np.asarray(c[k]).tolist()] for k in ("rounds", "loss", "accuracy", "communication")}}
            for (a, p), runs in self.runs.items() for s, c in sorted(runs.items())]}


def _study_key(config: dict) -> str:
    setting = {k: v for k, v in config["setting"].items() if k not in SEED_KEYS["setting"]}
    problem = config["problem"]
    if isinstance(problem, dict):
        problem = {k: v for k, v in problem.items() if k not in SEED_KEYS["problem"]}
    return json.dumps({"setting": setting, "problem": problem}, sort_keys=True)


def collect(folder, *, eta_l: float | None = None, eta_g: float | None = None) -> SeedStudy:
    """The :class:`SeedStudy` of every run saved in ``<folder>/runs`` (or ``folder`` itself when
    it holds the run files) at rates (``eta_l``, ``eta_g``) when given. One setting only: runs
    of several (other than in seed and horizon) are a ValueError naming how many there are. Two
    runs of one algorithm, pattern and seed must agree on their common recorded rounds (the
    longer is kept)."""
    folder = Path(folder)
    runs_folder = folder / "runs" if (folder / "runs").is_dir() else folder
    files = sorted(runs_folder.glob("*.json"))
    groups: dict[str, list] = {}
    for path in files:
        config, curve, stopped = read_saved_run(path)
        setting = config["setting"]
        if (eta_l is not None and setting["eta_l"] != eta_l) or (eta_g is not None and setting["eta_g"] != eta_g):
            continue
        if stopped:
            raise ValueError(f"{path}: the run of {config['algorithm']} under {config['pattern']} stopped ({stopped})")
        groups.setdefault(_study_key(config), []).append((path, config, curve))
    if not groups:
        rates = "" if eta_l is None and eta_g is None else f" at eta_l={eta_l}, eta_g={eta_g}"
        raise ValueError(f"{runs_folder}: no saved experiment runs{rates}")
    if len(groups) > 1:
        raise ValueError(f"{runs_folder}: runs of {len(groups)} different settings; choose one with eta_l and eta_g")
    (key, members), = groups.items()
    study = SeedStudy(json.loads(key)["setting"])
    for path, config, curve in members:
        algorithm, pattern = config["algorithm"], config["pattern"]
        seed, rounds = int(config["setting"]["seed"]), int(config["setting"]["rounds"])
        runs = study.runs.setdefault((algorithm, pattern), {})
        if seed in runs:
            kept, other = (runs[seed], curve) if study.horizon[(algorithm, pattern, seed)] >= rounds else (curve, runs[seed])
            _require_prefix(kept, other, f"{algorithm} under {pattern}, seed {seed} ({path.name})")
            curve = kept
            rounds = max(rounds, study.horizon[(algorithm, pattern, seed)])
        runs[seed] = curve
        study.horizon[(algorithm, pattern, seed)] = rounds
    return study


def _require_prefix(longer: dict, shorter: dict, what: str) -> None:
    """The recorded points of the shorter run (its appended final model aside) equal the longer's."""
    count = shorter["rounds"].size - 1
    for k in ("rounds", "loss", "accuracy", "communication"):
        a, b = longer[k][:count], shorter[k][:count]
        if a.shape != b.shape or not np.array_equal(a, b, equal_nan=True):
            raise ValueError(f"two horizons of {what} disagree on their common rounds ({k})")


# ---------------------------------------------------------------------------- tables


def _cell(mean: float, half: float, n: int, digits: int = 4) -> str:
    if n == 0:
        return "—"
    if not math.isfinite(half):
        return f"{mean:.{digits}f} (n=1)"
    return f"{mean:.{digits}f} ± {half:.{digits}f}"


def _variability_cell(value: float, n: int) -> str:
    return "—" if n == 0 else f"{value:.4f} (n={n})"


def loss_table(study: SeedStudy, pattern: str, at_rounds=()) -> list[str]:
    """Markdown rows: per algorithm, the mean loss ± the interval's half-width at each round of
    ``at_rounds`` and at its end, the late-round variability, and the final test accuracy."""
    heads = [f"loss at round {r}" for r in at_rounds] + ["final loss", "final round", "late variability",
                                                         "final test accuracy"]
    lines = ["| algorithm | " + " | ".join(heads) + " |", "|---|" + "---|" * len(heads)]
    for algorithm in study.algorithms:
        if (algorithm, pattern) not in study.runs:
            continue
        horizons = sorted({study.horizon[(algorithm, pattern, s)] for s in study.runs[(algorithm, pattern)]})
        cells = [_cell(*study.summary(algorithm, pattern, r)) for r in at_rounds]
        cells += [_cell(*study.summary(algorithm, pattern)), "/".join(str(h) for h in horizons),
                  _variability_cell(*study.variability(algorithm, pattern)),
                  _cell(*study.summary(algorithm, pattern, metric="accuracy"), digits=3)]
        lines.append(f"| {algorithm} | " + " | ".join(cells) + " |")
    return lines


def difference_table(study: SeedStudy, pairs, pattern: str, at_rounds) -> list[str]:
    """Markdown rows: per pair, at each of ``at_rounds`` both reached and at the last round both
    reached, the paired difference first − second with its interval and verdict."""
    lines = ["| first − second | round | mean difference ± half-width | seeds | verdict |", "|---|---|---|---|---|"]
    for first, second in pairs:
        if (first, pattern) not in study.runs or (second, pattern) not in study.runs:
            continue
        end = study.common_end(first, second, pattern)
        for at_round in dict.fromkeys(r for r in (*at_rounds, end) if r <= end):
            d = study.difference(first, second, pattern, at_round)
            if d["n"]:
                lines.append(f"| {first} − {second} | {at_round} | {_cell(d['mean'], d['half'], d['n'])} | "
                             f"{d['n']} | {d['verdict']} |")
    return lines


def default_pairs(algorithms) -> list[tuple[str, str]]:
    """FedSUM-CR, then FedSUM, against every other algorithm of ``algorithms`` (each pair once):
    the comparisons the FedSUM paper's claims are about."""
    pairs = []
    for first in [a for a in ("fedsum-cr", "fedsum") if a in algorithms]:
        pairs += [(first, other) for other in algorithms if other != first and (other, first) not in pairs]
    return pairs


def resolution(study: SeedStudy, pairs, at_round: int) -> float:
    """The median half-width of the pairs' intervals at ``at_round`` over every pattern: the size
    below which a paired difference of these seeds is typically unresolved."""
    halves = [study.difference(a, b, p, at_round)["half"] for p in study.patterns for a, b in pairs]
    halves = [h for h in halves if math.isfinite(h)]
    return float(np.median(halves)) if halves else float("nan")


def communication_table(study: SeedStudy, pattern: str, reference: str) -> list[str]:
    """Markdown rows: every algorithm's loss at ``reference``'s final number of models sent
    (mean ± half-width over the seeds that reached it), and its paired difference from
    ``reference`` there."""
    budget = study.final_models(reference, pattern)
    ref = study.at_models(reference, pattern, budget)
    lines = [f"at {budget:.0f} models sent ({reference}'s final budget under {pattern}):", "",
             "| algorithm | loss ± half-width | seeds | − " + reference + " | verdict |", "|---|---|---|---|---|"]
    for algorithm in study.algorithms:
        values = study.at_models(algorithm, pattern, budget)
        if not values:
            continue
        common = sorted(set(values) & set(ref))
        mean, half, n = interval([values[s] - ref[s] for s in common])
        diff, said = ("—", "—") if algorithm == reference else (_cell(mean, half, n), verdict(mean, half, algorithm, reference))
        lines.append(f"| {algorithm} | {_cell(*interval(list(values.values())))} | {len(values)} | {diff} | {said} |")
    return lines


def markdown(study: SeedStudy, *, at_rounds=(), pairs=(), reference: str | None = None) -> str:
    """The study's tables, per pattern: losses, paired differences, equal communication; the
    measured resolution; and Holm's correction over every comparison the tables make
    (:func:`verify.studies.report_statistics.comparisons`), the family whose multiplicity the per-row
    verdicts ignore."""
    lines = [f"seeds {', '.join(str(s) for s in study.seeds)}; intervals are {LEVEL:.0%} Student-t over the seeds; "
             f"a reading is the mean of {READING_WINDOW} recorded points; late variability over the last "
             f"{LATE_WINDOW} rounds: the median over rounds of the median across seeds of the absolute second "
             f"difference of the recorded losses, divided by {SECOND_DIFFERENCE_SCALE:.3f} (a standard deviation for "
             f"independent noise)", ""]
    for pattern in study.patterns:
        lines += [f"**{pattern}**", "", *loss_table(study, pattern, at_rounds), ""]
        if pairs:
            lines += [*difference_table(study, pairs, pattern, at_rounds), ""]
        if reference is not None and (reference, pattern) in study.runs:
            lines += [*communication_table(study, pattern, reference), ""]
    if pairs:
        for at_round in at_rounds:
            lines.append(f"resolution at round {at_round}: paired differences below about "
                         f"{resolution(study, pairs, at_round):.4f} (the median half-width) are unresolved")
    if pairs or reference is not None:
        family = comparisons(study, pairs, at_rounds, reference)
        if family:
            lines += ["", *holm_markdown(family)]
    return "\n".join(lines).rstrip() + "\n"


# ---------------------------------------------------------------------------- figures


def _aligned(curves: list[dict], key: str):
    """(rounds, values) with one row per curve on the union of their recorded rounds; NaN
    where a curve did not reach a round."""
    rounds = np.unique(np.concatenate([c["rounds"] for c in curves]))
    table = np.full((len(curves), rounds.size), np.nan)
    for row, c in enumerate(curves):
        table[row, np.searchsorted(rounds, c["rounds"])] = c[key][:c["rounds"].size]
    return rounds, table


def plot(study: SeedStudy, path, from_round: int | None = None) -> Path:
    """Per pattern (columns): training loss against rounds (top), against models sent (middle),
    and the rounds from ``from_round`` on (bottom; default the last ``LATE_WINDOW`` of the
    longest horizon). Each seed's run is a thin line, the mean over the seeds a thick one where
    every seed reached the round (the intervals are in the tables: with three seeds a band
    would hide the runs)."""
    patterns = study.patterns
    last = max(study.horizon.values())
    start = max(0, last - LATE_WINDOW) if from_round is None else from_round
    fig, axes = figure(3, len(patterns), size=(4.4, 3.0))
    for col, pattern in enumerate(patterns):
        for algorithm in study.algorithms:
            runs = study.runs.get((algorithm, pattern))
            if not runs:
                continue
            curves = [runs[s] for s in sorted(runs)]
            rounds, loss = _aligned(curves, "loss")
            _, sent = _aligned(curves, "communication")
            mean_loss = np.nanmean(loss, axis=0)
            for row, xs in enumerate((rounds, np.nanmean(sent, axis=0), rounds)):
                ax = axes[row, col]
                keep = xs >= start if row == 2 else np.ones(xs.size, dtype=bool)
                if not keep.any():
                    continue
                for k in range(len(curves)):
                    own = (sent[k] if row == 1 else rounds)[keep]
                    ax.plot(own, loss[k][keep], linewidth=1.2 if row == 2 else 0.6, alpha=0.9 if row == 2 else 0.45,
                            **style(algorithm))
                complete = keep & ~np.isnan(loss).any(axis=0)       # the mean only where every seed ran
                if complete.any():
                    ax.plot(xs[complete], mean_loss[complete], linewidth=1.8,
                            label=f"{algorithm} (mean of {len(curves)} seeds)", **style(algorithm))
        axes[0, col].set_title(pattern)
        for row, xlabel in enumerate(("round", "models sent", "round")):
            axes[row, col].set_xlabel(xlabel)
            axes[row, col].set_ylabel("training loss")
        axes[2, col].set_title(f"{pattern}, rounds {start}–{last} (each run that reached them)", fontsize=9)
    handles = {}
    for ax in axes.ravel():
        for h, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, h)
    fig.legend(list(handles.values()), list(handles), loc="outside lower center",
               ncol=min(len(handles), 2 * len(patterns)), fontsize=8, frameon=False)
    return save_figure(fig, path)


def write(study: SeedStudy, folder, *, at_rounds=(), pairs=(), reference: str | None = None) -> list[Path]:
    """seeds.json, seeds.csv, seeds.md and seeds.png in ``folder``, atomically."""
    folder = Path(folder)
    rows = [{"algorithm": a, "pattern": p, "seed": s, "round": int(t), "loss": float(c["loss"][k]),
             "accuracy": float(c["accuracy"][k]) if c["accuracy"].size > k else "",
             "models_sent": float(c["communication"][k])}
            for (a, p), runs in study.runs.items() for s, c in sorted(runs.items()) for k, t in enumerate(c["rounds"])]
    text = markdown(study, at_rounds=at_rounds, pairs=pairs, reference=reference)
    return [write_json(folder / "seeds.json", study.to_dict()), write_csv(folder / "seeds.csv", rows, CSV_FIELDS),
            atomic_write(folder / "seeds.md", lambda f: f.write(text)), plot(study, folder / "seeds.png")]
