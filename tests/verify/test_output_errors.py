"""Output that cannot be written (a full disk, a closed standard output) is one line on stderr with
exit 2, for every command that prints; a reader that goes away (``| head``) stays a quiet end."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = [["bound", "--list"], ["delays", "--list"], ["sweep", "--example"],
            ["mc", "P1", "-T", "10", "--reps", "4", "--no-progress"]]


def _run(argv, **kwargs):
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    return subprocess.run([sys.executable, "-m", "verify", *argv], cwd=ROOT, env=env, stderr=subprocess.PIPE,
                          text=True, timeout=120, **kwargs)


@pytest.mark.slow
@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("argv", COMMANDS)
def test_a_full_disk_is_one_line(argv):
    with open("/dev/full", "w") as full:
        done = _run(argv, stdout=full)
    assert done.returncode == 2 and done.stderr == "fedverify: error: cannot write the output (No space left on device)\n"


@pytest.mark.slow
@pytest.mark.parametrize("argv", COMMANDS[:2])
def test_a_closed_standard_output_is_one_line(argv):
    script = f"exec {sys.executable} -m verify {' '.join(argv)} >&-"
    done = subprocess.run(["bash", "-c", script], cwd=ROOT, stderr=subprocess.PIPE, text=True, timeout=120)
    assert done.returncode == 2 and "standard output is closed" in done.stderr and done.stderr.count("\n") == 1


def test_a_json_sweep_spec_with_a_repeated_key_is_refused_as_toml_refuses_it(tmp_path):
    from verify.sweep import load_spec

    path = tmp_path / "spec.json"
    path.write_text('{"check": {"rounds": 10, "rounds": 20}}')
    with pytest.raises(ValueError, match="appears twice"):
        load_spec(path)
    toml = tmp_path / "spec.toml"
    toml.write_text("[check]\nrounds = 10\nrounds = 20\n")
    with pytest.raises(ValueError):
        load_spec(toml)


@pytest.mark.slow
def test_experiment_into_a_pipe_closed_early_still_writes_its_results(tmp_path):
    """`fedverify experiment ... | head -1`: the reader goes after the first line; the runs go on and
    the result files are written, with a quiet exit."""
    out = tmp_path / "exp"
    script = (f"{sys.executable} -m verify experiment fedsum --dataset digits -N 10 -T 3 --algorithms fedavg fedsum "
              f"--patterns P1 -o {out} | head -1; exit ${{PIPESTATUS[0]}}")
    done = subprocess.run(["bash", "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("run 1/2: ") and done.stdout.count("\n") == 1
    assert "Broken pipe" not in done.stderr and "Traceback" not in done.stderr
    assert sorted(p.name for p in out.iterdir()) == ["experiment.csv", "experiment.json", "experiment.png", "runs"]
