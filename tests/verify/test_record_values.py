"""Values a record cannot truthfully hold are refused where the record is read, each naming its
line and field: μ ≤ 0 (κ = L/μ), a largest client dissimilarity below the mean one, negative
aggregation weights or local step counts, a number beyond a float's range (JSON's 1e309 reads as
infinity), and a number written as a string (named as a string)."""
import json

import pytest

from verify.records import load_record

HEADER = {"format": "fedverify-run", "version": 2, "n_clients": 3, "local_steps": 1,
          "constants": {"L": 1.0, "sigma2": 0.0, "delta_f": 1.0, "F0": 1.0}}


def _round(t, **fields):
    return {"round": t, "selected": [0, 1, 2], "replied": [0, 1], "grad_norm2": 1.0, **fields}


def _write(tmp_path, header, rounds, raw=None):
    path = tmp_path / "rec.jsonl"
    lines = [json.dumps(header)] + [json.dumps(r) for r in rounds] + ([raw] if raw else [])
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("mu, words", [(-1.0, "constants.mu must be > 0"), (0.0, "constants.mu must be > 0")])
def test_a_strong_convexity_constant_that_is_not_positive_is_refused(tmp_path, mu, words):
    header = {**HEADER, "constants": {**HEADER["constants"], "mu": mu}}
    with pytest.raises(ValueError, match=f"line 1: {words}"):
        load_record(_write(tmp_path, header, [_round(0)]))


@pytest.mark.parametrize("fields, words", [
    ({"heterogeneity": 2.0, "heterogeneity_max": 1.0}, r"heterogeneity_max \(1.0\) is below heterogeneity \(2.0\)"),
    ({"weights": [0.5, -0.5, None]}, r"weights holds numbers ≥ 0, got -0.5"),
    ({"local_steps": [2, -3, None]}, r"local_steps holds whole numbers ≥ 1, got -3"),
    ({"local_steps": [2, 1.5, None]}, r"local_steps holds whole numbers ≥ 1, got 1.5"),
    ({"probabilities": [0.5, 1.5, 0.1]}, r"probabilities holds numbers in \[0, 1\], got 1.5"),
    ({"grad_norm2": "0.5"}, r"grad_norm2 must be a number or null, got the string '0.5'"),
])
def test_a_round_value_that_cannot_be_true_is_refused(tmp_path, fields, words):
    with pytest.raises(ValueError, match=f"line 3: {words}"):
        load_record(_write(tmp_path, HEADER, [_round(0), _round(1, **fields)]))


def test_a_number_beyond_a_floats_range_is_refused_not_read_as_infinity(tmp_path):
    raw = '{"round": 1, "selected": [0, 1, 2], "replied": [0, 1], "grad_norm2": 1e309}'
    with pytest.raises(ValueError, match=r"line 3: grad_norm2 must be a finite number, got inf"):
        load_record(_write(tmp_path, HEADER, [_round(0)], raw=raw))


def test_consistent_values_are_read(tmp_path):
    rounds = [_round(0, heterogeneity=1.0, heterogeneity_max=2.0, weights=[0.5, 0.5, None], local_steps=[1, 2, None])]
    record = load_record(_write(tmp_path, HEADER, rounds))
    assert record.metrics["heterogeneity_max"][0] == 2.0 and record.vectors["local_steps"][0, 1] == 2.0


@pytest.mark.parametrize("change, words", [
    ({"step_sizes": {"eta_l": -0.1, "eta_g": 1.0}}, r"step_sizes.eta_l is a step size and must be > 0, got -0.1"),
    ({"step_sizes": {"eta_l": 0.0, "eta_g": 1.0}}, r"step_sizes.eta_l is a step size and must be > 0, got 0.0"),
    ({"hparams": {"beta": 2.0}}, r"hparams.beta must be a number in \[0.0, 1.0\), got 2.0"),
    ({"hparams": {"beta": "0.9"}}, r"hparams.beta must be a number in \[0.0, 1.0\), got '0.9'"),
])
def test_a_header_that_cannot_be_true_is_refused(tmp_path, change, words):
    with pytest.raises(ValueError, match=f"line 1: {words}"):
        load_record(_write(tmp_path, {**HEADER, "algorithm": "fedavgm", **change}, [_round(0)]))
