"""The ``fedverify`` command (also ``python -m verify``): the parser and the dispatch.

The commands are listed once, in :data:`COMMANDS`; each is a module of ``verify.cli.commands``
(``check-run`` is ``check_run``) that declares ``HELP`` (its line in ``fedverify --help``),
``add_arguments(parser)`` (its options), ``run(args) -> str`` (the text to print) and, where it
has one, ``DESCRIPTION`` (and ``FORMATTER_CLASS``) for ``fedverify COMMAND --help``. A command
module imports its heavy dependencies inside ``run``, so ``--help`` answers at once. A bare
``fedverify`` runs :data:`DEFAULT_COMMAND`. Every error is one line on stderr and exit code 2;
no traceback reaches the user.
"""
from __future__ import annotations

import argparse
import sys
import warnings
from importlib import import_module

from .commands import stdout_to_devnull
from .commands.arguments import MAX_PROCESSES
from .usage import UsageError, one_line

__all__ = ["COMMANDS", "DEFAULT_COMMAND", "MAX_PROCESSES", "build_parser", "command_module", "main"]

#: The commands, in the order ``fedverify --help`` lists them.
COMMANDS = ("check", "delays", "mc", "check-run", "bound", "sweep", "experiment", "bench", "worst-case")

#: What a bare ``fedverify`` runs, with its defaults.
DEFAULT_COMMAND = "check"

#: Longest error line printed; longer ones (a value echoed whole) are cut with "…".
MAX_ERROR_CHARS = 1000


class _Parser(argparse.ArgumentParser):
    """A parser whose errors are a UsageError (one line, exit 2), not argparse's own exit."""

    def error(self, message):
        raise UsageError(message)


def command_module(name: str):
    """The module of ``verify.cli.commands`` that declares and runs command ``name``."""
    return import_module(f".commands.{name.replace('-', '_')}", __package__)


def _add_command(commands, name: str) -> None:
    """Add command ``name`` to the ``commands`` of the parser, with the options its module declares."""
    module = command_module(name)
    parser = commands.add_parser(name, help=module.HELP, description=getattr(module, "DESCRIPTION", None),
                                 formatter_class=getattr(module, "FORMATTER_CLASS", argparse.HelpFormatter))
    module.add_arguments(parser)


def build_parser() -> argparse.ArgumentParser:
    """The ``fedverify`` parser: the global options, then one sub-parser per entry of :data:`COMMANDS`."""
    parser = _Parser(prog="fedverify", description="Check federated-learning theory against training runs. "
                                                   "Without a command, runs `check` with its defaults.")
    parser.add_argument("--traceback", action="store_true",
                        help="show the full traceback when a plugin of yours raises (default: one line naming it)")
    commands = parser.add_subparsers(dest="command", parser_class=_Parser)
    for name in COMMANDS:
        _add_command(commands, name)
    return parser


def _one_line_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Warnings the command shows, as one line each: "fedverify: warning: ...", no source line."""
    _say(f"fedverify: warning: {_cut(one_line(message))}", sys.stderr if file is None else file)


def main(argv=None) -> int:
    with warnings.catch_warnings():
        warnings.showwarning = _one_line_warning
        return _main(argv)


def _main(argv=None) -> int:
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        if args.command is None:
            args = parser.parse_args([DEFAULT_COMMAND])
        args.parser = parser                  # bound --latex re-parses its example with it
        output = command_module(args.command).run(args)
    except (UsageError, ValueError, OSError) as err:
        _say(f"fedverify: error: {_cut(one_line(err))}", sys.stderr)
        return 2
    except MemoryError:
        from participation.budget import ENV_MEMORY

        _say(f"fedverify: error: out of memory; choose smaller sizes (the command's own limit is set by {ENV_MEMORY})",
             sys.stderr)
        return 2
    except KeyboardInterrupt:
        _say("fedverify: interrupted", sys.stderr)
        return 130
    except Exception as err:          # the user's plugin code may raise anything: name it in one line
        from algorithms.registry import plugin_frame

        where = plugin_frame(err.__traceback__)
        if where is None or "--traceback" in (argv if argv is not None else sys.argv[1:]):
            raise
        spec, function, filename, line = where
        message = (f"plugin {spec} raised {type(err).__name__}: {one_line(err)} (in {function}, {filename}:{line}); "
                   "fedverify --traceback ... shows the traceback")
        _say(f"fedverify: error: {_cut(message)}", sys.stderr)
        return 2
    if sys.stdout is None:        # started with its standard output closed
        _say("fedverify: error: cannot write the output (standard output is closed)", sys.stderr)
        return 2
    try:
        _say(output, sys.stdout)
        sys.stdout.flush()
    except BrokenPipeError:       # the reader has gone (``| head``): a quiet end, for every command
        stdout_to_devnull()
    except OSError as err:        # a full disk, a closed descriptor: say so once, on stderr
        stdout_to_devnull()
        _say(f"fedverify: error: cannot write the output ({err.strerror or type(err).__name__})", sys.stderr)
        return 2
    return 0


def _cut(line: str) -> str:
    return line if len(line) <= MAX_ERROR_CHARS else line[:MAX_ERROR_CHARS] + "…"


def _say(text: str, stream) -> None:
    """Print ``text``; characters the stream cannot encode (an undecodable file name from
    the command line arrives as a lone surrogate) are written as backslash escapes."""
    try:
        print(text, file=stream)
    except UnicodeEncodeError:
        encoding = getattr(stream, "encoding", None) or "utf-8"
        print(text.encode(encoding, "backslashreplace").decode(encoding, "replace"), file=stream)
