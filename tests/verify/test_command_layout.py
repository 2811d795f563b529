"""The command line's layout: the commands are listed once (``verify.cli.COMMANDS``), each is one
module of ``verify.cli.commands`` that declares its options beside its ``run``, ``--help`` of every
command imports no numerics, and library modules leave the command line's ``UsageError`` to
the command layer."""
import argparse
import ast
import pkgutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

import verify.cli.commands
from verify import cli
from verify.cli import COMMANDS, build_parser, command_module, main

ROOT = Path(__file__).resolve().parents[2]

#: Modules ``--help`` must not import: the numerics, and the sweep's runner.
HEAVY = ("numpy", "torch", "scipy", "sympy", "matplotlib", "participation", "verify.sweep.runner", "verify.theorems")


def _subparsers(parser):
    """The sub-parser of each command of ``parser``, by name, in the order they were added."""
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return action


def _options(parser) -> list:
    """What a parser takes: option strings, or the dest of a positional, in order."""
    return [tuple(a.option_strings) or a.dest for a in parser._actions]


def _loaded_by(argv) -> tuple[list[str], str]:
    """(the HEAVY modules loaded, stdout) after ``main(argv)`` in a fresh interpreter."""
    code = ("import contextlib, io, sys\nfrom verify.cli import main\nout = io.StringIO()\n"
            f"with contextlib.redirect_stdout(out):\n    try:\n        main({argv!r})\n    except SystemExit:\n        pass\n"
            f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\nprint(out.getvalue())")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    loaded, _, shown = result.stdout.partition("\n")
    return loaded, shown


@pytest.mark.parametrize("argv", [["--help"]] + [[name, "--help"] for name in COMMANDS], ids=" ".join)
def test_help_of_every_command_imports_no_numerics(argv):
    """Every command's --help answers at once: not numpy, nor the sweep, nor the other numerics
    (test_cli checks --help, check, sweep and bound --list; this is every entry of COMMANDS)."""
    loaded, shown = _loaded_by(argv)
    assert loaded == "[]"
    assert shown.startswith(f"usage: fedverify {argv[0] if len(argv) > 1 else ''}".rstrip())


@pytest.mark.parametrize("name", COMMANDS)
def test_every_command_is_one_module_with_its_options_and_run(name):
    module = command_module(name)
    assert module.__name__ == f"verify.cli.commands.{name.replace('-', '_')}"
    assert isinstance(module.HELP, str) and module.HELP
    assert callable(module.add_arguments) and callable(module.run)


def test_the_parser_lists_the_commands_of_the_table_in_order():
    commands = _subparsers(build_parser())
    assert list(commands.choices) == list(COMMANDS)
    assert [a.help for a in commands._choices_actions] == [command_module(n).HELP for n in COMMANDS]


@pytest.mark.parametrize("name", COMMANDS)
def test_a_commands_options_are_the_ones_its_module_declares(name):
    """The sub-parser holds what the module's add_arguments declares, and nothing else."""
    declared = argparse.ArgumentParser()
    command_module(name).add_arguments(declared)
    assert _options(_subparsers(build_parser()).choices[name]) == _options(declared)


def test_the_top_level_parser_holds_only_the_global_options():
    parser = build_parser()
    assert {s for a in parser._actions for s in a.option_strings} == {"-h", "--help", "--traceback"}


def test_every_module_with_run_is_a_listed_command():
    """A command module left out of COMMANDS would be unreachable; helper modules have no ``run``."""
    modules = [m.name for m in pkgutil.iter_modules(verify.cli.commands.__path__)]
    runnable = {m for m in modules if hasattr(command_module(m), "run")}
    assert runnable == {name.replace("-", "_") for name in COMMANDS}


def _hello_module():
    """A command written as one module: its help line, its options and its run."""
    module = types.ModuleType("verify.cli.commands.hello")
    module.HELP = "say hello"
    module.add_arguments = lambda parser: parser.add_argument("--name", default="world", help="whom to greet")
    module.run = lambda args: f"hello {args.name}"
    return module


def test_a_new_command_is_one_module_and_one_entry_of_the_table(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "verify.cli.commands.hello", _hello_module())
    monkeypatch.setattr(cli, "COMMANDS", (*COMMANDS, "hello"))
    assert main(["hello", "--name", "you"]) == 0
    assert capsys.readouterr().out == "hello you\n"
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "say hello" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["hello", "--help"])
    assert "whom to greet" in capsys.readouterr().out


def _library_modules():
    """The modules of ``verify`` outside the command layer (``verify/cli``)."""
    package = ROOT / "verify"
    return sorted(p for p in package.rglob("*.py") if "cli" not in p.relative_to(package).parts)


def _raises_usage_error(path: Path) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call)
               and getattr(node.exc.func, "id", getattr(node.exc.func, "attr", None)) == "UsageError"
               for node in ast.walk(tree))


def _library_params() -> list:
    return [pytest.param(path, id=str(path.relative_to(ROOT / "verify"))) for path in _library_modules()]


@pytest.mark.parametrize("path", _library_params())
def test_library_modules_do_not_raise_the_command_lines_error(path):
    """The library raises ValueError (or its own type, such as SweepError); only the command
    layer speaks in UsageError, and reports either the same way: one line, exit 2."""
    assert not _raises_usage_error(path)


def test_the_command_layer_reports_a_libraries_value_error_as_a_usage_error(monkeypatch, capsys):
    """A ValueError from the library is the same one line as a UsageError: nothing is lost by
    raising ValueError outside the command layer."""
    def refuse(args):
        raise ValueError("the spec has 3 cells, more than the limit of 2")

    monkeypatch.setattr(command_module("sweep"), "run", refuse)
    assert main(["sweep", "spec.toml"]) == 2
    assert capsys.readouterr().err == "fedverify: error: the spec has 3 cells, more than the limit of 2\n"
