"""Judge recorded runs (``verify.records``) against a theorem: ``check_run`` (``verify.check_run``;
the module has another name so that ``verify.check_run`` is always the function).

The participation S_t is the record's ``replied`` sets; τ_max and τ_avg come from them (FedSUM
§2.2). The left side is the theorem's measure of the recorded numbers — (1/T) Σ_{t<T}
‖∇f(x_t)‖² for FedSUM's bounds and most users' — one value per record. Several records of the
same setting (algorithm, N, K, T, step sizes) are several seeds: one-sided Student-t limits of
their mean against the bound, exactly as ``check`` judges its own runs. One record is one sample:
it gives no confidence interval, so its verdict is "inconclusive" unless the run was noise-free
(σ² = 0, then the record is its own expectation).

A bound conditional on {S_t} (FedSUM Thm 4.1, Lemmas C.6–E.6) needs every record to follow the
same trace; a bound in full expectation (Cor 4.1) takes E[τ_max], E[τ_avg] of the header's
availability model, else as the records' mean (a Monte-Carlo estimate over the records' traces,
said in the notes). A delay bound is judged by the plan and the judge of ``check``: its plan
(``verify.theorems.delay.delay_plan``) on the records' Setup (their traces, the step sizes each
states, the header's availability model) and ``runner.judge_recorded``.

Theorems with a plan of their own (Server momentum, CA-Fed, LOGIT) are judged by that plan on
the recorded runs (``verify.theorems.from_records``): the record's step sizes, hyper-parameters,
participation model and per-round fields stand where fedverify's run would be, the left side
and the bound are the plan's, and the verdict is the one judge's (``runner.judge_recorded``),
with the same marks as ``check``. Recorded step sizes outside the theorem's (prescribed, or
breaking a hypothesis on them) carry the ``†`` mark.

``worst_case`` puts the exact worst case over the theorem's class beside the verdict, as ``check``
does (``verify.theorems.runner.worst_case_column``): the record's algorithm (its header's name,
step sizes, K and hyper-parameters) on its replied sets, at the constants judged with; a
noise-free record measuring above it is "outside the class".
"""
from __future__ import annotations

import dataclasses
import hashlib
import inspect
import math
import numbers
import os
from pathlib import Path

import numpy as np

from algorithms import History
from bounds.core import Constants

from ..checking import resolve_bound, resolve_theorem
from .consistency import check_availability, check_constants, check_equal_weights, check_same_setting
from .fields import _finite
from .reading import RunRecord, load_record
from ..theorems import from_records
from ..theorems.contract import Setup
from ..theorems.delay import delay_plan, evaluate
from ..theorems.runner import judge_recorded, make_plan, worst_case_column, worst_case_mode, worst_case_refusal
from ..verdicts import CheckResult, WorstCaseColumn

__all__ = ["check_run", "history_of"]

#: Constants a record must give (in its header or through ``constants=``); F_0 too whenever the
#: theorem's bound depends on it (never taken as 0).
NEEDED = ("L", "sigma2", "delta_f")


def history_of(record: RunRecord) -> History:
    """The record as an ``algorithms.History`` (rounds 0..T−1, every round recorded), so that a
    theorem's measure reads it as it reads an engine run."""
    T = record.n_rounds
    grad2 = record.metrics.get("grad_norm2", np.full(T, np.nan))
    loss = record.metrics.get("loss", np.full(T, np.nan))
    acc = record.metrics.get("accuracy")
    return History(algorithm=str(record.header.get("algorithm", "unknown")), hparams={}, seed=record.header.get("seed", 0),
                   rounds=np.arange(T), grad_norm2=np.asarray(grad2, dtype=float), loss=np.asarray(loss, dtype=float),
                   accuracy=acc, uplink=np.zeros(T), downlink=np.zeros(T), final_params=np.zeros(0), stopped=None,
                   n_rounds=T, meta={"record": str(record.path)})


#: Bytes per (round, client) cell that judging a record uses beyond its two masks at its peak:
#: the traces built from the replies, the delay computation and the participation checks on
#: them (a test measures the peak of each way of judging).
JUDGING_BYTES_PER_CELL = 8.0


def _records(records) -> list[RunRecord]:
    """The records, read with the memory limit applied to all of them and the work of judging
    them (``JUDGING_BYTES_PER_CELL``) before any is read in full."""
    if isinstance(records, (str, Path, RunRecord)):
        records = [records]
    try:
        records = list(records)
    except TypeError:
        raise TypeError(f"records must be a path, a RunRecord or a list of them, got {type(records).__name__}") from None
    out, held = [], 0.0
    for r in records:
        if not isinstance(r, (str, os.PathLike, RunRecord)):
            raise TypeError(f"records must be paths or RunRecords, got {type(r).__name__} {str(r)[:40]}")
        if not isinstance(r, RunRecord):
            r = load_record(r, bytes_per_cell=JUDGING_BYTES_PER_CELL, held_bytes=held)
        held += 2.0 * r.mask.size
        out.append(r)
    if not out:
        raise ValueError("check_run needs at least one record")
    for r in out:
        if r.n_rounds == 0:
            raise ValueError(f"{Path(r.path).name if r.path else 'a record'} has a header and no round: nothing to judge")
    paths, runs = set(), set()
    for r in out:
        path = str(Path(r.path).resolve()) if r.path else None
        run = (hashlib.sha256(np.ascontiguousarray(r.mask)).digest(), r.mask.shape, r.header.get("seed"),
               tuple(sorted((k, np.asarray(v, dtype=float).tobytes()) for k, v in r.metrics.items())))
        if (path is not None and path in paths) or run in runs:
            raise ValueError(f"{Path(r.path).name if r.path else 'a record'} is given twice (the same file or the same "
                             "run): one run is one sample, not several; give records of distinct seeds")
        paths.add(path)
        runs.add(run)
    return out


def _same_setting(records: list[RunRecord], per_trace_steps: bool = False, replies: bool = True) -> list[RunRecord]:
    """Records judged together share one setting (``verify.records.consistency.check_same_setting``:
    every header field but the seed, in either order, and no run twice); ``per_trace_steps``:
    their step sizes may differ (a bound in full expectation whose step sizes are prescribed per
    realised trace, FedSUM Cor 4.1 with Thm 4.1's). With ``replies``, each record's replies must
    agree with its header's participation model, and its server must have weighted the replies
    equally (FedSUM eq. (3) averages the participants equally); a theorem with a plan of its own
    checks both after its participation model (``_judge_plan``)."""

    records = check_same_setting(records, free=("step_sizes",) if per_trace_steps else ())
    for record in records if replies else ():
        check_availability(record)
        check_equal_weights(record)
    first = records[0]
    for r in records[1:]:
        if r.n_rounds != first.n_rounds:
            raise ValueError(f"the records have {first.n_rounds} and {r.n_rounds} rounds; records judged together "
                             "must have the same T")
    return records


def _given(record: RunRecord, constants) -> dict:
    """The header's constants overridden by ``constants`` (a dict, ``bounds.Constants`` or
    ``verify.EstimatedConstants``)."""
    given = dict(record.header.get("constants") or {})
    if constants is not None:
        if isinstance(constants, Constants):
            given.update({k: getattr(constants, k) for k in ("L", "sigma2", "delta_f", "F0")})
        elif hasattr(constants, "to_dict"):              # verify.EstimatedConstants
            given.update({k: q["value"] for k, q in constants.to_dict().items()})
        elif isinstance(constants, dict):
            given.update(constants)
        else:
            raise ValueError(f"constants must be a dict, bounds.Constants or verify.EstimatedConstants, got "
                             f"{type(constants).__name__}")
    for k, v in given.items():
        if k != "source" and v is not None and not _finite(v):
            raise ValueError(f"constant {k} must be a finite number, got {v!r}")
    return given


def _constants(record: RunRecord, constants) -> tuple[Constants, dict]:
    given = _given(record, constants)
    missing = [k for k in NEEDED if given.get(k) is None]
    if missing:
        raise ValueError(f"the record gives no {', '.join(missing)}: pass constants= (or write them in its header)")
    for k in (*NEEDED, "F0"):
        if k in given and (not isinstance(given[k], numbers.Real) or isinstance(given[k], bool)
                           or not math.isfinite(given[k]) or given[k] < 0):
            raise ValueError(f"constant {k} must be a finite number ≥ 0, got {given[k]!r}")
    K = record.header.get("local_steps")
    if K is None:
        raise ValueError("the record gives no local_steps (K): write it in its header")
    consts = Constants(L=float(given["L"]), sigma2=float(given["sigma2"]), delta_f=float(given["delta_f"]),
                       F0=float(given["F0"]) if given.get("F0") is not None else 0.0,
                       n_clients=record.n_clients, local_steps=int(K), rounds=record.n_rounds)
    info = {k: {"value": given[k], "exact": None} for k in ("L", "sigma2", "delta_f", "F0") if given.get(k) is not None}
    if given.get("source"):
        info["source"] = given["source"]
    return consts, info


def check_run(records, theorem="fedsum.theorem_4_1", *, constants=None, confidence: float = 0.95,
              worst_case=False) -> CheckResult:
    """Judge one or more run records (paths or ``RunRecord``) against ``theorem`` (a name, a
    Theorem or a callable delay bound; see the module docstring). ``constants``: a dict (``L``,
    ``sigma2``, ``delta_f``, ``F0``), ``bounds.Constants`` or ``verify.EstimatedConstants``,
    overriding the header's. ``worst_case``: "auto", True or False (default), as ``verify.check``
    takes it."""
    worst_case = worst_case_mode(worst_case)
    theorem = resolve_theorem(theorem)
    theorem.require_checkable()
    if isinstance(confidence, bool) or not isinstance(confidence, numbers.Real) or not 0.5 <= confidence < 1:
        raise ValueError(f"confidence must lie in [0.5, 1), got {confidence!r}")
    records = _records(records)
    if theorem.plan is not None:
        records = _same_setting(records, replies=False)
        return _judge_plan(records, theorem, constants, float(confidence), worst_case)
    spec = resolve_bound(theorem)
    records = _same_setting(records, per_trace_steps=spec.expectation and theorem.prescribes_steps)
    first = records[0]
    consts, const_info = _constants(first, constants)
    for r in records:
        check_constants(r, _given(r, constants))
    setup = _delay_setup(records, theorem, spec, consts, float(confidence))
    plan = delay_plan(theorem, setup)
    if "F0" not in const_info:           # never taken as 0: refused when the bound depends on it
        other = dataclasses.replace(consts, F0=1.0)
        from_records.require_F0(theorem.name, evaluate(spec, constants=consts, **plan.bound_inputs),
                   lambda: evaluate(spec, constants=other, **plan.bound_inputs),
                   what=" (F_0 = (1/N) Σ_i ‖∇f_i(x⁰)‖², FedSUM Thm 4.1)")
    from_records.finite_left_sides(records, theorem, every_round=True)
    notes = [] if setup.given_steps else ["the record gives no step sizes: the hypotheses on them are not checked"]
    return judge_recorded(theorem, setup, plan, [history_of(r) for r in records], confidence=float(confidence),
                          const_info=const_info, notes=notes, column=lambda result: _record_worst_case(
                              records, theorem.name, spec.expectation, consts, setup.given_steps, worst_case, result))


def _delay_setup(records: list[RunRecord], theorem, spec, consts: Constants, confidence: float) -> Setup:
    """The delay plan's Setup for ``records``: their traces and names, the step sizes each states
    (the first's as ``given_steps``, judged as given), the header's availability model as the
    pattern where the bound reads E[τ] or a pattern, and no problem or algorithm to run."""
    first = records[0]
    pattern = None
    needs_pattern = ("pattern" in spec.params and inspect.signature(spec.function).parameters["pattern"].default
                     is inspect.Parameter.empty)
    if spec.expectation or needs_pattern:
        pattern, _ = from_records.availability_pattern(first, theorem.name)
        if pattern is None and needs_pattern:
            raise from_records.missing(first, "availability", theorem.name)
    steps = dict(first.header.get("step_sizes") or {})
    if spec.needs_steps and not {"eta_g", "eta_l"} <= set(steps):
        absent = sorted({"eta_g", "eta_l"} - set(steps))
        raise ValueError(f"{Path(first.path).name if first.path else 'the record'} has no step_sizes.{absent[0]}, which "
                         f"{theorem.name} needs: its bound is written in the step sizes η_g, η_l")
    return Setup(problem=None, algorithm=first.header.get("algorithm") or "unknown", hparams={}, given=None,
                 constants=consts, trace=first.trace, pattern=pattern,
                 seeds=tuple(int(i if r.header.get("seed") is None else r.header["seed"]) for i, r in enumerate(records)),
                 step_mode="given", given_steps=steps, confidence=confidence,
                 recorded=tuple(r.trace for r in records),
                 recorded_steps=tuple(dict(r.header.get("step_sizes") or {}) for r in records),
                 recorded_names=tuple(Path(r.path).name if r.path else None for r in records))


def _record_algorithm(record: RunRecord, steps: dict):
    """The engine's algorithm of ``record``: its header's name, step sizes, K and hyper-parameters."""
    import algorithms

    name = record.header.get("algorithm")
    if not name or not {"eta_g", "eta_l"} <= set(steps):
        raise ValueError("the record names no algorithm or no step sizes η_g, η_l to run in the programme")
    try:
        return algorithms.get(str(name), eta_l=float(steps["eta_l"]), eta_g=float(steps["eta_g"]),
                              local_steps=int(record.header.get("local_steps")),
                              **(record.header.get("hparams") or {}))
    except (ValueError, TypeError) as err:
        raise ValueError(f"the record's algorithm {name!r} cannot be rebuilt: {err}") from None


def _record_worst_case(records, theorem_name: str, expectation: bool, consts, steps: dict, mode,
                       result: CheckResult) -> WorstCaseColumn:
    """The worst case beside a delay bound's verdict on records: one programme on the records' one
    trace (a conditional bound), or one per record's trace (a bound in full expectation)."""
    refusal = worst_case_refusal(theorem_name, consts, mode)
    if refusal:
        return WorstCaseColumn.missing(refusal)
    chosen = records if expectation else records[:1]
    try:
        built = [_record_algorithm(r, dict(r.header.get("step_sizes") or steps)) for r in chosen]
    except ValueError as err:
        return WorstCaseColumn.missing(f"not covered: {err}")
    return worst_case_column(theorem_name, built, [r.trace for r in chosen], consts, mode=mode,
                             measured=result.measured, bound=result.bound_value)


def _seeds_of(records: list[RunRecord]) -> tuple[int, ...]:
    """The records' seeds when each names a distinct one, else their positions."""
    seeds = [r.header.get("seed") for r in records]
    if all(isinstance(x, int) and x >= 0 for x in seeds) and len(set(seeds)) == len(seeds):
        return tuple(seeds)
    return tuple(range(len(records)))


def _judge_plan(records: list[RunRecord], theorem, constants, confidence: float, worst_case=False) -> CheckResult:
    """A theorem with a plan (Server momentum, CA-Fed, LOGIT) judged on the records (module docstring)."""
    first = records[0]
    given = _given(first, constants)
    from_records.constants_needed(theorem, given)
    reading = theorem.records
    rule = reading.constant_check if reading is not None else "mean"
    if rule is not None:
        for r in records:
            check_constants(r, _given(r, constants), largest=rule == "largest")
    from_records.finite_left_sides(records, theorem)
    from_records.require_fields(records, theorem, given)
    from_records.require_model(records, theorem)
    for record in records:
        check_availability(record)
        if reading is None or reading.equal_weights:
            check_equal_weights(record)
    setup, notes = from_records.record_setup(records, theorem, given, confidence)
    setup = dataclasses.replace(setup, seeds=_seeds_of(records))
    histories = [from_records.record_history(r, theorem.name, _given(r, constants)) for r in records]
    if reading is not None and reading.check_given is not None:
        reading.check_given(histories, given, [Path(r.path).name if r.path else f"record {i}" for i, r in enumerate(records)])
    plan = make_plan(theorem, setup)
    bound = plan.bound(histories)
    if given.get("F0") is None:            # never taken as 0: refused when the bound depends on it
        from_records.require_F0(theorem.name, bound,
                                lambda: make_plan(theorem, from_records.with_F0(setup, 1.0)).bound(histories))
    outside = from_records.steps_outside(theorem, setup, plan, bound)
    if outside:
        plan.steps_outside = outside
    const_info = {k: {"value": v, "exact": None} for k, v in given.items() if k != "source" and v is not None}
    if given.get("source"):
        const_info["source"] = given["source"]
    result = judge_recorded(theorem, setup, plan, histories, confidence=confidence, const_info=const_info, notes=notes,
                            worst_case=worst_case)
    if len(records) == 1 and not result.values[0] == result.values[0]:      # NaN left side: a field was null
        raise ValueError(f"{theorem.lhs} is undefined for {Path(first.path).name if first.path else 'the record'}")
    return result
