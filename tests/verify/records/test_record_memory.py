"""A record is read line by line into the arrays it fills: the participation masks are checked
against the memory limit before they are allocated (a record too large is refused before any
round is parsed), and reading a large record holds little more than its masks, not the file and
every parsed line at once."""
import json
import tracemalloc

import numpy as np
import pytest

from verify.records import load_record

T, N = 400, 2000


def _write(path):
    rng = np.random.default_rng(0)
    with open(path, "w") as f:
        f.write(json.dumps({"format": "fedverify-run", "version": 2, "n_clients": N, "local_steps": 1}) + "\n")
        for t in range(T):
            ids = np.sort(rng.choice(N, N // 2, replace=False)).tolist()
            f.write(json.dumps({"round": t, "selected": ids, "replied": ids, "grad_norm2": 1.0 / (t + 1)}) + "\n")
    return path


@pytest.mark.slow
def test_reading_a_large_record_holds_its_masks_not_the_parsed_file(tmp_path):
    path = _write(tmp_path / "large.jsonl")
    size = path.stat().st_size
    tracemalloc.start()
    record = load_record(path)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    masks = 2 * T * N
    assert record.n_rounds == T and int(record.mask.sum()) == T * N // 2
    assert peak < masks + size / 4, (peak, masks, size)          # the file is ~4.4 MB, its masks 1.6 MB


def test_a_record_whose_masks_exceed_the_limit_is_refused_before_its_rounds(tmp_path, monkeypatch):
    path = _write(tmp_path / "large.jsonl")
    monkeypatch.setenv("FEDVERIFY_MEMORY_GB", str(1e6 / 2**30))      # 1 MB: below the 1.6 MB of masks
    with pytest.raises(ValueError, match=r"large.jsonl: 400 rounds × 2000 clients .* needs about .* the memory limit"):
        load_record(path)


def test_a_header_without_its_newline_is_a_record_of_no_rounds(tmp_path):
    path = tmp_path / "header.jsonl"
    path.write_text(json.dumps({"format": "fedverify-run", "version": 2, "n_clients": 3}))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_record(path).n_rounds == 0


def _judged_record(path, n_rounds, n_clients, **header):
    rng = np.random.default_rng(1)
    head = {"format": "fedverify-run", "version": 2, "n_clients": n_clients, "local_steps": 2, "algorithm": "fedavg",
            "step_sizes": {"eta_l": 0.01, "eta_g": 1.0}, "seed": 0,
            "constants": {"L": 1.0, "sigma2": 0.0, "delta_f": 1.0, "F0": 1.0}, **header}
    with open(path, "w") as f:
        f.write(json.dumps(head) + "\n")
        for t in range(n_rounds):
            ids = np.sort(rng.choice(n_clients, n_clients // 2, replace=False)).tolist()
            f.write(json.dumps({"round": t, "selected": ids, "replied": ids, "grad_norm2": 1.0 / (t + 1)}) + "\n")
    return path


_MOMENTUM = {"algorithm": "fedavgm", "step_sizes": {"eta_l": 0.0001, "eta_g": 0.5}, "hparams": {"beta": 0.8},
             "availability": {"model": "uniform", "m": 750},
             "constants": {"L": 1.0, "sigma2": 0.0, "delta_f": 1.0, "F0": 1.0, "sigma_g2": 1.0, "zeta2": 1.0}}


@pytest.mark.parametrize("theorem, header", [("fedsum.theorem_4_1", {}), ("fedsum.corollary_4_1", {}),
                                             ("momentum.theorem_4_6", _MOMENTUM)])
def test_judging_a_record_stays_within_what_its_budget_counts(tmp_path, theorem, header):
    """check_run's peak memory per (round, client) cell, measured, is within the masks' 2 bytes
    plus ``JUDGING_BYTES_PER_CELL``, the amount the limit is applied to before the record is read."""
    from verify import check_run
    from verify.records.checks import JUDGING_BYTES_PER_CELL

    rounds, clients = 300, 1500
    path = _judged_record(tmp_path / "run.jsonl", rounds, clients, **header)
    tracemalloc.start()
    check_run(path, theorem)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak / (rounds * clients) <= 2.0 + JUDGING_BYTES_PER_CELL


def test_a_record_that_fits_but_cannot_be_judged_within_the_limit_is_refused_before_it_is_read(tmp_path, monkeypatch):
    from verify import check_run

    rounds, clients = 200, 1000
    paths = [_judged_record(tmp_path / f"run{s}.jsonl", rounds, clients, seed=s) for s in range(2)]
    monkeypatch.setenv("FEDVERIFY_MEMORY_GB", str(3.0 * rounds * clients / 2**30))    # the masks fit, the work not
    load_record(paths[0])                                                             # reading alone is allowed
    with pytest.raises(ValueError, match=r"run0\.jsonl: 200 rounds × 1000 clients .* and the work on them needs about"):
        check_run(paths[0], "fedsum.theorem_4_1")
    monkeypatch.setenv("FEDVERIFY_MEMORY_GB", str(11.0 * rounds * clients / 2**30))   # one record and its work fit
    check_run(paths[0], "fedsum.theorem_4_1")
    with pytest.raises(ValueError, match=r"run1\.jsonl: 200 rounds × 1000 clients"):   # not with a second beside it
        check_run(paths, "fedsum.theorem_4_1")
