"""An output that cannot be written is named as the user wrote it and refused before any work:
``check-run --json`` into a pseudo file system or a folder, and an atomic write whose folder
refuses the temporary file (named by the file asked for, not by the temporary one)."""
import pytest

from participation.files import atomic_write
from verify.cli import main


@pytest.mark.parametrize("target, words", [("/proc/out.json", "--json '/proc/out.json': its folder '/proc' cannot be "
                                                              "written to"),
                                           (".", "is a folder; give a file name")])
def test_check_run_refuses_an_unwritable_json_before_reading_records(tmp_path, capsys, target, words):
    assert main(["check-run", str(tmp_path / "missing.jsonl"), "--json", target]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err


def test_an_atomic_write_names_the_file_asked_for(tmp_path):
    with pytest.raises(OSError) as err:
        atomic_write("/proc/nowhere/out.json", lambda f: f.write("x"))
    assert err.value.filename == "/proc/nowhere/out.json" and ".tmp" not in str(err.value)


def _fifo(tmp_path):
    import os

    path = tmp_path / "pipe"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize("command", [["worst-case", "fedsum-b"], ["check-run", "RECORD"]])
def test_json_never_replaces_a_pipe_or_an_input(tmp_path, capsys, command):
    record = tmp_path / "run.jsonl"
    record.write_text('{"format": "fedverify-run", "version": 2, "n_clients": 3, "local_steps": 1}\n'
                      '{"round": 0, "selected": [0], "replied": [0], "grad_norm2": 1.0}\n')
    argv = [str(record) if a == "RECORD" else a for a in command]
    pipe = _fifo(tmp_path)
    assert main([*argv, "--json", str(pipe)]) == 2
    assert "exists and is not a regular file" in capsys.readouterr().err
    inputs = ["--trace", str(record)] if command[0] == "worst-case" else []
    assert main([*argv, *inputs, "--json", str(record)]) == 2
    assert "is one of the command's inputs" in capsys.readouterr().err
    assert record.read_text().startswith('{"format": "fedverify-run"')
