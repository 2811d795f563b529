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
