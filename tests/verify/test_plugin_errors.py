"""A user's plugin that raises while a command runs: one line naming the plugin, the function,
the file and the line (exit 2); ``fedverify --traceback`` shows the whole traceback instead. An
error in fedverify itself is not disguised as a plugin's."""
import textwrap

import pytest

from verify.cli import main

PLUGIN = textwrap.dedent('''
    from verify.theorems import register, user_theorem

    def exploding(constants, tau_max):
        return 1 / 0

    def measure(history, problem):
        return {}["missing"]

    register(user_theorem(exploding, name="mine.exploding", covers=("fedavg",)))
    register(user_theorem(lambda constants, tau_max: 100.0, name="mine.measure", covers=("fedavg",), measure=measure))
''')
RUN = ["--algorithms", "fedavg", "--patterns", "P1", "-T", "10", "-N", "4", "-K", "1", "--seeds", "2", "--no-progress"]


@pytest.fixture
def plugin(tmp_path):
    path = tmp_path / "my_theorems.py"
    path.write_text(PLUGIN)
    yield path
    from verify import theorems

    for name in ("mine.exploding", "mine.measure"):
        theorems.THEOREMS.pop(name, None)


@pytest.mark.parametrize("theorem, error, function, line", [("mine.exploding", "ZeroDivisionError", "exploding", 5),
                                                            ("mine.measure", "KeyError", "measure", 8)])
def test_a_plugin_that_raises_is_one_line(plugin, tmp_path, capsys, theorem, error, function, line):
    argv = ["check", "--theorem", theorem, "--plugin", str(plugin), *RUN, "-o", str(tmp_path / "out")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"fedverify: error: plugin {plugin} raised {error}")
    assert f"(in {function}, {plugin}:{line})" in err and "--traceback" in err


def test_traceback_flag_shows_the_traceback(plugin, tmp_path):
    argv = ["--traceback", "check", "--theorem", "mine.exploding", "--plugin", str(plugin), *RUN,
            "-o", str(tmp_path / "out")]
    with pytest.raises(ZeroDivisionError):
        main(argv)


def test_an_error_outside_the_plugin_is_not_named_as_the_plugins(plugin, tmp_path, monkeypatch):
    import verify.cli.commands.check as check_command

    def broken(*args, **kwargs):
        raise RuntimeError("an internal fault")

    monkeypatch.setattr(check_command, "_announce_check", broken)
    with pytest.raises(RuntimeError, match="internal fault"):
        main(["check", "--theorem", "mine.exploding", "--plugin", str(plugin), *RUN, "-o", str(tmp_path / "out")])
