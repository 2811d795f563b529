"""The ``flwr run`` App entry: :func:`run_app` runs a Flower App directory with ``flwr run APP local
--stream`` (a local SuperLink in simulation mode on a Flower home and ports of its own, stopped
afterwards), :func:`format_run_config` writes ``--run-config`` values in Flower's TOML syntax, and a
run ends as an :class:`AppRun` or a one-line :class:`FlowerRunError` carrying Flower's reason.
"""
from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import json
import numbers
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path

import numpy as np
from participation.validation import finite_real, integer, quote

from .dependency import INSTALL_HINT, require_flower
from .processes import flower_processes, stop_processes


#: Flower's documentation of what :func:`run_app` runs.
FLWR_RUN_DOCS = "https://flower.ai/docs/framework/ref-api-cli.html#flwr-run"
SIMULATION_DOCS = "https://flower.ai/docs/framework/how-to-run-simulations.html"

_RUN_CONFIG_KEY = re.compile(r"[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*\Z")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_TOML_INT = (-2 ** 63, 2 ** 63 - 1)
_STARTED_RUN = re.compile(r"Successfully started run (\d+)")


@dataclasses.dataclass(frozen=True)
class AppRun:
    """A finished ``flwr run`` (:func:`run_app`): ``log``, what the CLI printed (the run's log,
    streamed with ``--stream``; colour codes removed), ``seconds``, the wall time of the command
    (the SuperLink's start-up included), and ``command``, the command line."""
    log: str
    seconds: float
    command: tuple[str, ...]


class FlowerRunError(RuntimeError):
    """A ``flwr run`` that failed or ran past its timeout; the message is one line ending with the
    last meaningful line of Flower's log, ``log`` holds the whole log and ``returncode`` the CLI's
    exit status (None when it was stopped at the timeout)."""

    def __init__(self, message: str, log: str, returncode: int | None):
        super().__init__(message)
        self.log, self.returncode = log, returncode


def _toml_value(key: str, value) -> str:
    """``value`` as a TOML value Flower's ``--run-config`` parser reads back unchanged."""
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, numbers.Integral):
        if not _TOML_INT[0] <= int(value) <= _TOML_INT[1]:
            raise ValueError(f"run_config[{key!r}] = {int(value)} is outside TOML's 64-bit integers")
        return str(int(value))
    if isinstance(value, numbers.Real):
        return repr(float(value))                  # 0.5, 1e-05, inf, -inf, nan: all TOML floats
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        raise ValueError(f"run_config[{key!r}] is a {type(value).__name__}; Flower's run config takes a bool, "
                         "an int, a float or a str")
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in value):
        raise ValueError(f"run_config[{key!r}] = {quote(value)} holds a control character (a newline?), which "
                         "Flower's --run-config cannot carry")
    if "'" not in value:
        return f"'{value}'"                        # a TOML literal string: backslashes stay as they are
    if '"' not in value:
        return '"' + value.replace("\\", "\\\\") + '"'
    raise ValueError(f"run_config[{key!r}] = {quote(value)} holds both ' and \", which Flower's --run-config "
                     "cannot quote")


def format_run_config(run_config: Mapping) -> str:
    """``run_config`` ({key: bool, int, float, str or path}) in the syntax of ``flwr run
    --run-config``: space-separated ``key=value`` pairs whose values are TOML (strings quoted,
    numbers bare, booleans ``true``/``false``), e.g. ``{"seeds": 1, "strategy": "fedavg"}`` →
    ``seeds=1 strategy='fedavg'``. Keys are TOML bare keys (letters, digits, ``-``, ``_``; ``.``
    between the parts of a nested key). A key or value Flower's parser cannot read back is a
    one-line ValueError naming it."""
    if not isinstance(run_config, Mapping):
        raise ValueError(f"run_config must be a dict of keys to values, got {type(run_config).__name__}")
    pairs = []
    for key, value in run_config.items():
        if not isinstance(key, str) or not _RUN_CONFIG_KEY.match(key):
            raise ValueError(f"run_config key {key!r} is not one Flower's --run-config can parse: use letters, digits, "
                             "'-' and '_' ('.' between the parts of a nested key)")
        pairs.append(f"{key}={_toml_value(key, value)}")
    return " ".join(pairs)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _last_meaningful_line(log: str) -> str:
    """What ended the run, from its log: the exception line of the last traceback, else the last
    ``ERROR`` line, else the last line that says something (not blank, not only box drawing)."""
    lines = [line.rstrip() for line in log.splitlines()]
    tracebacks = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")]
    if tracebacks:
        for line in lines[tracebacks[-1] + 1:]:
            if line and not line[0].isspace():
                return line.strip()
    errors = [line for line in lines if line.startswith("ERROR")]
    for line in reversed(errors or lines):
        text = line.strip().strip("│║╭╮╰╯─═ ").strip()
        if any(ch.isalnum() for ch in text):
            return text
    return "it printed nothing"


def _run_status(flwr: Path, run_id: int, env: dict, deadline: float) -> tuple[str, str]:
    """(status, details) of run ``run_id`` as the SuperLink reports it (``flwr ls --run-id``),
    waiting up to ``deadline`` for the run to finish. (Where the SuperLink has gone, ``flwr ls
    local`` starts another on the same home and ports; :func:`run_app` stops that one too.)"""
    while True:
        try:
            done = subprocess.run([str(flwr), "ls", "local", "--run-id", str(run_id), "--format", "json"], env=env,
                                  stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                  timeout=max(5.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            return "unknown", "flwr ls did not answer"
        try:
            run = json.loads(_ANSI.sub("", done.stdout))["runs"][0]
            status, details = str(run["status"]), str(run.get("status-details") or "")
        except (ValueError, KeyError, IndexError, TypeError):
            status, details = "unknown", _last_meaningful_line(_ANSI.sub("", done.stdout + done.stderr))
        if status.startswith("finished") or status == "unknown" or time.monotonic() > deadline:
            return status, details
        time.sleep(0.2)


def _flwr_executable() -> Path:
    bin_dir = Path(sys.executable).parent
    for name in ("flwr", "flwr.exe"):
        if (bin_dir / name).is_file():
            return bin_dir / name
    raise ModuleNotFoundError(f"Flower's flwr command is not beside {sys.executable}: {INSTALL_HINT}", name="flwr")


def run_app(app_dir, *, run_config: Mapping | None = None, num_supernodes: int, cpus: int | None = None,
            client_cpus: int = 1, timeout: float = 600, flower_home=None, quiet: bool = True) -> AppRun:
    """Run the Flower App in ``app_dir`` (a directory with its ``pyproject.toml``) as Flower runs
    Apps: ``flwr run APP_DIR local --stream --run-config ... --federation-config
    "num-supernodes=N client-resources-num-cpus=C init-args-num-cpus=CPUS"``, the ``flwr``
    command beside this Python, in a subprocess. ``local`` is the connection of Flower's default
    configuration: the CLI starts a SuperLink in simulation mode (the Simulation Runtime, on
    Ray), submits the App, streams its log and returns when the run ends. Returns an
    :class:`AppRun`. Flower's documentation: ``flwr run``, its ``--run-config`` and
    ``--federation-config``, https://flower.ai/docs/framework/ref-api-cli.html#flwr-run
    (:data:`FLWR_RUN_DOCS`); the simulation settings (``num-supernodes``,
    ``client-resources-num-cpus``, ``init-args-num-cpus``),
    https://flower.ai/docs/framework/how-to-run-simulations.html (:data:`SIMULATION_DOCS`).

    * ``run_config``: overrides of the App's ``[tool.flwr.app.config]``, written with
      :func:`format_run_config`; Flower refuses a key the App does not have, and the run fails.
    * ``num_supernodes``: N virtual SuperNodes (node i has ``partition-id`` i);
      ``cpus``: the CPUs Ray may use (default: those this process may use); ``client_cpus``:
      CPUs per ClientApp, a whole number as Flower's federation config takes it, so
      cpus // client_cpus ClientApps run at once.
    * ``flower_home``: the ``FLWR_HOME`` of the run (Flower writes its ``config.toml`` there and
      the SuperLink its database and log under ``local-superlink/``); default a temporary
      directory, removed afterwards. The SuperLink listens on two free ports
      (``FLWR_LOCAL_SUPERLINK_HTTP_API_PORT``, ``FLWR_LOCAL_CONTROL_API_PORT``), so a run never
      reaches a SuperLink that was already running.
    * The subprocess has Flower's telemetry, its update check and Ray's usage statistics off
      (``FLWR_TELEMETRY_ENABLED=0``, ``FLWR_DISABLE_UPDATE_CHECK=1``,
      ``RAY_USAGE_STATS_ENABLED=0``) and the directory holding fedverify's packages first on
      ``PYTHONPATH``, so that the App can import them.
    * The CLI leaves the SuperLink running, as Flower intends; ``run_app`` stops it, and the
      processes it started, whether the run succeeded, failed or timed out: those of
      :func:`flower_processes` for the Flower home that were not running before. The CLI runs in
      a session of its own, whose process group is killed at the timeout.
    * ``quiet``: when False, the log is also printed as it comes.

    The run's outcome is the SuperLink's status of it (``flwr ls --run-id``, read before the
    SuperLink is stopped), since the CLI exits with 0 also when the ServerApp raised. A run that
    did not end ``finished:completed``, a CLI that exits with another status and a run still
    going after ``timeout`` seconds are a :class:`FlowerRunError` (a RuntimeError) whose one-line
    message ends with the last meaningful line of Flower's log (the exception that ended the run,
    where there is one); the whole log is its ``log``. Bad arguments are a one-line
    ValueError naming the value; a missing Flower or Ray the one-line ModuleNotFoundError of
    :func:`require_flower`."""
    app = Path(app_dir).expanduser()
    if not (app / "pyproject.toml").is_file():
        raise ValueError(f"app_dir {str(app_dir)!r} has no pyproject.toml: it is not a Flower App directory")
    nodes = integer(num_supernodes, "num_supernodes")
    if cpus is None:
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    cpus = integer(cpus, "cpus")
    if isinstance(client_cpus, float) and client_cpus.is_integer():
        client_cpus = int(client_cpus)
    client_cpus = integer(client_cpus, "client_cpus")
    if client_cpus > cpus:
        raise ValueError(f"client_cpus = {client_cpus} is more than cpus = {cpus}: no ClientApp could run")
    timeout = finite_real(timeout, "timeout", above=0)
    overrides = format_run_config(run_config) if run_config else ""
    require_flower()
    if importlib.util.find_spec("ray") is None:
        raise ModuleNotFoundError("Flower's simulation engine needs Ray: install with pip install \"flwr[simulation]\"",
                                  name="ray")
    flwr = _flwr_executable()
    command = [str(flwr), "run", str(app.resolve()), "local", "--stream"]
    if overrides:
        command += ["--run-config", overrides]
    command += ["--federation-config",
                f"num-supernodes={nodes} client-resources-num-cpus={client_cpus} init-args-num-cpus={cpus}"]
    root = str(Path(__file__).resolve().parents[3])          # the directory holding verify/, participation/, ...
    with contextlib.ExitStack() as stack:
        home = Path(flower_home).expanduser().resolve() if flower_home is not None else \
            Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="fedverify-flwr-home-",
                                                                 ignore_cleanup_errors=True)))
        home.mkdir(parents=True, exist_ok=True)
        env = {**{k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "CLICOLOR_FORCE")},
               "NO_COLOR": "1", "FLWR_HOME": str(home),
               "PATH": os.pathsep.join(filter(None, [str(flwr.parent), os.environ.get("PATH")])),
               "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])),
               "FLWR_TELEMETRY_ENABLED": "0", "FLWR_DISABLE_UPDATE_CHECK": "1", "RAY_USAGE_STATS_ENABLED": "0",
               "FLWR_LOCAL_SUPERLINK_HTTP_API_PORT": str(_free_port()),
               "FLWR_LOCAL_CONTROL_API_PORT": str(_free_port())}
        before = flower_processes(home)
        lines: list[str] = []
        started = time.perf_counter()
        cli = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, encoding="utf-8", errors="replace",
                               start_new_session=True)

        def read():
            for line in cli.stdout:
                line = _ANSI.sub("", line)
                lines.append(line)
                if not quiet:
                    sys.stdout.write(line)
                    sys.stdout.flush()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        deadline = time.monotonic() + timeout
        returncode, status, details = None, None, ""
        try:
            returncode = cli.wait(timeout=timeout)
            seconds = time.perf_counter() - started
            reader.join(timeout=10)
            started_run = _STARTED_RUN.search("".join(lines))
            if returncode == 0 and started_run:     # the CLI exits 0 whether the run completed or failed
                status, details = _run_status(flwr, int(started_run.group(1)), env, deadline)
        except subprocess.TimeoutExpired:
            pass
        finally:
            if cli.poll() is None:
                if os.name == "posix":
                    with contextlib.suppress(OSError):
                        os.killpg(cli.pid, signal.SIGKILL)
                else:
                    cli.kill()
                cli.wait()
            stop_processes(flower_processes(home) - before)
            reader.join(timeout=10)
    log = "".join(lines)
    if returncode is None:
        raise FlowerRunError(f"flwr run did not finish within {timeout:g} s; its last line: "
                             f"{_last_meaningful_line(log)}", log, None)
    if returncode != 0:
        raise FlowerRunError(f"flwr run failed (exit status {returncode}): {_last_meaningful_line(log)}", log,
                             returncode)
    if status is None:
        raise FlowerRunError(f"flwr run started no run: {_last_meaningful_line(log)}", log, returncode)
    if status == "unknown":
        raise FlowerRunError(f"the SuperLink did not say how the run ended: {details}", log, returncode)
    if not status.startswith("finished"):
        raise FlowerRunError(f"the Flower run was still {status} after {timeout:g} s: {_last_meaningful_line(log)}",
                             log, returncode)
    if status != "finished:completed":
        reason = _last_meaningful_line(log) if status == "finished:failed" or not details else details
        raise FlowerRunError(f"the Flower run ended {status}: {reason}", log, returncode)
    return AppRun(log=log, seconds=seconds, command=tuple(command))
