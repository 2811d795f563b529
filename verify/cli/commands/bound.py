"""``fedverify bound``: a theorem's value, terms, step sizes and hypotheses at given numbers;
its inputs (``--inputs``) and formula (``--latex``)."""
from __future__ import annotations

import inspect
import sys

from ..usage import UsageError
from . import arguments, parse_setting

HELP = "evaluate a theorem's right-hand side from constants"

DESCRIPTION = ("Evaluate THEOREM at the given constants: value, named terms, prescribed step sizes and the "
               "hypotheses at these numbers. Theorem-specific inputs go through --set NAME=VALUE (numbers, "
               "comma-separated vectors, ';'-separated matrix rows, true/false or words such as variant=printed); "
               "a NAME the theorem does not take becomes a constant (zeta2, G2, or an extra constant such as "
               "sigma_g2). Momentum theorems get the one-stage schedule of --T, --eta-g, --eta-l and --set beta=, nu=.")

#: What each input means, for ``--inputs``.
INPUT_MEANINGS = {
    "constants": "--L, --sigma2, --delta-f, --F0, --N, --K, --T (and --set zeta2=, G2=, or a module's extra constants)",
    "c": "--L, --sigma2, --delta-f, --F0, --N, --K, --T (and --set zeta2=, sigma2_surrogate=)",
    "schedule": "one-stage server schedule from --T, --eta-g, --eta-l and --set beta=, nu=",
    "tau_max": "--tau-max: τ_max of the trace", "tau_avg": "--tau-avg: τ_avg of the trace",
    "expected_tau_max": "--tau-max: E[τ_max]", "expected_tau_avg": "--tau-avg: E[τ_avg]",
    "eta_g": "--eta-g: global step size", "eta_l": "--eta-l: local step size",
    "chains": "--set pi=π_1,...,π_N --set lam=λ_1,...,λ_N: two-state Markov clients",
}


#: Options that fill a theorem parameter of the same meaning.
_STANDARD = {"tau_max": "tau_max", "tau_avg": "tau_avg", "expected_tau_max": "tau_max", "expected_tau_avg": "tau_avg",
             "eta_g": "eta_g", "eta_l": "eta_l", "T": "T"}


_SCHEDULE_KEYS = ("beta", "nu")


#: Constants some theorems read from ``Constants.extra``, by module.
EXTRA_CONSTANTS = {"momentum": ("sigma_g2",), "logit": ("sigma2_surrogate",)}


def theorems() -> dict:
    """Every theorem, corollary and lemma by name ("fedsum.theorem_4_1", ...): the function
    ``bound`` evaluates, read from the theorems' declarations (``verify.theorems``)."""
    from ...theorems import THEOREMS

    return {name: t.evaluator for name, t in THEOREMS.items()}


def example(name: str) -> str:
    """The working ``fedverify bound NAME ...`` argument line the theorem declares."""
    from ...theorems import THEOREMS

    return THEOREMS[name].example


def _missing_constants(args) -> list[str]:
    return [flag for flag, value in (("--L", args.L), ("--sigma2", args.sigma2), ("--delta-f", args.delta_f))
            if value is None]


def _constants(args, extra: dict):
    from bounds import Constants

    fields = {k: extra.pop(k) for k in ("zeta2", "G2") if k in extra}
    return Constants(L=args.L, sigma2=args.sigma2, delta_f=args.delta_f, F0=args.F0 or 0.0, n_clients=args.N or 1,
                     local_steps=args.K or 1, rounds=args.T or 1, extra=dict(extra), **fields)


def _schedule(args, settings: dict):
    """The one-stage server schedule of --T, --eta-g, --eta-l and --set beta=, nu= (momentum theorems)."""
    from bounds.momentum import single_stage

    return single_stage(args.T, args.eta_g, args.eta_l, **{k: settings.pop(k) for k in _SCHEDULE_KEYS if k in settings})


def _lookup_theorem(text: str):
    from ...theorems import THEOREMS, get

    key = text.strip().lower()
    if "." not in key:          # a short name must name one theorem
        matches = [name for name in THEOREMS if name.split(".", 1)[1] == key]
        if len(matches) != 1:
            raise UsageError(f"unknown theorem {text!r}" + (f" (it could be {', '.join(matches)})" if matches else "")
                             + "; see fedverify bound --list")
        key = matches[0]
    try:
        theorem = get(key)
    except ValueError:
        raise UsageError(f"unknown theorem {text!r}; see fedverify bound --list") from None
    return theorem.name, theorem.evaluator


def _missing(params, args, settings: dict) -> list[str]:
    """The options a call still lacks, as the user would type them."""
    missing = []
    for pname, p in params.items():
        if pname in ("constants", "c"):
            missing += _missing_constants(args)
        elif pname == "schedule":
            missing += [flag for flag, v in (("--T", args.T), ("--eta-g", args.eta_g), ("--eta-l", args.eta_l)) if v is None]
        elif pname in settings or (pname in _STANDARD and getattr(args, _STANDARD[pname]) is not None):
            continue
        elif p.default is inspect.Parameter.empty:
            missing.append(f"--{_STANDARD[pname].replace('_', '-')}" if pname in _STANDARD else f"--set {pname}=VALUE")
    return list(dict.fromkeys(missing))


def _bound_kwargs(name, function, args, settings: dict) -> dict:
    """Keyword arguments for ``function`` from the options and --set (which it consumes)."""
    params = inspect.signature(function).parameters
    missing = _missing(params, args, settings)
    if missing:
        raise UsageError(f"{name} needs {', '.join(missing)}; fedverify bound {name} --inputs lists them with an example")
    kwargs = {"schedule": _schedule(args, settings)} if "schedule" in params else {}
    for pname in params:
        if pname in settings:
            kwargs[pname] = settings.pop(pname)
        elif pname in _STANDARD and getattr(args, _STANDARD[pname]) is not None:
            kwargs[pname] = getattr(args, _STANDARD[pname])
    takes_constants = [p for p in ("constants", "c") if p in params]
    allowed = (("zeta2", "G2") + EXTRA_CONSTANTS.get(name.split(".")[0], ())) if takes_constants else ()
    unknown = [k for k in settings if k not in allowed]
    if unknown:
        takes = [p for p in params if p not in ("constants", "c", "schedule")] + list(allowed)
        raise UsageError(f"{name} takes no input {', '.join(map(repr, unknown))}; --set takes {', '.join(takes)}")
    for pname in takes_constants:
        kwargs[pname] = _constants(args, settings)
    return kwargs


def _shown(kwargs: dict) -> dict:
    """The inputs of a call, flattened for one line."""
    import numpy as np

    shown = {}
    for key, value in kwargs.items():
        if key in ("constants", "c"):
            shown.update({k: v for k, v in vars(value).items() if v is not None and k != "extra"})
            shown.update(value.extra)
        elif key == "schedule":
            shown[key] = f"one stage (T={value.total_rounds})"
        else:
            shown[key] = np.array2string(value, separator=",") if isinstance(value, np.ndarray) else value
    return shown


def _inputs(name: str, function) -> str:
    """What ``function`` takes, as options, and a command line that works."""
    lines = [f"{name}: {(inspect.getdoc(function) or '').splitlines()[0]}", "inputs:"]
    for pname, p in inspect.signature(function).parameters.items():
        meaning = INPUT_MEANINGS.get(pname) or (f"--{_STANDARD[pname].replace('_', '-')}" if pname in _STANDARD
                                                else f"--set {pname}=VALUE")
        default = "required" if p.default is inspect.Parameter.empty else f"optional, default {p.default!r}"
        lines.append(f"  {pname:18s} {meaning} ({default})")
    lines += ["example:", f"  fedverify bound {name} {example(name)}"]
    return "\n".join(lines)


def _no_numbers(args) -> bool:
    return all(getattr(args, k) is None for k in ("L", "sigma2", "delta_f", "F0", "tau_max", "tau_avg", "eta_g", "eta_l",
                                                  "N", "K", "T")) and not args.set


#: The options that take a real number, with their meaning.
_NUMBERS = (("--L", "smoothness L"), ("--sigma2", "gradient variance σ²"), ("--delta-f", "Δ_f = f(x⁰) − f*"),
            ("--F0", "F_0 (default 0)"), ("--tau-max", "τ_max (E[τ_max] for a corollary)"),
            ("--tau-avg", "τ_avg (E[τ_avg] for a corollary)"), ("--eta-g", "global step size η_g"),
            ("--eta-l", "local step size η_l"))


def add_arguments(parser) -> None:
    """The options of ``bound``."""
    parser.add_argument("theorem", nargs="?", help="e.g. fedsum.theorem_4_1, fedsum.lemma_d6, momentum.theorem_4_1, "
                                                   "logit.theorem_2 (see --list)")
    parser.add_argument("--list", action="store_true", help="list the theorems and exit")
    parser.add_argument("--latex", action="store_true",
                        help="print only the formula, in LaTeX (with no numbers given, the symbolic formula)")
    parser.add_argument("--inputs", action="store_true", help="list what THEOREM takes, with a working example, and exit")
    for flag, help_ in _NUMBERS:
        parser.add_argument(flag, type=arguments.real, help=help_)
    parser.add_argument("--N", type=arguments.positive(int), help="clients N (default 1)")
    parser.add_argument("--K", type=arguments.positive(int), help="local steps K (default 1)")
    parser.add_argument("--T", "-T", type=arguments.positive(int), help="rounds T (default 1)")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="a theorem-specific input; repeatable")


def run(args) -> str:
    if args.list:
        from ...theorems.index import load_index

        listed = load_index()
        loaded = sys.modules.get("verify.theorems")
        if loaded is not None and "THEOREMS" in vars(loaded):     # theorems a library caller registered
            listed |= {name: t.summary for name, t in loaded.THEOREMS.items() if name not in listed}
        return "\n".join(f"{name:24s} {line}" for name, line in listed.items())
    import numpy as np

    from bounds import Bound

    if not args.theorem:
        raise UsageError("bound needs a THEOREM; see fedverify bound --list")
    name, function = _lookup_theorem(args.theorem)
    if args.inputs:
        return _inputs(name, function)
    if args.latex and _no_numbers(args):      # the symbolic formula: evaluate at the example, print its expression
        args = args.parser.parse_args(["bound", name, *example(name).split(), "--latex"])
    settings = {name: np.array(value) if isinstance(value, tuple) else value
                for name, value in map(parse_setting, args.set)}
    if "lam" in settings and "chains" in inspect.signature(function).parameters:
        if "pi" not in settings:
            raise UsageError(f"{name}: --set lam= needs --set pi= (two-state clients)")
        settings["chains"] = (np.atleast_1d(settings.pop("pi")), np.atleast_1d(settings.pop("lam")))
    kwargs = _bound_kwargs(name, function, args, settings)
    try:
        bound = function(**kwargs)
    except (TypeError, ArithmeticError) as err:
        raise UsageError(f"{name}: {err}") from None
    if not isinstance(bound, Bound):
        raise UsageError(f"{name} returned {type(bound).__name__}, not a Bound")
    if args.latex:
        return bound.latex()
    from ...report import bound_report

    return bound_report(name, bound, _shown(kwargs))
