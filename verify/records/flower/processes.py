"""The processes of a Flower home: finding those that belong to it (by command line, or on Linux by
``FLWR_HOME`` in their environment) and stopping them, SIGTERM and then SIGKILL after a grace period.
"""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path


def _command_lines():
    """(pid, command line, environment or None) of the processes this one can see: from
    ``/proc`` on Linux (the environment included), else psutil where installed, else ``ps``."""
    proc = Path("/proc")
    if proc.is_dir():
        for entry in proc.iterdir():
            if entry.name.isdigit():
                try:
                    command = (entry / "cmdline").read_bytes()
                except OSError:
                    continue
                try:
                    environ = (entry / "environ").read_bytes()
                except OSError:
                    environ = None
                yield int(entry.name), command.replace(b"\0", b" ").decode(errors="replace"), environ
        return
    try:
        import psutil
    except ImportError:
        psutil = None
    if psutil is not None:
        for p in psutil.process_iter(["pid", "cmdline"]):
            yield p.info["pid"], " ".join(p.info["cmdline"] or ()), None
        return
    if os.name == "posix":
        try:
            listing = subprocess.run(["ps", "-A", "-o", "pid=", "-o", "args="], capture_output=True, text=True,
                                     timeout=30).stdout
        except (OSError, subprocess.SubprocessError):
            return
        for line in listing.splitlines():
            pid, _, command = line.strip().partition(" ")
            if pid.isdigit():
                yield int(pid), command, None


def flower_processes(home) -> set[int]:
    """The ids of the processes that belong to the Flower home ``home``: those whose command line
    names it (the SuperLink ``flwr run`` starts logs to ``home/local-superlink``) or, on Linux,
    whose environment sets ``FLWR_HOME`` to it (the ServerApp and simulation processes it starts);
    this process excluded."""
    text = str(home)
    variable = f"\0FLWR_HOME={text}\0".encode()
    found = set()
    for pid, command, environ in _command_lines():
        if pid == os.getpid():
            continue
        if text in command or (environ is not None and variable in b"\0" + environ + b"\0"):
            found.add(pid)
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True                                 # exists, owned by someone else
    if Path("/proc").is_dir():                      # a zombie has exited: its state is Z
        with contextlib.suppress(OSError):
            return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    return True


def stop_processes(pids, grace: float = 5.0) -> None:
    """SIGTERM to each of ``pids``, then SIGKILL to those still running after ``grace`` seconds."""
    pids = set(pids)
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while (pids := {pid for pid in pids if _alive(pid)}) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, getattr(signal, "SIGKILL", signal.SIGTERM))
