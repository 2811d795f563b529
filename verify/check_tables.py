"""The tables of ``fedverify check`` as a library: which theorem runs which algorithms under which
patterns, every row's result (its runs in batches), the extra row at admissible step sizes where a
FedSUM algorithm's prescribed ones break its lemma, and the run records a check writes.

The command line (``verify.cli.commands.check``) parses its options into these calls and prints
what they return; ``fedverify bench`` times the same calls.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CheckSettings", "paper_theorems", "default_names", "compute_rows", "needs_admissible_row", "noise_free_problem",
           "averaged_losses", "state_measured_constants", "RecordWriter"]


@dataclass(frozen=True)
class CheckSettings:
    """What every row of a check shares: the problem and its constants, T, K, the seeds, the
    confidence, the device, the options of ``--set``, the worst-case mode and, for rows at the
    user's step sizes, ``eta_l`` and ``eta_g`` (None: the theorem's own)."""

    problem: object
    constants: object
    rounds: int
    local_steps: int
    seeds: int
    confidence: float = 0.95
    device: object = None
    hparams: dict = dataclasses.field(default_factory=dict)
    worst_case: object = "auto"
    eta_l: float | None = None
    eta_g: float | None = None

    @property
    def given(self) -> bool:
        return self.eta_l is not None


def paper_theorems(paper: str) -> list:
    """Every checkable theorem of ``paper`` (``fedsum``, ``momentum``, ...), in the registry's order."""
    from .theorems import THEOREMS

    return [t for name, t in THEOREMS.items() if name.startswith(paper + ".") and t.checkable]


def default_names(theorem, fallback_patterns) -> tuple[list[str], list[str]]:
    """(algorithms, patterns) a theorem runs by default: those it names, else those it covers;
    its own patterns, else ``fallback_patterns``. A theorem that names no algorithm is a ValueError."""
    names = list(theorem.algorithms or theorem.covers or ())
    if not names:
        raise ValueError(f"{theorem.name} names no algorithm to run: give --algorithms")
    return names, list(theorem.patterns or fallback_patterns)


def given_algorithm(name: str, settings: CheckSettings):
    """``name`` at the settings' η_l, η_g with its own options of ``hparams``."""
    import algorithms
    from algorithms.registry import algorithm_class

    own = {f.name for f in dataclasses.fields(algorithm_class(name))}
    options = {k: v for k, v in settings.hparams.items() if k in own and k not in ("eta_l", "eta_g", "local_steps")}
    try:
        return algorithms.get(name, eta_l=settings.eta_l, eta_g=settings.eta_g, local_steps=settings.local_steps,
                              **options)
    except ValueError as err:
        raise ValueError(f"{name} at --eta-l {settings.eta_l:g} --eta-g {settings.eta_g:g}: {err}") from None


def needs_admissible_row(result, theorem) -> bool:
    """A covered FedSUM algorithm whose prescribed step sizes break a hypothesis of its lemma:
    its row tests nothing, so the table gains a row at the largest admissible step sizes."""
    from bounds.fedsum import ALGORITHMS

    return (theorem.delay_bound and result.covered is not False and not result.conditions_hold
            and result.algorithm in ALGORITHMS)


def compute_rows(tables, settings: CheckSettings, recorder=None):
    """The check's results for ``tables`` (theorem, algorithm names, [(label, trace or pattern)]):
    (cells, results, admissible), a cell being (theorem, algorithm name, pattern label, trace or
    pattern), ``admissible`` mapping id(result) to the row at admissible step sizes that the cell
    gains (:func:`needs_admissible_row`). Every run of the table runs in batches
    (``verify.checking.check_many``). ``recorder(theorem, name, label, source)`` gives each row's
    ``on_run`` callback (or None). A row that fails is one ValueError naming it."""
    from participation import Trace

    from .checking import CallError, check_many

    def call(theorem, name, source, **extra):
        rounds = min(settings.rounds, source.n_rounds) if isinstance(source, Trace) else settings.rounds
        if settings.given:
            name = given_algorithm(name, settings)
            extra.setdefault("step_sizes", "given")
        return dict(algorithm=name, problem=settings.problem, trace_or_pattern=source, theorem=theorem,
                    seeds=settings.seeds, rounds=rounds, local_steps=settings.local_steps,
                    constants=settings.constants, confidence=settings.confidence, device=settings.device,
                    hparams=settings.hparams, worst_case=settings.worst_case, **extra)

    def checked(calls, labels, what=""):
        try:
            return check_many(calls)
        except CallError as err:
            theorem, name, label = labels[err.index]
            raise ValueError(f"{theorem.name}, {name} on {label}{what}: {err}") from None

    cells = [(theorem, name, label, source) for theorem, names, patterns in tables
             for name in names for label, source in patterns]
    results = checked([call(theorem, name, source, on_run=recorder(theorem, name, label, source) if recorder else None)
                       for theorem, name, label, source in cells], [(t, n, lab) for t, n, lab, _ in cells])
    wanted = [(cell, result) for cell, result in zip(cells, results)
              if not settings.given and needs_admissible_row(result, cell[0])]
    at_admissible = checked([call(theorem, name, source, step_sizes="admissible")
                             for (theorem, name, _, source), _ in wanted],
                            [(t, n, lab) for (t, n, lab, _), _ in wanted], " at admissible step sizes")
    return cells, results, {id(result): more for (_, result), more in zip(wanted, at_admissible)}


def noise_free_problem(name: str, problem):
    """``problem`` with exact client gradients (σ² = 0): the quadratic's Gaussian noise set to
    zero; a problem whose noise is its mini-batches is a ValueError."""
    if not hasattr(problem, "noise_std"):
        raise ValueError(f"--noise-free: the problem {name!r} samples mini-batches and has no noise-free form; "
                         "use --problem quadratic")
    problem.noise_std = 0.0
    return problem


def averaged_losses(problem, history):
    """F_k (k = 1..N) at the run's step-weighted average iterate (CA-Fed §III-B), in float64, or
    None where the run has no average or the problem no per-client losses."""
    if history.averaged_params is None or not hasattr(problem, "client_losses"):
        return None
    import torch

    reference = problem.to("cpu", torch.float64)
    try:
        return reference.client_losses(torch.as_tensor(history.averaged_params, dtype=torch.float64)).numpy()
    except (ValueError, NotImplementedError):
        return None


def state_measured_constants(paths, theorem, result, problem) -> None:
    """Write into each record of a row what the theorem's plan measured on the problem
    (``theorem.records.measured``: CA-Fed's F*, F_B* at the record's own weights, ε_bias, Γ, Γ',
    μ, diam(W) and its step-size exponent), so that ``check-run`` judges the records alone."""
    from .records import amend_header, load_record

    records = [load_record(p) for p in paths]
    for path, (constants, hparams) in zip(paths, theorem.records.measured(result, problem, records)):
        amend_header(path, constants=constants, hparams=hparams)


class RecordWriter:
    """The run records of a check (``--record DIR``): every run of every row as
    ``[THEOREM_]ALGORITHM_PATTERN_t<trace>_s<seed>.jsonl`` in ``folder``, with the problem's
    constants and the row's options; :meth:`for_row` gives a row's ``on_run`` callback and
    :meth:`finish` states each CA-Fed row's measured constants in its records."""

    def __init__(self, folder, problem, problem_name: str, hparams: dict, prefixed: bool):
        pc = problem.constants()
        exact = {"L", "sigma2", "delta_f", "F0"} <= set(pc.exact)
        self.folder, self.problem, self.hparams, self.prefixed = Path(folder), problem, hparams, prefixed
        self.problem_name = problem_name
        self.constants = {"L": pc.L, "sigma2": pc.sigma2, "delta_f": pc.delta_f, "F0": pc.F0,
                          "source": f"fedverify problem {problem_name}: " + ("exact" if exact else "the problem's own")}
        self.written: dict = {}

    def for_row(self, theorem, algorithm_label, pattern_label, source):
        from .records import algorithm_fields, availability_of, record_from_history

        prefix = f"{theorem.name}_" if self.prefixed else ""
        options = {k: v for k, v in self.hparams.items() if k in theorem.options}
        count: dict = {}
        paths = self.written.setdefault((theorem.name, algorithm_label, pattern_label), [])

        def write(history, trace, algorithm, seed):
            j = count.setdefault(seed, 0)
            count[seed] += 1
            name = f"{prefix}{algorithm_label}_{pattern_label}_t{j}_s{seed}.jsonl".replace("/", "-")
            steps = {k: v for k, v in algorithm.hparams.items() if k.startswith("eta") and isinstance(v, (int, float))}
            fields = algorithm_fields(algorithm)
            fields["hparams"] = {**(fields["hparams"] or {}), **options} or None
            paths.append(record_from_history(
                self.folder / name, history, trace, algorithm=algorithm.name, local_steps=algorithm.local_steps,
                step_sizes=steps, seed=int(seed), constants=self.constants, problem=self.problem_name,
                availability=availability_of(source), averaged_losses=averaged_losses(self.problem, history),
                **fields))
        return write

    def finish(self, cells, results) -> None:
        for (theorem, name, label, _), result in zip(cells, results):
            if theorem.records is not None and theorem.records.measured is not None:
                state_measured_constants(self.written.get((theorem.name, name, label), ()), theorem, result,
                                         self.problem)
