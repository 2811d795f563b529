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


def test_an_availability_model_that_is_not_a_name_is_refused(tmp_path):
    for model in (["uniform"], {"m": 1}):
        with pytest.raises(ValueError, match="line 1: availability.model must be one of"):
            load_record(_write(tmp_path, {**HEADER, "availability": {"model": model, "m": 1}}, [_round(0)]))


@pytest.mark.parametrize("constants, words", [
    ({"F0": 0.5}, r"F0 = 0.5 is below ‖∇f\(x_0\)‖² = 1.0 recorded in round 0"),
    ({"delta_f": 0.0}, r"‖∇f\(x_0\)‖² = 1.0 recorded in round 0 exceeds 2·L·Δ_f = 0.0"),
    ({"L": 0.25}, r"exceeds 2·L·Δ_f = 0.5 \(L = 0.25, delta_f = 1.0\)"),
    ({"sigma_g2": 1.5}, r"constants.sigma_g2 = 1.5 is below the heterogeneity 2.0 recorded in round 1"),
])
def test_constants_below_what_the_rounds_show_are_refused_not_judged(tmp_path, constants, words):
    """Δ_f = 0 with ‖∇f(x_0)‖² = 1 made every record 'violated' (a bound near 0); an L-smooth f
    has ‖∇f(x_0)‖² ≤ 2LΔ_f, F_0 ≥ ‖∇f(x_0)‖², and σ_g² bounds every round's heterogeneity."""
    from verify.records.checks import check_run

    rounds = [_round(0, heterogeneity=1.0), _round(1, heterogeneity=2.0)]
    assert check_run(_write(tmp_path, HEADER, rounds)).verdict in ("holds", "violated", "inconclusive")
    header = {**HEADER, "constants": {**HEADER["constants"], **constants}}
    with pytest.raises(ValueError, match=words):
        check_run(_write(tmp_path, header, rounds))
    with pytest.raises(ValueError, match=words):               # passed in place of the header's (--delta-f ...)
        check_run(_write(tmp_path, HEADER, rounds), constants=constants)


def test_a_record_without_a_seed_value_is_judged(tmp_path):
    """seed: null is allowed by the header; the record then counts as seed 0 (its position)."""
    from verify.records.checks import check_run

    assert check_run(_write(tmp_path, {**HEADER, "seed": None}, [_round(0), _round(1)])).seeds == (0,)
