"""Ctrl-C before a command has started (while the command line is imported or its parser built)
ends in the same one line as any other interrupt: "fedverify: interrupted", exit 130."""
import importlib
import sys

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
