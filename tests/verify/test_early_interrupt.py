"""Ctrl-C before a command has started (while the command line is imported or its parser built)
ends in the same one line as any other interrupt: "fedverify: interrupted", exit 130; during long
work it is honoured between bounded chunks of it, and leaves no output behind."""
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

import verify.cli as cli
from verify import entry


def test_an_interrupt_while_the_parser_is_built(monkeypatch, capsys):
    def interrupted():
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "build_parser", interrupted)
    assert cli.main(["check", "--help"]) == 130
    assert capsys.readouterr().err == "fedverify: interrupted\n"


class _InterruptImport:
    """A meta-path finder that interrupts the import of verify.cli, as a Ctrl-C then would."""

    def find_spec(self, name, path=None, target=None):
        if name == "verify.cli":
            raise KeyboardInterrupt
        return None


def test_an_interrupt_while_the_command_line_is_imported(monkeypatch, capsys):
    monkeypatch.delitem(sys.modules, "verify.cli")
    monkeypatch.delattr(importlib.import_module("verify"), "cli", raising=False)
    monkeypatch.setattr(sys, "meta_path", [_InterruptImport(), *sys.meta_path])
    assert entry.main(["bound", "--list"]) == 130
    assert capsys.readouterr().err == "fedverify: interrupted\n"


def test_the_console_command_is_the_entry():
    from importlib.metadata import entry_points

    (script,) = [e for e in entry_points(group="console_scripts") if e.name == "fedverify"]
    assert script.value == "verify.entry:main"


# ------------------------------------------------------------------ Ctrl-C during long work
# A Ctrl-C lands in Python's handler only between calls into torch: one autograd call over every
# client's data (the CNN's Hessian-vector products took ~10 s in one call) cannot be stopped. The
# full-data evaluations of the CNNs therefore go in passes of at most _PASS_POSITIONS padded
# sample positions, and an interrupt is honoured at the end of the pass in flight.

ROOT = Path(__file__).resolve().parents[2]


def _spy_passes(monkeypatch, classifier):
    """The padded sample positions (clients × positions) of every vmapped pass of the classifier."""
    seen = []
    original = classifier.vmap

    def spy(fn, in_dims):
        batched = original(fn, in_dims=in_dims)

        def call(*args):
            seen.append(args[-3].shape[0] * args[-3].shape[1])
            return batched(*args)
        return call

    monkeypatch.setattr(classifier, "vmap", spy)
    return seen


@pytest.mark.slow
def test_full_data_evaluations_of_the_cnn_go_in_bounded_passes(monkeypatch):
    import torch

    import algorithms.problems.classifier as classifier
    from verify.choices import build_problem
    from verify.constants import hessian_spectral_norms

    problem = build_problem("cnn-digits", 20)
    seen = _spy_passes(monkeypatch, classifier)
    x = problem.x0
    rows = torch.arange(45) % problem.n_clients
    before = problem.grads_at(x.expand(45, -1), rows)
    problem.client_grads(x)
    problem.hessian_norms(x, 1)
    hessian_spectral_norms(problem, torch.stack([x, 0.9 * x]), iters=1, method="autograd")
    assert len(seen) > 4 and max(seen) <= classifier._PASS_POSITIONS
    monkeypatch.setattr(classifier, "_PASS_POSITIONS", 10**9)          # one pass: the same numbers
    assert torch.equal(problem.grads_at(x.expand(45, -1), rows), before)


#: Runs ``fedverify check`` on the CNN; a thread sends SIGINT to the process 50 ms into the first
#: vmapped pass. Prints the exit code, the positions of every pass started and how many had
#: started when the signal was sent.
_INTERRUPTED_CHECK = '''
import json, os, signal, sys, threading, time
signal.signal(signal.SIGINT, signal.default_int_handler)      # also when started with SIGINT ignored
import algorithms.problems.classifier as classifier
from verify.cli import main

passes, sent = [], []
original = classifier.vmap

def interrupt():
    time.sleep(0.05)
    sent.append(len(passes))
    os.kill(os.getpid(), signal.SIGINT)

def spy(fn, in_dims):
    batched = original(fn, in_dims=in_dims)
    def call(*args):
        passes.append(args[-3].shape[0] * args[-3].shape[1])
        if len(passes) == 1:
            threading.Thread(target=interrupt).start()
        return batched(*args)
    return call

classifier.vmap = spy
rc = main(sys.argv[1:])
sys.stdout.write(json.dumps({"rc": rc, "passes": passes, "sent": sent, "limit": classifier._PASS_POSITIONS}))
'''


@pytest.mark.slow
def test_an_interrupt_during_the_cnn_constants_stops_at_the_next_pass(tmp_path):
    """check --problem cnn-digits estimates the CNN's constants (power iteration on Hessian-vector
    products over every client's data) before its runs: a Ctrl-C there ends in one line, exit 130,
    with no output written, once the pass in flight (a bounded one) returns."""
    output = tmp_path / "out"
    done = subprocess.run([sys.executable, "-c", _INTERRUPTED_CHECK, "check", "--problem", "cnn-digits",
                           "--constants", "problem", "--no-progress", "-o", str(output)],
                          capture_output=True, text=True, cwd=ROOT, timeout=600)
    result = json.loads(done.stdout)
    assert result["rc"] == 130 and done.stderr == "fedverify: interrupted\n", done.stderr
    assert result["sent"] and len(result["passes"]) - result["sent"][0] <= 1      # no pass begun after the signal
    assert max(result["passes"]) <= result["limit"]
    assert not output.exists() or not any(output.iterdir())
