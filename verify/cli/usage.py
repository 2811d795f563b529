"""The error a command reports in one line, and how any error becomes that line."""
from __future__ import annotations


class UsageError(Exception):
    """A bad command line or input; reported in one line with exit code 2."""


def one_line(err: Exception) -> str:
    if isinstance(err, OSError):
        where = f": {err.filename}" if err.filename else ""
        return f"{err.strerror or type(err).__name__}{where}"
    return " ".join(str(err).split())
