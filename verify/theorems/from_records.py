"""A theorem with a plan of its own (Server momentum, CA-Fed, LOGIT) judged on run records.

A plan reads fedverify's runs through their ``History``: the per-round ‖∇f(x_t)‖² and what
``run(..., observe=True)`` adds (``History.observed``). A record carries the same numbers
(``verify.records``, format version 2), so :func:`record_history` turns a record into that
History and :func:`record_setup` into the plan's ``Setup``: the algorithm at the recorded step
sizes (``Setup.given``), the recorded traces (``Setup.recorded``), the participation model of
the header (``availability``) as a pattern, and the constants of the header. The plan then
measures and bounds the recorded runs exactly as it does fedverify's own, and the one judge
(``verify.theorems.runner``) gives the verdict.

A record that lacks a field the theorem reads is refused naming the field and the equation
that uses it (:data:`FIELDS`); nothing is taken from the algorithm's defaults: β, ν, η_l, η_g,
the surrogate rule and the delay limit must be written in the record.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from algorithms import History
from bounds.core import Constants

from .contract import Setup, Theorem

__all__ = ["FIELDS", "record_history", "record_setup", "staleness", "missing", "require_F0"]

#: Where each record field a plan reads comes from, and the equation that uses it.
FIELDS = {
    "grad_norm2": "‖∇f(x_t)‖² every round (the left side: Server momentum Sec. 4.2's Ḡ, LOGIT eq. (10))",
    "heterogeneity": "(1/N) Σ_i ‖∇f_i(x_t) − ∇f(x_t)‖² per round, or constants.sigma_g2 "
                     "(σ_g², Server momentum Assumption A3)",
    "heterogeneity_max": "max_i ‖∇f_i(x_t) − ∇f(x_t)‖² per round, or constants.zeta2 (σ₃², LOGIT Assumption 4)",
    "local_steps": "K_{t,i} of every arriving client (φ_1, φ_2, φ_3 of Server momentum footnote 5, Thm 5.1)",
    "delays": "τ_{t,i} of every arriving client (Server momentum Alg. 4, τ of Thm 5.1)",
    "generator_error": "e_{n,t} of every unavailable client (LOGIT eq. (23), Assumption 5)",
    "weights": "q_{t,i}, the aggregation weights of every round with clients, server rate included "
               "(CA-Fed eq. (2); App. B absorbs η̄ into q)",
    "avg_client_losses": "F_k(w̄_T) at the step-weighted average iterate, last round (CA-Fed §III-B, eq. (13))",
    "availability": "the participation model (header availability: FedSUM Section 2.1's case for Cor G.1, "
                    "Server momentum footnote 4, CA-Fed Assumption 1, LOGIT Section 3.3)",
    "step_sizes": "the recorded step sizes η_l and η_g (header step_sizes, or a schedule)",
}


def staleness(mask: np.ndarray) -> np.ndarray:
    """τ_n^t (T, N): for a client not in A_t the rounds since its last upload, t − s with s its
    last round in A before t (s = −1 when none, a virtual upload before round 0); 0 in A_t
    (LOGIT Section 3.3, as ``algorithms.logit`` counts it)."""
    T, N = mask.shape
    rounds = np.arange(T)[:, None]
    last = np.where(mask, rounds, -1)
    seen = np.maximum.accumulate(last, axis=0)                 # last upload at or before t
    before = np.vstack([np.full((1, N), -1), seen[:-1]])       # last upload before t
    return np.where(mask, 0, rounds - before).astype(float)


def _name(record) -> str:
    return Path(record.path).name if record.path is not None else "the record"


def missing(record, field: str, theorem: str) -> ValueError:
    """The one-line refusal of a record without ``field``."""
    return ValueError(f"{_name(record)} has no {field}, which {theorem} needs: {FIELDS[field]}")


def _arrivals(record, name: str, theorem: str) -> tuple:
    """The per-round values of ``name`` at the clients whose update arrived (client order)."""
    if name not in record.vectors:
        raise missing(record, name, theorem)
    values = record.vectors[name]
    gaps = np.argwhere(record.mask & np.isnan(values))
    if gaps.size:
        t, i = gaps[0]
        raise ValueError(f"{_name(record)}: {name} is null for client {i} in round {t}, whose update arrived; "
                         f"{theorem} needs {FIELDS[name]}")
    return tuple(values[t][record.mask[t]] for t in range(record.n_rounds))


def record_history(record, theorem: str | None = None, constants: dict | None = None) -> History:
    """The record as the ``History`` of a run (every round recorded, ``observed`` filled from
    the record's fields: heterogeneity, local steps and delays at the arrivals, weights,
    LOGIT's per-client generator errors with their staleness, the averaged iterate's client
    losses; ``meta["constants"]`` the record's own constants, or ``constants`` when given, for
    a constant that belongs to one run such as CA-Fed's F_B* at its weights). ``theorem`` names
    the theorem in the refusal of an inconsistent field."""
    T = record.n_rounds
    metrics, vectors = record.metrics, record.vectors
    observed: dict = {}
    for name in ("heterogeneity", "heterogeneity_max", "local_norm", "param_norm"):
        if name in metrics:
            observed[name] = np.asarray(metrics[name], dtype=float)
    for name in ("local_steps", "delays"):
        if name in vectors:
            observed[name] = _arrivals(record, name, theorem or "the theorem")
    if "weights" in vectors:
        observed["weights"] = vectors["weights"].copy()
    if "generator_error" in vectors:
        errors = np.where(record.mask, np.nan, vectors["generator_error"])
        gaps = np.argwhere(~record.mask & np.isnan(errors))
        if gaps.size:
            t, i = gaps[0]
            raise ValueError(f"{_name(record)}: generator_error is null for client {i} in round {t}, which was "
                             f"unavailable; {FIELDS['generator_error']}")
        observed["client_generator_error"] = errors
        observed["generator_error"] = np.nansum(errors, axis=1) / record.n_clients
        observed["client_staleness"] = staleness(record.mask)
    if "avg_client_losses" in vectors:
        observed["avg_client_losses"] = vectors["avg_client_losses"].copy()
    grad2 = metrics.get("grad_norm2", np.full(T, np.nan))
    loss = metrics.get("loss", np.full(T, np.nan))
    return History(algorithm=str(record.header.get("algorithm", "unknown")), hparams=dict(record.header.get("hparams") or {}),
                   seed=record.header.get("seed", 0), rounds=np.arange(T), grad_norm2=np.asarray(grad2, dtype=float),
                   loss=np.asarray(loss, dtype=float), accuracy=metrics.get("accuracy"), uplink=np.zeros(T),
                   downlink=np.zeros(T), final_params=np.zeros(0), stopped=None, n_rounds=T,
                   meta={"record": str(record.path),
                         "constants": dict(constants if constants is not None else record.header.get("constants") or {})},
                   observed=observed)


# ------------------------------------------------------------------------------ the setup


def _step(record, name: str, theorem: str) -> float:
    steps = record.header.get("step_sizes") or {}
    if steps.get(name) is None:
        raise ValueError(f"{_name(record)} has no step_sizes.{name}, which {theorem} needs: {FIELDS['step_sizes']}")
    return float(steps[name])


#: Hyper-parameters a record must state for an algorithm (never taken from its defaults), and why.
STATED = {
    "fedgm": ("beta", "nu"), "qhm": ("beta", "nu"), "fedavgm": ("beta",), "fednag": ("beta",),
    "fedgm-autonomous": ("max_delay",), "logit": ("surrogate",),
}


def given_algorithm(record, theorem: Theorem):
    """The recorded algorithm at its recorded step sizes and hyper-parameters (``algorithms.get``);
    the hyper-parameters of :data:`STATED` must be in the header, a schedule replaces η_g, β, ν."""
    import algorithms

    name = record.header.get("algorithm")
    if not name:
        raise ValueError(f"{_name(record)} names no algorithm; {theorem.name} is proved for "
                         f"{', '.join(theorem.covers or ())}: write algorithm in its header")
    K = record.header.get("local_steps")
    if K is None:
        raise ValueError(f"{_name(record)} has no local_steps (K), which {theorem.name} needs: write it in its header")
    hparams = {k: v for k, v in (record.header.get("hparams") or {}).items() if k not in theorem.options}
    schedule = record.header.get("schedule")
    if schedule is not None:
        from bounds.momentum import StageSchedule

        stages = StageSchedule(tuple(schedule["lengths"]), tuple(schedule["eta_g"]), float(schedule["eta_l"]),
                               tuple(schedule["beta"]), schedule["nu"])
        if sum(stages.lengths) != record.n_rounds:
            raise ValueError(f"{_name(record)}: the schedule's stages cover {sum(stages.lengths)} rounds but the "
                             f"record has {record.n_rounds}")
        # η_l, η_g, β, ν written beside the schedule must be its first stage's: FedGM refuses a conflict
        stated = {k: float(v) for k, v in (record.header.get("step_sizes") or {}).items()
                  if k in ("eta_l", "eta_g") and v is not None}
        try:
            return algorithms.get(name, schedule=stages, local_steps=int(K), **stated, **hparams)
        except ValueError as err:
            raise ValueError(f"{_name(record)}: the header contradicts its schedule: {err}") from None
    absent = [k for k in STATED.get(str(name).lower(), ()) if k not in hparams]
    if absent:
        raise ValueError(f"{_name(record)} has no hparams.{absent[0]} for {name}, which {theorem.name} needs "
                         "(written in the record, never taken from a default)")
    try:
        return algorithms.get(name, eta_l=_step(record, "eta_l", theorem.name), eta_g=_step(record, "eta_g", theorem.name),
                              local_steps=int(K), **hparams)
    except ValueError as err:
        raise ValueError(f"{_name(record)}: {err}") from None


def availability_pattern(record, theorem: str):
    """The header's participation model as a pattern (None for "full", "estimate" or no model),
    and a note: ``any`` → None (no law), ``bernoulli`` (or no model) with the per-round
    ``probabilities`` field recorded → ``Bernoulli(p_n^t)`` (LOGIT Section 3.3), any other model →
    the pattern ``participation.patterns.pattern_from_header`` reads (``uniform`` →
    ``Uniform(N, m)``, ``cyclic`` → ``Cyclic(N, m)``, ``reshuffled`` → ``ReshuffledCyclic(N, m)``,
    ``markov`` → ``Markov(π, λ)``, ``bernoulli`` → ``Bernoulli(p)``; a ValueError names a model
    the table does not know)."""
    from participation.patterns import Bernoulli, pattern_from_header

    model = record.header.get("availability") or {}
    kind = model.get("model")
    if kind in ("bernoulli", None) and "probabilities" in record.vectors:
        p = record.vectors["probabilities"]
        if np.isnan(p).any():
            t, i = np.argwhere(np.isnan(p))[0]
            raise ValueError(f"{_name(record)}: probabilities is null for client {i} in round {t}")
        return Bernoulli(p), "p_n^t: the recorded per-round probabilities"
    if kind == "any":           # no law: m is read from the recorded rounds
        return None, f"any arrival rule with m = {int(model['m'])} arrivals a round (the header's availability)"
    if kind == "estimate":
        return None, "estimate"
    if kind in (None, "full"):
        return None, None
    return pattern_from_header(model, record.n_clients), None


def _constants(record, given: dict) -> Constants:
    extra = {k: float(v) for k, v in given.items() if k not in ("L", "sigma2", "delta_f", "F0", "zeta2", "source")
             and v is not None}
    return Constants(L=float(given["L"]), sigma2=float(given["sigma2"]), delta_f=float(given["delta_f"]),
                     F0=float(given.get("F0") or 0.0), n_clients=record.n_clients,
                     local_steps=int(record.header["local_steps"]), rounds=record.n_rounds,
                     zeta2=float(given["zeta2"]) if given.get("zeta2") is not None else None, extra=extra)


def require_model(records: list, theorem: Theorem) -> None:
    """Refuse records whose participation model is not one the theorem is proved under
    (``theorem.records.models``), naming the header's ``availability`` and the assumption."""
    reading = theorem.records
    allowed = reading.models if reading is not None else None
    if allowed is None:
        return
    first = records[0]
    kind = (first.header.get("availability") or {}).get("model")
    if kind is None and "bernoulli" in allowed and "probabilities" in first.vectors:
        return
    if kind not in allowed:
        given = f"availability {kind!r}" if kind else "no availability"
        raise ValueError(f"{_name(first)} has {given}; {theorem.name} is proved under {reading.assumption}: "
                         f"write availability with model {' or '.join(map(repr, allowed))} in its header")


def record_setup(records: list, theorem: Theorem, given_constants: dict, confidence: float) -> tuple[Setup, list[str]]:
    """The plan's Setup for ``records`` (one setting, several seeds, each consistent with itself:
    ``verify.records.checks`` checks that first) and notes on what was read."""
    first = records[0]
    notes = []
    algorithm = given_algorithm(first, theorem)
    pattern, how = availability_pattern(first, theorem.name)
    if how == "estimate":
        pattern, how = estimated_pattern(records, theorem)
    if how:
        notes.append(how)
    consts = _constants(first, given_constants)
    options = {k: v for k, v in (first.header.get("hparams") or {}).items() if k in theorem.options}
    setup = Setup(problem=None, algorithm=str(first.header["algorithm"]).lower(), hparams=options, given=algorithm,
                  constants=consts, trace=first.trace, pattern=pattern,
                  seeds=tuple(range(len(records))), recorded=tuple(r.trace for r in records), step_mode="given",
                  given_steps={"eta_g": algorithm.eta_g, "eta_l": algorithm.eta_l}, confidence=float(confidence))
    return setup, notes


def estimated_pattern(records: list, theorem: Theorem):
    """The participation model estimated from the recorded S_t (``availability: estimate``): the
    model the theorem assumes (``theorem.records.estimate``) fitted to the records' traces, and a
    note that says so."""
    estimate = theorem.records.estimate if theorem.records is not None else None
    if estimate is None:
        raise ValueError(f"{theorem.name} reads no estimated availability model: give availability "
                         "(full, uniform with m, or any with m) in the header")
    return estimate(records)


def fitted_bernoulli(records: list):
    """LOGIT Section 3.3's independent availability fitted to the records: p̂_n = the fraction of
    the pooled recorded rounds in which client n was available."""
    from participation.patterns import Bernoulli

    masks = np.concatenate([r.mask for r in records])
    p = masks.mean(axis=0)
    if (p == 0).any():
        raise ValueError(f"client {int(np.flatnonzero(p == 0)[0])} is never available in the records: "
                         "its availability probability cannot be estimated as positive")
    return Bernoulli(p), (f"availability estimated from the recorded S_t: p̂_n = the fraction of rounds "
                          f"client n was available ({masks.shape[0]} rounds)")


def fitted_markov(records: list):
    """CA-Fed Assumption 1's chains fitted to the records: per client the transition counts N_xy
    of every record (``participation.markov.transition_counts``) summed, then the maximum-likelihood
    rates â = N_01/N_0, b̂ = N_10/N_1 (conditional on each record's first round), π̂ = â/(â + b̂)
    (CA-Fed eq. (237)) and λ̂ = 1 − â − b̂ (eq. (238)). A client whose chain the records do not
    identify as irreducible and aperiodic (a state never entered or never left: â or b̂ 0 or
    undefined; or â = b̂ = 1, a period-2 chain) is refused by name."""
    from participation.markov import transition_counts
    from participation.patterns import Markov

    counts = sum(transition_counts(r.mask) for r in records)
    n0, n1 = counts[:, 0].sum(axis=1), counts[:, 1].sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        a, b = counts[:, 0, 1] / n0, counts[:, 1, 0] / n1
    bad = ~((a > 0) & (b > 0)) | ((a == 1) & (b == 1))
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise ValueError(f"client {k}'s recorded S_t (N_01={int(counts[k, 0, 1])}, N_10={int(counts[k, 1, 0])}, "
                         f"N_0={int(n0[k])}, N_1={int(n1[k])}) identify no irreducible aperiodic chain (CA-Fed "
                         "Assumption 1): give availability {\"model\": \"markov\", \"pi\": [...], \"lam\": [...]}")
    T = sum(r.n_rounds for r in records)
    return Markov.from_rates(a, b), (f"availability estimated from the recorded S_t: two-state chains with the "
                                     f"maximum-likelihood rates â = N_01/N_0, b̂ = N_10/N_1 over {len(records)} "
                                     f"record(s), {T} rounds; π̂ = â/(â + b̂), λ̂ = 1 − â − b̂ (CA-Fed eqs. (237)–(238))")


def constants_needed(theorem: Theorem, given: dict) -> None:
    """L, σ², Δ_f must be given (the plans' bounds read them); F_0 is refused later only if the
    bound depends on it."""
    absent = [k for k in ("L", "sigma2", "delta_f") if given.get(k) is None]
    if absent:
        raise ValueError(f"the record gives no {', '.join(absent)}, which {theorem.name} needs: pass constants= "
                         "(or write them in its header)")


def with_F0(setup: Setup, value: float) -> Setup:
    return dataclasses.replace(setup, constants=dataclasses.replace(setup.constants, F0=value))


def require_F0(theorem_name: str, bound, at_F0_one, what: str = "") -> None:
    """F_0 never taken as 0: refuse a record without F0 whose bound depends on it, that is whose
    ``bound`` differs from ``at_F0_one()`` (the same bound at F_0 = 1). ``what`` says what F_0 is."""
    if at_F0_one().value != bound.value:
        raise ValueError(f"the record gives no F0{what}, which {theorem_name} uses: write it in the header's "
                         "constants or pass it (--F0, constants=)")


#: The constants a CA-Fed record states (its header's ``constants``), and where each enters.
CAFED_CONSTANTS = {
    "mu": "μ, the strong convexity of Assumption 4 (κ = L/μ in eqs. (10), (11), (15))",
    "F_star": "F* = min_w Σ_k α_k F_k(w) (eq. (3)), subtracted in eq. (10)'s left side",
    "F_B_star": "F_B* = min_w Σ_k p_k F_k(w), p = π ⊙̃ q (eq. (4)), subtracted in eqs. (10) and (13)",
    "eps_bias": "ε_bias = F(w_B*) − F* (Thm 1), the right side of eq. (10) and the left side of eqs. (11), (15)",
    "Gamma": "Γ = max_k F_k(w*) − F_k* (eq. (9)), in eqs. (11) and (13)",
    "Gamma_prime": "Γ' = max_k F_k(w_B*) − F_k* (Thm 3), in eqs. (13) and (15)",
    "diam": "diam(W), the diameter of a ball holding every iterate and minimiser (Lemma 1: D, G, H of eq. (13))",
}

def require_fields(records: list, theorem: Theorem, given: dict) -> None:
    """Refuse a record without a field the theorem reads (``theorem.records.fields``) unless the
    constants that replace it are all given, naming the field and the equation that reads it."""
    for field, replaced_by in (theorem.records.fields if theorem.records is not None else ()):
        if field == "grad_norm2":
            continue                      # every round's value: finite_left_sides
        if replaced_by and all(given.get(k) is not None for k in replaced_by):
            continue
        for r in records:
            if field in r.vectors:
                continue
            values = r.metrics.get(field)
            if values is None or np.isnan(values).any():
                alternative = f" (or give constants {' and '.join(replaced_by)})" if replaced_by else ""
                raise ValueError(f"{_name(r)} has no {field}{' in every round' if values is not None else ''}, "
                                 f"which {theorem.name} needs{alternative}: {FIELDS[field]}")


def finite_left_sides(records: list, theorem: Theorem, every_round: bool | None = None) -> None:
    """Every round's ‖∇f(x_t)‖² recorded, where the left side is built from them: always for a
    delay bound (``every_round``), for a plan where its declaration reads them."""
    if every_round is None:
        every_round = theorem.records is not None and theorem.records.reads_every_round
    if not every_round:
        return
    for r in records:
        grad2 = r.metrics.get("grad_norm2")
        gaps = np.flatnonzero(np.isnan(grad2)) if grad2 is not None else None
        if grad2 is None or gaps.size:
            where = "it records no grad_norm2" if grad2 is None else f"grad_norm2 is missing at round {int(gaps[0])}"
            raise ValueError(f"{_name(r)}: {theorem.lhs} is undefined for this record ({where}); the left side needs "
                             "every round's value")


def steps_outside(theorem: Theorem, setup: Setup, plan, bound) -> str | None:
    """Why the recorded step sizes are outside the theorem's (``theorem.records.steps_outside``),
    else the plan's own reason, or None."""
    rule = theorem.records.steps_outside if theorem.records is not None else None
    return (rule(theorem, setup, plan, bound) if rule is not None else None) or plan.steps_outside
