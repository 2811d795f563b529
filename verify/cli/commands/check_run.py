"""``fedverify check-run``: judge run records made anywhere against a theorem (``verify.check_run``)."""
from __future__ import annotations

import math
import stat
from pathlib import Path

from ..usage import UsageError
from . import arguments, early_checks, load_plugins, writable_file
from .check import add_worst_case

HELP = "judge run records made anywhere (a training loop, Flower) against a theorem"

DESCRIPTION = ("Judge RECORD files (fedverify run records, JSON Lines; see verify.records) against THEOREM, any "
               "of `fedverify bound --list`: the participation S_t is each record's replied sets, the left side "
               "the theorem's measure of its recorded numbers ((1/T) Σ‖∇f(x_t)‖² for FedSUM's, the stage average "
               "for Server momentum's, ...), the step sizes, hyper-parameters and participation model those of its "
               "header; a record without a field the theorem reads is refused naming it. Several records of one "
               "setting are several seeds; one record is one sample and gives no confidence interval. Constants "
               "come from the records' header, --constants FILE (JSON: L, sigma2, delta_f, F0 and the theorem's "
               "own, e.g. sigma_g2, mu, Gamma) or --L/--sigma2/--delta-f/--F0. Beside the verdict, for noise-free "
               "records (σ² = 0) of a theorem verify.worst_case covers: the worst case over the theorem's class at the "
               "records' step sizes and traces (on where predicted under 5 s; --worst-case up to "
               "FEDVERIFY_WORST_CASE_SECONDS, --no-worst-case off); a record above it is 'outside the class'.")


#: The largest --constants file read (a few numbers; anything larger is not one).
CONSTANTS_BYTES = 1 << 20


def _constants(args) -> dict | None:
    given = {}
    if args.constants is not None:
        from participation.files import strict_json

        try:
            info = Path(args.constants).stat()
            if not stat.S_ISREG(info.st_mode):
                raise UsageError(f"--constants {args.constants}: not a regular file (a pipe, a device or a folder)")
            if info.st_size > CONSTANTS_BYTES:
                raise UsageError(f"--constants {args.constants}: {info.st_size} bytes; a constants file is at most "
                                 f"{CONSTANTS_BYTES} bytes")
            with open(args.constants, "rb") as f:
                given = strict_json(f.read())
        except OSError as err:
            raise UsageError(f"--constants {args.constants}: {err.strerror or err}") from None
        except ValueError as err:
            raise UsageError(f"--constants {args.constants}: {err}") from None
        if not isinstance(given, dict):
            raise UsageError(f"--constants {args.constants}: expected a JSON object with L, sigma2, delta_f, F0")
    for key, value in (("L", args.L), ("sigma2", args.sigma2), ("delta_f", args.delta_f), ("F0", args.F0)):
        if value is not None:
            if not math.isfinite(value) or value < 0:
                raise UsageError(f"--{key.replace('_', '-')} must be a finite number ≥ 0, got {value}")
            given[key] = value
    return given or None


def add_arguments(parser) -> None:
    """The options of ``check-run``."""
    parser.add_argument("records", nargs="+", type=arguments.path, metavar="RECORD", help="run record files (.jsonl)")
    parser.add_argument("--theorem", default="fedsum.theorem_4_1",
                        help="a theorem of `fedverify bound --list` or a registered one (default fedsum.theorem_4_1)")
    parser.add_argument("--constants", type=arguments.path, default=None, metavar="FILE",
                        help="a JSON file with L, sigma2, delta_f, F0 and any constant the theorem reads")
    for flag, meaning in (("--L", "smoothness L"), ("--sigma2", "gradient noise σ²"), ("--delta-f", "f(x_0) − f*"),
                          ("--F0", "F_0 (FedSUM Thm 4.1)")):
        parser.add_argument(flag, type=float, default=None, help=f"{meaning}, overriding the records' header")
    arguments.add_confidence(parser)

    add_worst_case(parser)
    arguments.add_plugin(parser)
    parser.add_argument("--json", type=arguments.path, default=None, metavar="FILE",
                        help="also write the result as JSON to FILE")


def run(args) -> str:
    if not 0.5 <= args.confidence < 1:
        raise UsageError(f"--confidence must lie in [0.5, 1), got {args.confidence}")
    if args.json is not None:
        writable_file(args.json, "--json", inputs=[*args.records, getattr(args, "constants", None)])
    early_checks(theorem=args.theorem, plugins=args.plugin, records=args.records)
    load_plugins(args.plugin)
    from ...records.checks import check_run
    from ...report import write_json

    result = check_run([str(p) for p in args.records], args.theorem, constants=_constants(args),
                       confidence=args.confidence, worst_case=args.worst_case)
    lines = [f"{result.bound_name} on {len(args.records)} record(s): N={result.n_clients}, T={result.rounds}, "
             f"K={result.local_steps}, algorithm {result.algorithm}", str(result),
             _constants_line(result, args), _steps_line(result, args.records[0])]
    if result.worst_case is not None:
        lines.append(result.worst_case.summary())
    lines += [f"  {c}" for c in result.conditions if not c.holds]
    if result.extras:
        from ...report import side_quantities

        lines += side_quantities([{"algorithm": result.algorithm, "pattern": "records",
                                   "result": {"extras": result.extras}}])
    lines += [f"note: {n}" for n in result.notes]
    if args.json is not None:
        lines.append(f"wrote {write_json(args.json, result.to_dict())}")
    return "\n".join(lines)


def _constants_line(result, args) -> str:
    """The constants the bound used, with where they came from (the records' header, or the
    command's --constants / --L ... options)."""
    given = [flag for flag in ("L", "sigma2", "delta_f", "F0") if getattr(args, flag, None) is not None]
    values = []
    for name, entry in result.constants.items():
        if name == "source" or not isinstance(entry, dict) or entry.get("value") is None:
            continue
        values.append(f"{name}={entry['value']:.4g}")
    source = result.constants.get("source")
    origin = ("--constants " + str(args.constants) if getattr(args, "constants", None) is not None else
              "options " + ", ".join(f"--{g.replace('_', '-')}" for g in given) + " over the header" if given else
              "the records' header")
    return f"constants: {', '.join(values)} (from {origin}" + (f"; source: {source}" if source else "") + ")"


def _steps_line(result, path) -> str:
    """The step sizes as the record wrote them, beside those the theorem reads when they differ
    (FedAvgM's η' is Server momentum's η = η'/(1 − β), Sec. 3)."""
    from ...records import read_header

    recorded = dict(read_header(path).get("step_sizes") or {})
    used = {k: v for k, v in result.step_sizes.items() if isinstance(v, (int, float))}
    text = "step sizes as recorded: " + (", ".join(f"{k}={v:g}" for k, v in recorded.items()) or "none")
    differ = {k: v for k, v in used.items() if k in recorded and abs(v - recorded[k]) > 1e-12 * max(1.0, abs(v))}
    if differ:
        text += "; the theorem reads " + ", ".join(f"{k}={v:.4g}" for k, v in differ.items())
        if result.algorithm in ("fedavgm", "fednag") and "eta_g" in differ:
            text += " (η = η'/(1 − β), Server momentum Sec. 3)"
    return text
