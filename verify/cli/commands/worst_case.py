"""``fedverify worst-case``: the exact worst case of an algorithm on a participation trace (a
performance-estimation programme), beside a theorem's bound at the same step sizes."""
from __future__ import annotations

import argparse
import math
from pathlib import Path
from types import SimpleNamespace

from ..usage import UsageError
from . import announce, arguments, check_path, parse_setting, writable_file
from .delays import _trace

HELP = "the exact worst case of an algorithm on a trace (performance estimation), beside a theorem's bound"

DESCRIPTION = """\
Computes the worst case of (1/T) Σ_{t<T} ‖∇f(x_t)‖² of ALGORITHM on one participation trace
over the function class of a theorem (L-smooth clients, f(x_0) − f* ≤ Δ_f, and F_0 or σ_g²),
at σ² = 0: a small semidefinite programme (performance estimation; Drori & Teboulle 2014,
Taylor, Hendrickx & Glineur 2017) built with PEPit and solved with Clarabel (or SCS). It
prints the worst case with the solver's status and accuracy, the class (and its relaxation:
f* is relaxed to the least f over the iterates, so the value is an upper bound on the
class's worst case), the theorem's bound at the same step sizes, and bound / worst case,
the theorem's slack.

Step sizes: the theorem's own unless --eta-l / --eta-g are given. FedSUM Thm 4.1
(arXiv:2512.18275, eq. (12)): η_g = 1/√τ̂, η_l = 1/(10√τ̂ K L) at the trace's τ_max; Cor 4.1:
the same on each sampled trace; Server momentum Thms 4.1 and 4.6 (arXiv:2312.12670): one stage,
η = 1, the algorithm's β and ν (--set beta=0.5), η_l the largest at which every hypothesis holds.

Theorems in expectation over the participation (fedsum.corollary_4_1, momentum.theorem_4_6)
take the mean over --traces traces drawn from --pattern of the per-trace worst cases: an upper
bound on the worst case of the expectation.

Algorithms: fedsum-b, fedsum, fedsum-cr, fedavg, scaffold (FedSUM's theorems; FedAvg and
SCAFFOLD for reference) and fedgm, fedavgm, fednag, qhm (server momentum). The programme
grows with N, T and K (about (N·T·K)² constraints); the predicted time is printed when above
2 s, and a programme above FEDVERIFY_WORST_CASE_SECONDS (default 120 s) is refused."""

FORMATTER_CLASS = argparse.RawDescriptionHelpFormatter

#: The defaults: a useful answer in seconds.
DEFAULTS = {"clients": 3, "local_steps": 2, "rounds": 8, "pattern": "P1", "traces": 3}
#: Predicted seconds above which the command says how long it will take.
ANNOUNCE_SECONDS = 2.0


def add_arguments(parser) -> None:
    """The options of ``worst-case``."""
    parser.add_argument("algorithm", metavar="ALGORITHM",
                        help="fedsum-b, fedsum, fedsum-cr, fedavg, scaffold, fedgm, fedavgm, fednag or qhm")
    parser.add_argument("--trace", metavar="FILE", type=arguments.path,
                        help="a saved trace (.npz, .csv, .json) or a run record (.jsonl: its replied sets S_t)")
    parser.add_argument("--pattern", metavar="PRESET", default=None,
                        help="instead of --trace: a preset (fedverify delays --list) scaled to N clients with "
                             "--per-round of them a round where it samples (default P1, 2 of 3)")
    parser.add_argument("--per-round", type=arguments.positive(int), default=None, metavar="S",
                        help="clients a round of a sampling preset (default 2N/3, at least 1)")
    parser.add_argument("--seed", type=arguments.seed, default=0, help="seed of the pattern's trace(s) (default 0)")
    parser.add_argument("--traces", type=arguments.positive(int), default=DEFAULTS["traces"],
                        help="traces drawn from --pattern for a theorem in expectation over the participation "
                             f"(default {DEFAULTS['traces']})")
    parser.add_argument("--rounds", "-T", type=arguments.positive(int), default=None,
                        help=f"rounds T of the pattern's trace (default {DEFAULTS['rounds']}; a trace file has its own)")
    parser.add_argument("--clients", "-N", type=arguments.positive(int), default=None,
                        help=f"clients N (default {DEFAULTS['clients']}; a trace file's own, checked when given)")
    parser.add_argument("--local-steps", "-K", type=arguments.positive(int), default=DEFAULTS["local_steps"],
                        help=f"local steps K (default {DEFAULTS['local_steps']})")
    parser.add_argument("--eta-l", type=arguments.positive(float), default=None,
                        help="local step size (default: the theorem's)")
    parser.add_argument("--eta-g", type=arguments.positive(float), default=None,
                        help="global step size, as algorithms.get takes it (default: the theorem's)")
    parser.add_argument("--L", type=arguments.positive(float), default=1.0, help="smoothness L (default 1)")
    parser.add_argument("--delta-f", type=arguments.positive(float), default=1.0,
                        help="f(x_0) - f* <= delta-f (default 1)")
    parser.add_argument("--F0", type=arguments.positive(float), default=1.0,
                        help="(1/N) Σ_i ‖∇f_i(x_0)‖² <= F0, FedSUM's class (default 1)")
    parser.add_argument("--sigma-g2", type=arguments.positive(float), default=1.0,
                        help="heterogeneity σ_g², the server-momentum class (default 1)")
    parser.add_argument("--theorem", default=None,
                        help="fedsum.theorem_4_1 (default for the FedSUM family, FedAvg, SCAFFOLD), "
                             "fedsum.corollary_4_1, momentum.theorem_4_1 (default for momentum under full "
                             "participation) or momentum.theorem_4_6 (default for momentum otherwise)")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", dest="hparams",
                        help="an algorithm option, e.g. --set beta=0.5 --set nu=0.9; repeatable")
    parser.add_argument("--solver", choices=("clarabel", "scs"), default="clarabel",
                        help="the conic solver (default clarabel)")
    parser.add_argument("--best-step", action="store_true",
                        help="also search the η_l that minimises the worst case on the (first) trace, η_g kept")
    parser.add_argument("--json", metavar="FILE", type=arguments.path, default=None,
                        help="also write the result as JSON to FILE (atomically)")


def _algorithm_name(text: str) -> str:
    """The registered spelling of ``text`` when the worst-case engine transcribes it (checked
    before torch loads); else a one-line error naming those it does."""
    from ...worst_case.transcriptions import SUPPORTED

    key = text.strip().lower().replace("_", "-")
    key = {"fedsumb": "fedsum-b", "fedsumcr": "fedsum-cr"}.get(key, key)
    if key not in SUPPORTED:
        raise UsageError(f"no worst case for algorithm {text!r}: the worst-case engine transcribes "
                         f"{', '.join(SUPPORTED)}")
    return key


def _theorem_name(args, algorithm: str, full: bool) -> str:
    from ...worst_case.theorem_bounds import default_theorem, resolve_theorem

    if args.theorem is None:
        return default_theorem(algorithm, full)
    try:
        return resolve_theorem(args.theorem)
    except ValueError as err:
        raise UsageError(str(err)) from None


def _read_trace(args):
    """(trace, label) of --trace: a run record or a trace file, read as ``fedverify delays --trace`` reads them."""
    from participation.trace import regular_file_size

    check_path(args.trace, "--trace")
    regular_file_size(args.trace, "--trace")
    return _trace(SimpleNamespace(trace=args.trace, rule="whole", fraction=None, clients=args.clients,
                                  round_seconds=None))


def _pattern(args, n_clients: int):
    """(pattern, label) of --pattern scaled to ``n_clients``."""
    from ...worst_case.theorem_bounds import pattern_for

    try:
        return pattern_for(args.pattern or DEFAULTS["pattern"], n_clients, args.per_round)
    except ValueError as err:
        raise UsageError(str(err).replace("per_round", "--per-round", 1)) from None


def _inputs(args):
    """(algorithm name, theorem name, traces, label, pattern or None), every name and file checked."""
    from participation import Trace

    if args.trace is not None and args.pattern is not None:
        raise UsageError(f"--trace {args.trace} and --pattern {args.pattern} exclude each other: give one")
    if args.trace is not None and args.per_round is not None:
        raise UsageError("--per-round applies only to --pattern")
    if args.trace is not None and args.rounds is not None:
        raise UsageError(f"-T {args.rounds} with --trace: a trace file has its own number of rounds")
    if args.rounds is None:
        args.rounds = DEFAULTS["rounds"]
    algorithm = _algorithm_name(args.algorithm)
    if args.trace is not None:
        trace, label = _read_trace(args)
        full = bool(trace.mask.all())
        theorem = _theorem_name(args, algorithm, full)
        return algorithm, theorem, [trace], label, None
    n_clients = args.clients or DEFAULTS["clients"]
    pattern, label = _pattern(args, n_clients)
    probe = pattern.sample(args.rounds, seed=args.seed)
    theorem = _theorem_name(args, algorithm, bool(probe.mask.all()))
    from ...worst_case.theorem_bounds import THEOREMS

    if THEOREMS[theorem]:
        batch = pattern.sample_batch(args.rounds, args.traces, seed=args.seed)
        traces = [Trace(mask) for mask in batch]
        label += f", {args.traces} traces of seed {args.seed})"
    else:
        traces = [probe]
        label += f", seed {args.seed})"
    return algorithm, theorem, traces, label, pattern


def _hparams(items) -> dict:
    out = {}
    for item in items:
        name, value = parse_setting(item)
        if name in ("eta_l", "eta_g", "local_steps"):
            raise UsageError(f"--set {name}: give --{name.replace('_', '-')} instead" if name != "local_steps"
                             else "--set local_steps: give -K instead")
        out[name] = value
    return out


def _finite(value):
    """JSON values: non-finite floats as the strings "inf", "-inf", "nan"."""
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def _fmt(value, digits: int = 4) -> str:
    return "—" if value is None else f"{value:.{digits}g}"


def run(args) -> str:
    if args.json is not None:
        writable_file(args.json, "--json", inputs=[args.trace])
    hparams = _hparams(args.hparams)
    algorithm, theorem, traces, label, pattern = _inputs(args)
    if args.clients is not None and traces[0].n_clients != args.clients:
        raise UsageError(f"--clients {args.clients}: the trace has {traces[0].n_clients} clients")
    from participation.budget import human_seconds

    from bounds import Constants

    from ...worst_case.theorem_bounds import against, refuse_above_limit

    K = args.local_steps
    found = refuse_above_limit(algorithm, traces, K)
    seconds = sum(s.seconds for s in found)
    if args.best_step:
        seconds += 11 * found[0].seconds
    if seconds > ANNOUNCE_SECONDS:
        announce(f"worst-case: {len(traces)} programme(s) of {found[0].gram}x{found[0].gram} Gram matrix and "
                 f"{found[0].constraints} constraints, about {human_seconds(seconds)}")
    constants = Constants(args.L, 0.0, args.delta_f, args.F0, traces[0].n_clients, K, traces[0].n_rounds,
                          zeta2=args.sigma_g2 if theorem.startswith("momentum.") else None)
    given = {k: v for k, v in (("eta_l", args.eta_l), ("eta_g", args.eta_g)) if v is not None}
    result = against(theorem, algorithm, traces, constants, hparams=hparams, step_sizes=given or None,
                     pattern=pattern, solver=args.solver)
    best = _best_step(args, result, traces[0], hparams) if args.best_step else None
    lines = _report(args, result, label, best)
    if args.json is not None:
        from ...report import write_json

        data = {"command": "worst-case", "pattern_or_trace": label, **result.as_dict()}
        if best is not None:
            data["best_step"] = best
        lines.append(f"wrote {write_json(Path(args.json), _finite(data))}")
    return "\n".join(lines)


def _best_step(args, result, trace, hparams) -> dict:
    import algorithms

    from ...worst_case import best_step

    case = result.per_trace[0]
    options = {k: v for k, v in result.hparams.items() if k not in ("eta_l", "eta_g")}
    alg = algorithms.get(result.algorithm, local_steps=result.local_steps, **{**options, **case.step_sizes})
    found = best_step(alg, trace, result.function_class, solver=args.solver)
    return {"eta_l": found.eta_l, "eta_g": found.eta_g, "worst_case": found.worst_case.value,
            "prescribed_eta_l": case.step_sizes["eta_l"], "prescribed_worst_case": found.start.value,
            "solves": len(found.tried)}


def _report(args, r, label, best) -> list[str]:
    steps = ", ".join(f"{k}={v:.4g}" for k, v in r.step_sizes.items())
    which = "its prescribed step sizes" if r.steps == "prescribed" else "the given step sizes"
    taus = ", ".join(f"τ_max={c.tau_max}, τ_avg={c.tau_avg:.3g}" for c in r.per_trace[:3])
    more = f", … ({len(r.per_trace)} traces)" if len(r.per_trace) > 3 else ""
    lines = [f"worst-case: {r.algorithm} on {label}, N={r.n_clients}, K={r.local_steps}, T={r.rounds}",
             f"theorem: {r.theorem} at {which} {steps} ({taus}{more})",
             f"class: {r.function_class.describe()}",
             f"relaxation: {r.relaxation}",
             f"worst case of (1/T) Σ_t ‖∇f(x_t)‖² at σ² = 0: {_fmt(r.worst_case, 6)} (status {r.status}, solver "
             f"{r.solver}, accuracy {_fmt(r.accuracy, 2)}, {r.seconds:.2f} s)"]
    if len(r.per_trace) > 1 or r.label != "worst case on the trace":
        lines.append(f"  {r.label}")
    valid = "" if r.bound_valid else f" (* a hypothesis fails: {'; '.join(r.violated)})"
    lines += [f"bound ({r.theorem} at σ² = 0): {_fmt(r.bound, 6)}{valid}",
              f"bound / worst case: {_fmt(r.ratio, 4)} (the theorem's slack on this class)"]
    if not r.covered:
        lines.append(f"(ref) {r.theorem} does not cover {r.algorithm}: the bound is shown for reference")
    if best is not None:
        lines.append(f"best η_l on this trace (η_g kept): {best['eta_l']:.4g}, worst case {_fmt(best['worst_case'], 6)}; "
                     f"prescribed η_l {best['prescribed_eta_l']:.4g}, worst case {_fmt(best['prescribed_worst_case'], 6)} "
                     f"({best['solves']} solves)")
    lines += [f"note: {n}" for n in r.notes]
    return lines
