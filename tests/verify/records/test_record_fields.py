"""Run-record fields read and written exactly: no boolean taken for a number, no NaN step size,
no fractional id or boolean mask taken for client ids, no repeated key."""
import json

import numpy as np
import pytest

from verify.records import RunRecorder, load_record

HEADER = {"format": "fedverify-run-record", "version": 1, "n_clients": 2, "local_steps": 1}
ROUND = {"round": 0, "selected": [0], "replied": [0], "grad_norm2": 0.5}


def _write(tmp_path, header_changes=None, round_text=None):
    from verify.records import FORMAT, VERSION

    header = {**HEADER, "format": FORMAT, "version": VERSION, **(header_changes or {})}
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(header) + "\n" + (round_text or json.dumps(ROUND)) + "\n")
    return path


@pytest.mark.parametrize("changes, fragment", [({"version": True}, "version True"), ({"local_steps": True}, "local_steps"),
                                               ({"seed": False}, "seed"), ({"step_sizes": {"eta_l": 1e400}}, "Infinity is not")])
def test_header_fields_of_the_wrong_kind_are_refused(tmp_path, changes, fragment):
    path = _write(tmp_path, changes)
    with pytest.raises(ValueError, match=fragment):
        load_record(path)


def test_a_repeated_key_in_a_round_is_refused(tmp_path):
    path = _write(tmp_path, round_text='{"round": 0, "selected": [0], "replied": [0], "grad_norm2": 0.05, '
                                       '"grad_norm2": 5}')
    with pytest.raises(ValueError, match="appears twice"):
        load_record(path)


@pytest.mark.parametrize("selected, fragment", [([1.5], "integer client ids"), (np.array([True, False]), "boolean mask"),
                                                (["a"], "integer client ids")])
def test_record_round_refuses_what_are_not_client_ids(tmp_path, selected, fragment):
    with RunRecorder(tmp_path / "r.jsonl", 2, algorithm="fedavg", local_steps=1) as rec:
        with pytest.raises(ValueError, match=fragment):
            rec.record_round(0, selected, [])
        rec.record_round(0, np.array([1.0, 0.0]), [0])           # integral floats are ids
    assert load_record(tmp_path / "r.jsonl").selected[0].tolist() == [True, True]


@pytest.mark.parametrize("kwargs, fragment", [(dict(step_sizes={"eta_g": float("nan")}), "step_sizes.eta_g"),
                                              (dict(constants={"L": float("inf")}), "constants.L"),
                                              (dict(local_steps=True), "local_steps")])
def test_recorder_names_the_bad_field(tmp_path, kwargs, fragment):
    with pytest.raises(ValueError, match=fragment):
        RunRecorder(tmp_path / "r.jsonl", 2, algorithm="fedavg", **kwargs)


def test_recorders_started_together_on_one_path_leave_one_header(tmp_path):
    """Threads racing to create one record: exactly one writes the header, the others are refused."""
    import threading

    path = tmp_path / "race.jsonl"
    barrier, outcomes = threading.Barrier(6), []

    def start(seed):
        barrier.wait()
        try:
            RunRecorder(path, 2, algorithm="fedavg", local_steps=1, seed=seed)
            outcomes.append("made")
        except ValueError as err:
            outcomes.append(str(err))

    threads = [threading.Thread(target=start, args=(s,)) for s in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes.count("made") == 1, outcomes
    assert all("another recorder" in o or "exists" in o for o in outcomes if o != "made")
    assert len(path.read_text().splitlines()) == 1 and load_record(path).n_rounds == 0


def test_an_empty_file_is_a_new_record(tmp_path):
    path = tmp_path / "empty.jsonl"
    path.touch()
    with RunRecorder(path, 2, algorithm="fedavg", local_steps=1) as rec:
        rec.record_round(0, [0], [0], grad_norm2=1.0)
    assert load_record(path).n_rounds == 1


# ------------------------------------------------------------------ files that are not records, sizes that cannot fit


def test_a_pipe_or_device_is_refused_without_reading(tmp_path):
    import os

    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)                       # opening it for reading would block forever
    for path in (fifo, "/dev/zero", tmp_path):
        with pytest.raises(ValueError, match="not a regular file"):
            load_record(path)


@pytest.mark.slow
def test_a_huge_record_is_refused_before_it_is_read(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDVERIFY_MEMORY_GB", "1")
    path = tmp_path / "sparse.jsonl"
    with open(path, "wb") as f:
        f.truncate(1 << 30)               # a sparse 1 GiB file: nothing to read, everything to allocate
    with pytest.raises(ValueError, match="memory limit"):
        load_record(path)


@pytest.mark.parametrize("n_clients", [2 * 10 ** 8, 10 ** 30])
def test_a_header_declaring_too_many_clients_is_refused(tmp_path, monkeypatch, n_clients):
    monkeypatch.setenv("FEDVERIFY_MEMORY_GB", "0.1")
    path = _write(tmp_path, {"n_clients": n_clients})
    with pytest.raises(ValueError, match="memory limit"):
        load_record(path)


def test_check_run_constants_from_a_pipe_are_refused(tmp_path, capsys):
    import os

    from verify.cli import main

    fifo = tmp_path / "c.json"
    os.mkfifo(fifo)
    record = _write(tmp_path)
    assert main(["check-run", str(record), "--constants", str(fifo)]) == 2
    assert "not a regular file" in capsys.readouterr().err
