"""Records that contradict themselves or each other are refused before they are judged: a header's
participation model against the recorded replies (counts per round for m-client models, binomial
and Markov tests at family-wise level 1e-3 with a false-alarm rate checked by simulation), a
schedule against the header's step sizes and hyper-parameters, and records of different settings
or one run relabelled as several seeds judged together, in either order."""
from pathlib import Path

import numpy as np
import pytest

from participation import patterns
from verify.records.consistency import check_availability, check_same_setting
from verify.records import RunRecord

N, T = 8, 200


def _record(mask, availability=None, name="rec.jsonl", vectors=None, **header):
    head = {"format": "fedverify-run", "version": 2, "n_clients": mask.shape[1], "local_steps": 1,
            "algorithm": "fedgm", "constants": {"L": 1.0, "sigma2": 0.0, "delta_f": 1.0}, **header}
    if availability is not None:
        head["availability"] = availability
    metrics = {"grad_norm2": np.linspace(1.0, 0.1, mask.shape[0])}
    return RunRecord(header=head, mask=mask, selected=mask, metrics=metrics, path=Path(name), vectors=vectors or {})


def _one_a_round(seed=0):
    rng = np.random.default_rng(seed)
    mask = np.zeros((T, N), dtype=bool)
    mask[np.arange(T), rng.integers(0, N, T)] = True
    return mask


@pytest.mark.parametrize("m", [8, 3])
def test_uniform_m_against_one_reply_a_round_is_refused(m):
    with pytest.raises(ValueError, match=f"gives {m} client\\(s\\) in round 0, but it has 1 reply"):
        check_availability(_record(_one_a_round(), {"model": "uniform", "m": m}))


def test_a_record_where_nobody_replies_contradicts_every_m_client_model():
    with pytest.raises(ValueError, match="in round 0, but it has 0 replies"):
        check_availability(_record(np.zeros((T, N), dtype=bool), {"model": "uniform", "m": 1}))


def test_bernoulli_p_one_with_one_reply_in_eight_is_refused():
    with pytest.raises(ValueError, match=r"probability 1 \(always\), but it replied in \d+ of 200 rounds"):
        check_availability(_record(_one_a_round(), {"model": "bernoulli", "p": [1.0] * N}))


def test_bernoulli_p_half_with_one_reply_in_eight_is_refused_by_the_binomial_test():
    with pytest.raises(ValueError, match=r"two-sided p = .* family-wise level 0.001"):
        check_availability(_record(_one_a_round(), {"model": "bernoulli", "p": [0.5] * N}))


def test_records_drawn_from_their_own_model_are_accepted_at_the_stated_level():
    """False alarms over 300 records drawn from the header's own model (Bernoulli, per-round
    probabilities, Markov): at most a few, as a family-wise level of 1e-3 allows."""
    alarms = 0
    p = np.linspace(0.1, 0.9, N)
    markov = patterns.Markov(np.full(N, 0.4), np.full(N, 0.5))
    for seed in range(100):
        cases = [(_record(patterns.Bernoulli(p, N).sample(T, seed=seed).mask, {"model": "bernoulli", "p": p.tolist()})),
                 (_record(patterns.Bernoulli(p, N).sample(T, seed=seed + 1000).mask, None,
                          vectors={"probabilities": np.tile(p, (T, 1))})),
                 (_record(markov.sample(T, seed=seed).mask, {"model": "markov", "pi": [0.4] * N, "lam": [0.5] * N}))]
        for record in cases:
            try:
                check_availability(record)
            except ValueError:
                alarms += 1
    assert alarms <= 3, alarms


def test_markov_rates_far_from_the_stationary_law_are_refused():
    mask = np.zeros((T, N), dtype=bool)
    mask[:, 0] = True                                 # client 0 always there, the others never
    with pytest.raises(ValueError, match="Markov availability"):
        check_availability(_record(mask, {"model": "markov", "pi": [0.5] * N, "lam": [0.2] * N}))


@pytest.mark.parametrize("order", [0, 1])
def test_records_of_different_settings_are_refused_in_either_order(order):
    mask = patterns.Uniform(N, 2).sample(T, seed=0).mask
    a = _record(mask, name="a.jsonl", constants={"L": 1.0, "sigma2": 0.0, "delta_f": 1.0, "sigma_g2": 0.5})
    b = _record(patterns.Uniform(N, 2).sample(T, seed=1).mask, name="b.jsonl",
                constants={"L": 1.0, "sigma2": 0.0, "delta_f": 1.0, "sigma_g2": 2.0})
    pair = [a, b] if order == 0 else [b, a]
    with pytest.raises(ValueError, match=r"differ in constants.sigma_g2 \((0.5|2.0) against (2.0|0.5)\)"):
        check_same_setting(pair)


def test_one_run_relabelled_as_three_seeds_is_one_run():
    """With noise the copies would pose as three samples (refused); without noise (σ² = 0) the
    seeds of one run repeat it exactly and are kept once."""
    mask = patterns.Uniform(N, 2).sample(T, seed=0).mask
    noisy = {"L": 1.0, "sigma2": 0.5, "delta_f": 1.0}
    copies = [_record(mask, name=f"s{s}.jsonl", seed=s, constants=noisy) for s in range(3)]
    with pytest.raises(ValueError, match="s0.jsonl and s1.jsonl hold the same rounds"):
        check_same_setting(copies)
    exact = [_record(mask, name=f"s{s}.jsonl", seed=s) for s in range(3)]
    assert [r.path.name for r in check_same_setting(exact)] == ["s0.jsonl"]


def test_seeds_of_one_setting_are_accepted():
    runs = [_record(patterns.Uniform(N, 2).sample(T, seed=s).mask, name=f"s{s}.jsonl", seed=s) for s in range(3)]
    check_same_setting(runs)


def test_a_schedule_that_contradicts_the_headers_momentum_is_refused():
    from verify.theorems import THEOREMS
    from verify.theorems.from_records import given_algorithm

    schedule = {"lengths": [T], "eta_g": [1.0], "beta": [0.1], "nu": 0.7, "eta_l": 0.01}
    record = _record(np.ones((T, N), dtype=bool), {"model": "full"}, schedule=schedule,
                     hparams={"beta": 0.9, "nu": 0.7}, step_sizes={"eta_l": 0.01, "eta_g": 1.0})
    with pytest.raises(ValueError, match="contradicts its schedule: beta=0.9 conflicts with the schedule's beta=0.1"):
        given_algorithm(record, THEOREMS["momentum.theorem_4_1"])
    step = _record(np.ones((T, N), dtype=bool), {"model": "full"}, schedule=schedule | {"beta": [0.9]},
                   hparams={"beta": 0.9, "nu": 0.7}, step_sizes={"eta_l": 1.0, "eta_g": 1.0})
    with pytest.raises(ValueError, match="eta_l=1.0 conflicts with the schedule's eta_l=0.01"):
        given_algorithm(step, THEOREMS["momentum.theorem_4_1"])



def test_a_server_that_weighted_its_participants_unequally_is_refused():
    """Flower's FedAvgM weights replies by num-examples; Server momentum averages them equally."""
    from verify.records.consistency import check_equal_weights

    mask = patterns.Uniform(N, 2).sample(T, seed=0).mask
    equal = np.where(mask, 0.5, np.nan)
    check_equal_weights(_record(mask, vectors={"example_weights": equal}))
    unequal = equal.copy()
    t = 7
    first, second = np.flatnonzero(mask[t])
    unequal[t, first], unequal[t, second] = 0.25, 0.75
    with pytest.raises(ValueError, match="in round 7 the server weighted the replies unequally"):
        check_equal_weights(_record(mask, vectors={"example_weights": unequal}))


def test_a_record_with_a_header_and_no_round_is_named(tmp_path):
    from verify import check_run

    path = tmp_path / "header_only.jsonl"
    path.write_text('{"format": "fedverify-run", "version": 2, "n_clients": 3, "local_steps": 1}\n')
    with pytest.raises(ValueError, match="header_only.jsonl has a header and no round: nothing to judge"):
        check_run(str(path))


def test_a_null_recorded_probability_is_refused_not_assumed():
    mask = patterns.Uniform(N, 2).sample(T, seed=0).mask
    p = np.full((T, N), 0.25)
    p[5, 3] = np.nan
    with pytest.raises(ValueError, match="probabilities is null for client 3 in round 5"):
        check_availability(_record(mask, None, vectors={"probabilities": p}))


@pytest.mark.parametrize("order", [0, 1])
def test_a_record_whose_step_sizes_break_the_lemma_marks_the_verdict_in_either_order(order):
    """FedSUM Cor 4.1 takes step sizes per realised trace, so its records may differ in them; the
    lemma's hypotheses were checked at the first record's alone, and the '*' came and went with
    the order of the records."""
    from verify import check_run

    constants = {"L": 1.0, "sigma2": 0.1, "delta_f": 1.0, "F0": 1.0}
    common = dict(algorithm="fedsum", constants=constants, availability={"model": "uniform", "m": 2})
    small = _record(patterns.Uniform(N, 2).sample(T, seed=0).mask, name="small.jsonl", seed=0,
                    step_sizes={"eta_g": 1e-3, "eta_l": 1e-4}, **common)
    large = _record(patterns.Uniform(N, 2).sample(T, seed=1).mask, name="large.jsonl", seed=1,
                    step_sizes={"eta_g": 1.0, "eta_l": 10.0}, **common)
    result = check_run([small, large] if order == 0 else [large, small], "fedsum.corollary_4_1")
    assert not all(c.holds for c in result.conditions) and "*" in result.label


@pytest.mark.parametrize("remainder", ["short", "drop"])
def test_a_reshuffled_record_whose_epochs_end_short_is_consistent_and_a_wrong_count_is_not(remainder):
    """FedSUM Case 4 with S ∤ N: under "short" the last round of each epoch takes the N mod S
    clients left over (10 clients, S = 4: 4, 4, 2, ...), under "drop" every round takes S. A
    genuine trace of either agrees with its header; the header round-trips its remainder; a
    round with one client too few is refused, naming it."""
    pattern = patterns.ReshuffledCyclic(10, 4, remainder)
    mask = np.asarray(pattern.sample(13, seed=3).mask)
    header = pattern.record_header()
    assert patterns.pattern_from_header(header, 10) == pattern
    assert ("remainder" in header) == (remainder == "drop")
    sizes = [4, 4, 2] * 4 + [4] if remainder == "short" else [4] * 13
    assert mask.sum(axis=1).tolist() == sizes == pattern.round_sizes(13).tolist()
    check_availability(_record(mask, header))
    broken = mask.copy()
    broken[4, np.flatnonzero(broken[4])[0]] = False
    with pytest.raises(ValueError, match="gives 4 client\\(s\\) in round 4, but it has 3 replies"):
        check_availability(_record(broken, header))
