"""Files written whole or not at all, and JSON read strictly.

``atomic_write(path, write)`` calls ``write(f)`` on a temporary file of its own beside
``path`` (a unique name per call, so two threads saving one path never share it), then
renames it onto ``path``: a reader never sees half a file. The file gets the mode a plain
``open(path, "w")`` would give it (``mkstemp`` alone gives 0600).

``strict_json(text)`` parses JSON as every loader of the toolkit reads it: a key twice in one
object, NaN or Infinity, an integer beyond any float (above about 1.8e308) and nesting deeper
than the parser can follow are each a one-line ValueError, never a silent "last key wins", an
OverflowError later or a RecursionError.
"""
from __future__ import annotations

import io
import json
import os
import stat
import sys
import tempfile
from pathlib import Path
from typing import Callable

__all__ = ["atomic_write", "plain_write_mode", "strict_json", "FLOAT_DIGITS"]

#: Integer literals up to this many digits are read and then tested against the largest float
#: (about 1.8e308); longer ones are refused unread.
FLOAT_DIGITS = 309


def _unique_keys(pairs) -> dict:
    doc = {}
    for key, value in pairs:
        if key in doc:
            raise ValueError(f"key {key[:40]!r}{'…' if len(key) > 40 else ''} appears twice in one object")
        doc[key] = value
    return doc


def _integer(literal: str) -> int:
    digits = len(literal.lstrip("-"))
    value = int(literal) if digits <= FLOAT_DIGITS else None
    if value is None or abs(value) > _LARGEST_FLOAT:
        raise ValueError(f"the integer {literal[:12]}… has {digits} digits, beyond any float")
    return value


#: The largest finite float as an int (integers above it overflow a float).
_LARGEST_FLOAT = int(sys.float_info.max)


def _no_constant(name: str):
    raise ValueError(f"{name} is not a number JSON allows")


def strict_json(text):
    """The JSON document ``text`` (str or UTF-8 bytes), read strictly (see the module docstring);
    a malformed document is a ValueError with the parser's message and line."""
    try:
        return json.loads(text, object_pairs_hook=_unique_keys, parse_int=_integer, parse_constant=_no_constant)
    except RecursionError:
        raise ValueError("nested deeper than the JSON parser can follow") from None
    except json.JSONDecodeError as err:
        raise ValueError(f"invalid JSON ({err.msg} at line {err.lineno})") from None
    except UnicodeDecodeError:
        raise ValueError("not UTF-8 text") from None


def _umask() -> int:
    """The process umask, read without changing it where the system tells it."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def plain_write_mode(path: Path) -> int:
    """The permission bits a plain ``open(path, "w")`` would leave: the existing file's
    mode when it exists, else 0o666 less the umask."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return 0o666 & ~_umask()


def atomic_write(path, write: Callable[[io.IOBase], None], *, binary: bool = False, make_parents: bool = True) -> Path:
    """Call ``write(f)`` on a temporary file beside ``path``, then rename it to ``path``
    (creating the parent folders unless ``make_parents`` is False)."""
    path = Path(path)
    try:
        if make_parents:
            path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as err:            # named by the file asked for, not by the temporary one beside it
        raise OSError(err.errno, err.strerror or str(err), str(path)) from None
    try:
        os.chmod(tmp, plain_write_mode(path))
        with os.fdopen(fd, "wb" if binary else "w", **({} if binary else {"encoding": "utf-8", "newline": ""})) as f:
            write(f)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
