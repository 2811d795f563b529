"""One module per ``fedverify`` command: its ``HELP`` line, its options (``add_arguments(parser)``)
and ``run(args) -> str`` (the text to print); ``verify.cli`` lists the commands and builds the
parser from these declarations. Every command module is imported to build the parser, ``--help``
included, so a module imports numpy, torch or the sweep only inside the functions that need them;
the argument types several commands share are in ``verify.cli.commands.arguments``.

What several commands need to run lives here: a line on stderr before long work, progress
only on a terminal, memory refusals for traces and Monte-Carlo runs, plugins, and the checks
every command makes before its work: paths (never empty; output folders and plot files probed
by creating and removing a file where they will be written), the torch device (one check for
every command that takes --device), and the options of ``delays`` that would otherwise be
silently ignored.
"""
from __future__ import annotations

import importlib.util
import math
import os
import sys
import time
from pathlib import Path

from ..usage import UsageError

def announce(text: str) -> None:
    """A line on stderr before long work, so a run that prints nothing for minutes says why."""
    print(f"fedverify: {text}", file=sys.stderr, flush=True)


def stdout_to_devnull() -> None:
    """Point file descriptor 1 at /dev/null, so that what is still buffered for a reader that
    has gone is dropped instead of failing again when Python flushes at exit."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):     # stdout closed or None: nothing to point
        pass
    finally:
        os.close(devnull)


def progress_line(text: str) -> None:
    """A line on stdout while a command works (a finished run, a table). A reader that has gone
    (``| head -1``) or an output that cannot be written stops these lines, never the work: the
    command goes on and writes its result files."""
    global _STDOUT_GONE
    if _STDOUT_GONE or sys.stdout is None:
        return
    try:
        print(text, flush=True)
    except (OSError, ValueError):            # BrokenPipeError included
        _STDOUT_GONE = True
        stdout_to_devnull()


_STDOUT_GONE = False


def show_progress(args) -> bool:
    return not getattr(args, "no_progress", False) and sys.stderr.isatty()


def trace_bytes(rounds: int, n_clients: int) -> int:
    """Peak bytes to sample one trace and compute its delays: the boolean mask, its
    64-bit-packed copies (a few, for the doubling in ``per_round_delay``) and τ_t."""
    return rounds * (n_clients + 32 * -(-n_clients // 64) + 16)


def require_trace_memory(name: str, rounds: int, n_clients: int) -> None:
    from participation.budget import require_memory

    require_memory(trace_bytes(rounds, n_clients), f"{name} at T={rounds}: one trace of {rounds} rounds × {n_clients} clients")


def require_mc_memory(reps: int) -> None:
    """Refuse a Monte-Carlo run whose per-replicate results (τ_max and τ_avg of every
    replicate, kept for the quantiles, and their sorted copies) exceed the memory limit."""
    from participation.budget import require_memory

    require_memory(64 * reps, f"{reps} replicates' τ_max and τ_avg")


#: Trace cells (rounds × clients × replicates) the short timing of ``_mc_seconds`` draws at most;
#: a pattern with more clients than this is timed on one round, which may itself take a while.
TIMING_CELLS = 2_000_000
#: Seconds the timed chunk of ``_mc_seconds`` takes, about (when one replicate is quicker).
TIMED_SECONDS = 0.1


def _mc_seconds(pattern, rounds: int, reps: int, method: str = "auto") -> float:
    """Seconds ``monte_carlo`` will take, from runs far smaller than the job.

    Method "trace" draws whole traces, whose cost is in proportion to T·N a replicate: two
    replicates over a short horizon are timed and scaled up (a deterministic pattern draws one
    trace for every replicate). The other methods draw a chunk of replicates in vectorised steps
    over the horizon, after building tables for it (kept between calls): a chunk costs a fixed
    part, whatever its size, plus a part per replicate. One replicate over the whole horizon is
    timed twice (the first call may build the tables), then a chunk of up to ``TIMED_SECONDS``'
    worth of replicates; their difference gives the cost of a replicate, and the estimate is
    that of the chunks ``monte_carlo`` will draw (their count from its chunk size) and of the
    replicates."""
    from participation.expected import monte_carlo
    from participation.expected.montecarlo import _plan

    def timed(horizon, count):
        start = time.perf_counter()
        monte_carlo(pattern, horizon, count, 0, progress=False, method=method)
        return time.perf_counter() - start

    sampler, _, size = _plan(pattern, rounds, reps, method, None, None)
    if sampler.method == "trace":
        short = max(1, min(rounds, TIMING_CELLS // pattern.n_clients))
        drawn = 1 if pattern.deterministic else reps
        return timed(short, min(2, drawn)) * (rounds / short) * (drawn / min(2, drawn))
    one = min(timed(rounds, 1), timed(rounds, 1))
    count = int(min(reps, size, max(2, TIMED_SECONDS // max(one, 1e-9))))
    if count < 2:                          # one replicate a chunk (or a run of one)
        return one * reps
    many = timed(rounds, count)
    per_replicate = min(max(many - one, 0.0) / (count - 1), many / count)
    per_chunk = max(one - per_replicate, 0.0)
    return math.ceil(reps / size) * per_chunk + reps * per_replicate


#: Longest work (seconds, as announced) a command starts without ``--long``.
LONG_SECONDS = 6 * 3600


def require_long(seconds: float, what: str, allowed: bool) -> None:
    """Refuse work announced at more than :data:`LONG_SECONDS` unless the user passed ``--long``:
    a mistyped size should not start days of work."""
    if seconds > LONG_SECONDS and not allowed:
        from participation.budget import human_seconds

        raise UsageError(f"{what} would take about {human_seconds(seconds)}, more than the "
                         f"{human_seconds(LONG_SECONDS)} a command starts on its own; pass --long to run it anyway")


def add_long_option(parser) -> None:
    parser.add_argument("--long", action="store_true",
                        help=f"run work announced at more than {LONG_SECONDS // 3600} hours (refused otherwise)")


def announce_mc(name: str, pattern, rounds: int, reps: int, workers: int = 1, method: str = "auto",
                stderr: float | None = None, long: bool = False) -> None:
    """Say before long Monte-Carlo work how long it will take; with ``stderr`` (run to a target
    precision), ``reps`` is the most replicates it may take and the time is an upper limit.

    The sizes are checked first (``check_monte_carlo``: a one-line ValueError naming the need and
    the limit when the results or a chunk cannot fit), before anything is timed; a pattern with
    more than ``TIMING_CELLS`` clients is then announced before its timing too, which takes a
    while of its own."""
    from participation.expected import check_monte_carlo

    from participation.budget import human_seconds

    check_monte_carlo(pattern, rounds, reps, method=method)
    if pattern.n_clients > TIMING_CELLS:
        announce(f"{name}: {reps} traces of {rounds} rounds × {pattern.n_clients} clients; timing them first, "
                 f"which at more than {TIMING_CELLS:,} clients takes a while itself")
    seconds = _mc_seconds(pattern, rounds, reps, method) / workers
    require_long(seconds, f"{name}: {reps} traces of {rounds} rounds × {pattern.n_clients} clients", long)
    if seconds > 20:
        if stderr is None:
            announce(f"{name}: {reps} traces of {rounds} rounds × {pattern.n_clients} clients, about "
                     f"{human_seconds(seconds)}")
        else:
            announce(f"{name}: until both standard errors are ≤ {stderr:g}, at most {reps} traces of {rounds} rounds "
                     f"× {pattern.n_clients} clients, at most about {human_seconds(seconds)}")


def check_plot(path, flag: str = "--plot") -> None:
    """Refuse, before any work, a plot path that is empty, has no image suffix, names a
    folder, or lies in a folder that cannot be written to (the folder is created, as the
    plot would create it, and a temporary file made and removed in it)."""
    if path is None:
        return
    path = Path(check_path(path, flag))
    from ...report import plot_format

    plot_format(path)
    if path.is_dir():
        raise UsageError(f"{flag} {_quote(str(path))} is a folder; give a file name such as {_quote(str(path / 'plot.png'))}")
    _probe_folder(path.parent, f"{flag} {_quote(str(path))}: its folder {_quote(str(path.parent))}")


def check_path(text, flag: str) -> str:
    """``text`` when it can name a file: refused when empty (an empty path would silently
    mean the current folder) or when it holds a NUL character."""
    from participation.validation import path_text

    try:
        return path_text(text, flag)
    except ValueError as err:
        raise UsageError(str(err)) from None


def _quote(text: str) -> str:
    from participation.validation import quote

    return quote(text, 80)


def early_checks(*, theorem: str | None = None, plugins=(), patterns=(), records=()) -> None:
    """The mistakes a command can name before it imports torch and the engine: a theorem name
    that is not one of ``fedverify bound --list`` (when no plugin could add it), a plugin file or
    module that does not exist, a trace file that does not exist, a run record that is not a
    file or whose first line is not JSON."""
    import json

    from ...choices import TRACE_SUFFIXES
    from ...theorems.index import load_index

    for spec in plugins:
        if spec.endswith(".py") or "/" in spec:
            if not Path(spec).is_file():
                raise UsageError(f"plugin file {_quote(spec)} does not exist")
        elif not spec.strip() or importlib.util.find_spec(spec.split(".")[0]) is None:
            raise UsageError(f"plugin module {_quote(spec)} cannot be found (give a module name on the path or a .py file)")

    known = set(load_index())
    loaded = getattr(sys.modules.get("verify.theorems"), "__dict__", {})
    if "THEOREMS" in loaded:          # theorems registered in this process (a library caller's own)
        known |= set(loaded["THEOREMS"])
    if theorem is not None and not plugins and theorem not in known and f"fedsum.{theorem}" not in known:
        from difflib import get_close_matches

        near = get_close_matches(theorem, sorted(known), n=1)
        raise UsageError(f"unknown theorem {_quote(theorem)}" + (f"; did you mean {near[0]}?" if near else "")
                         + " (fedverify bound --list names them all)")

    for text in patterns:       # a link that exists but leads nowhere is left to the loader, which says why
        if Path(text).suffix.lower() in TRACE_SUFFIXES + (".jsonl",) and not os.path.lexists(text):
            raise UsageError(f"trace file {_quote(text)} does not exist")
    for record in records:
        path = Path(record)
        if not os.path.lexists(path):
            raise UsageError(f"run record {path.name} does not exist (in {_quote(str(path.parent))})")
        if path.is_dir():
            raise UsageError(f"run record {_quote(str(record))} is a folder")
        if not path.is_file():
            continue                # a pipe, a device, a link to nowhere: the loader names it
        try:
            with open(path, "rb") as handle:
                first = handle.readline(1 << 20)
            json.loads(first.decode("utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            raise UsageError(f"{path.name} is not a fedverify run record: its first line is not a JSON header "
                             "(see verify.records)") from None


def load_plugins(specs) -> None:
    from algorithms.registry import load_plugin

    for spec in specs:
        load_plugin(spec)


def _probe_folder(folder: Path, what: str) -> None:
    """Create ``folder`` (with its parents) and a named temporary file in it, then remove
    the file: what an atomic write will do. Pseudo file systems (/proc, /sys) refuse it here
    rather than after the work."""
    import tempfile

    created = None                # the outermost folder the probe makes, removed after it: nothing is left behind
    for parent in [folder, *folder.parents]:
        if parent.exists():
            break
        created = parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=folder, prefix=".fedverify-probe.", suffix=".tmp")
        os.close(fd)
        os.unlink(name)
    except OSError as err:
        raise UsageError(f"{what} cannot be written to ({err.strerror or type(err).__name__})") from None
    finally:
        if created is not None:
            for empty in [folder, *folder.parents]:
                try:
                    empty.rmdir()
                except OSError:
                    break
                if empty == created:
                    break


def writable_file(path, flag: str, inputs=()) -> Path:
    """Refuse, before any work, a file path that is empty, names a folder or something other than
    a regular file (a device, a pipe: the atomic write would replace it), names one of the
    command's ``inputs`` (the write would replace it), or lies in a folder that cannot be written
    to (probed as the atomic write will use it)."""
    path = Path(check_path(path, flag))
    if path.is_dir():
        raise UsageError(f"{flag} {_quote(str(path))} is a folder; give a file name")
    if os.path.lexists(path) and not path.is_file():
        raise UsageError(f"{flag} {_quote(str(path))} exists and is not a regular file (a device, a pipe or a link "
                         "to nowhere); the result would replace it: give a file name")
    for given in inputs:
        if given is not None and os.path.lexists(given) and Path(given).resolve() == path.resolve():
            raise UsageError(f"{flag} {_quote(str(path))} is one of the command's inputs; the result would replace "
                             "it: give another file name")
    _probe_folder(path.parent, f"{flag} {_quote(str(path))}: its folder {_quote(str(path.parent))}")
    return path


def writable_folder(folder: Path, flag: str, files=()) -> None:
    """Refuse, before any work, a folder that cannot be created or written to, an empty
    path (it would mean the current folder), and a folder where one of the ``files`` the
    command will write exists as something other than a file."""
    folder = Path(check_path(folder, flag))
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"{flag} {_quote(str(folder))} exists and is not a folder")
    _probe_folder(folder, f"{flag} {_quote(str(folder))}")
    for name in files:
        target = folder / name
        if target.exists() and not target.is_file():
            raise UsageError(f"{flag} {_quote(str(folder))}: {name} exists there and is not a file, so it cannot "
                             "be replaced")


def device(text, flag: str = "--device"):
    """The torch device ``text`` names, checked once for every command that takes one
    (``algorithms.devices.resolve_device``: it parses, holds data, and this machine has it). None
    stays None (the default, the CPU)."""
    if text is None:
        return None
    from algorithms.devices import resolve_device

    try:
        return resolve_device(str(text), flag)
    except ValueError as err:
        raise UsageError(str(err)) from None


def trace_or_presets(args) -> None:
    """``delays``: refuse, before any work, options that would be silently ignored and a
    --trace that is not a regular file. --trace replaces the presets, so naming both is an
    error; --round-seconds, --rule, --fraction and --clients only apply to --trace; an empty
    --trace names nothing; a FIFO, folder or link loop is named for what it is without being
    opened (reading a FIFO would block the command)."""
    from ...choices import DefaultNames

    if args.trace is not None:
        check_path(args.trace, "--trace")
        if args.presets and not isinstance(args.presets, DefaultNames):
            raise UsageError(f"--trace {_quote(args.trace)} and the presets {_quote(' '.join(args.presets))} exclude "
                             "each other: give --trace or presets, not both")
        from participation.datasets import DATASETS
        from participation.trace import regular_file_size

        if args.trace not in DATASETS:
            regular_file_size(args.trace, "--trace")     # a FIFO is refused before anything opens it
        return
    given = [flag for flag, value in (("--round-seconds", args.round_seconds), ("--fraction", args.fraction),
                                       ("--clients", args.clients)) if value is not None]
    if args.rule != "whole":
        given.append("--rule")
    if given:
        raise UsageError(f"{', '.join(given)} apply only to --trace; the presets ignore them")


def parse_setting(text: str, flag: str = "--set") -> tuple[str, object]:
    """NAME=VALUE → (name, value): a bool ("true"/"false"), an int, a float, a vector "a,b"
    (a tuple of floats), a matrix "a,b;c,d" (a tuple of row tuples) or a word. One parser for
    every command's ``--set``."""
    name, sep, raw = text.partition("=")
    if not sep or not name.strip() or not raw.strip():
        raise UsageError(f"{flag} expects NAME=VALUE, got {text!r}")
    name, raw = name.strip(), raw.strip()
    if raw.lower() in ("true", "false"):
        return name, raw.lower() == "true"
    if "," in raw or ";" in raw:
        try:
            rows = tuple(tuple(float(x) for x in row.split(",")) for row in raw.split(";"))
        except ValueError:
            raise UsageError(f"{flag} {name}: expected comma-separated numbers, got {raw!r}") from None
        return name, rows if ";" in raw else rows[0]
    for kind in (int, float):
        try:
            return name, kind(raw)
        except ValueError:
            pass
    return name, raw
