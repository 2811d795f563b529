"""Argument types and options that several commands declare.

A type turns one command-line word into a value or raises ``argparse.ArgumentTypeError``,
which the parser reports as a usage error in one line. Importing this module is cheap
(no numpy), since every command's options are declared when ``--help`` is asked for.
"""
from __future__ import annotations

import argparse
import math

#: The most worker processes a command starts.
MAX_PROCESSES = 4096

PLUGIN_HELP = ("import a module (dotted name) or a .py file that calls algorithms.register(MyAlgorithm), "
               "so --algorithms can name it; repeatable. Installed packages can instead declare an entry "
               "point in the group 'fedverify.algorithms'")


def _quote(text: str) -> str:
    from participation.validation import quote      # on a bad argument only: --help imports no numpy

    return quote(text)


def path(text):
    """A file or folder argument: an empty one is refused (it would silently mean the
    current folder, or be ignored), as is one holding a NUL character."""
    from participation.validation import path_text

    try:
        return path_text(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def positive(kind):
    """The type of a positive, finite ``kind`` (int or float)."""
    def parse(text):
        try:
            value = kind(text)
        except (ValueError, OverflowError):
            noun = "an integer" if kind is int else "a number"
            raise argparse.ArgumentTypeError(f"expected {noun}, got {_quote(text)}") from None
        if not value > 0 or not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be positive, got {text}")
        return value
    return parse


def processes(text):
    """A positive process count, at most :data:`MAX_PROCESSES`."""
    value = positive(int)(text)
    if value > MAX_PROCESSES:
        raise argparse.ArgumentTypeError(f"at most {MAX_PROCESSES} processes, got {_quote(text)}")
    return value


def seed(text):
    """A non-negative integer seed."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer seed, got {_quote(text)}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"seed must be non-negative, got {text}")
    return value


def real(text):
    """A finite number."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {_quote(text)}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be finite, got {text}")
    return value


def add_plugin(parser) -> None:
    """``--plugin MODULE|FILE.py``, repeatable: a user's algorithms for --algorithms."""
    parser.add_argument("--plugin", action="append", type=path, default=[], metavar="MODULE|FILE.py", help=PLUGIN_HELP)


def add_no_progress(parser) -> None:
    """``--no-progress``: the progress bar off."""
    parser.add_argument("--no-progress", action="store_true", help="no progress bar (it shows only on a terminal anyway)")


def add_confidence(parser) -> None:
    """``--confidence``: the one-sided confidence of a verdict."""
    parser.add_argument("--confidence", type=float, default=0.95, help="one-sided confidence of the verdict (default 0.95)")
