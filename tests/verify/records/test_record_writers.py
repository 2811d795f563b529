"""One writer per record, and no good round lost to a damaged tail: a second recorder resuming a
record that another recorder holds is refused (so two writers never append the same
rounds), the record is released when its recorder closes, and a record whose tail is damaged
names the line and still reads every complete round before it on request."""
import json
import warnings

import pytest

from verify.records import RunRecorder, load_record

SETTINGS = dict(algorithm="loop", local_steps=1, seed=0)


def _record(path, rounds: int) -> None:
    with RunRecorder(path, 3, **SETTINGS) as rec:
        for t in range(rounds):
            rec.record_round(t, [0, 1], [0], grad_norm2=1.0 / (t + 1), loss=0.5)


def test_a_second_recorder_on_a_held_record_is_refused_until_the_first_closes(tmp_path):
    path = tmp_path / "run.jsonl"
    _record(path, 5)
    first = RunRecorder(path, 3, resume=True, **SETTINGS)
    with pytest.raises(ValueError, match="being written by another recorder"):
        RunRecorder(path, 3, resume=True, **SETTINGS)
    first.record_round(5, [2], [2], grad_norm2=0.1, loss=0.4)
    first.close()
    with RunRecorder(path, 3, resume=True, **SETTINGS) as second:
        assert second.next_round == 6
    assert load_record(path).n_rounds == 6


def test_a_refused_resume_leaves_the_record_free_for_the_right_one(tmp_path):
    path = tmp_path / "run.jsonl"
    _record(path, 3)
    with pytest.raises(ValueError, match="n_clients is 3, not 4"):
        RunRecorder(path, 4, resume=True, **SETTINGS)
    with RunRecorder(path, 3, resume=True, **SETTINGS) as rec:
        assert rec.next_round == 3


def test_a_new_record_is_held_by_its_recorder(tmp_path):
    path = tmp_path / "new.jsonl"
    with RunRecorder(path, 3, **SETTINGS):
        with pytest.raises(ValueError, match="being written by another recorder"):
            RunRecorder(path, 3, resume=True, **SETTINGS)


def test_a_damaged_tail_names_its_line_and_keeps_the_rounds_before_it(tmp_path):
    """Rounds 0–5 written, then a second writer's copy of rounds 4–5 appended (what two resumers
    left before the lock): the default read refuses, naming the line and the complete rounds; the
    kept read returns those six rounds and says what was left out."""
    path = tmp_path / "twice.jsonl"
    _record(path, 6)
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines + lines[5:7]) + "\n")
    with pytest.raises(ValueError, match=r"line 8: round must be 6 .*got 4 \(the 6 rounds before line 8 are complete"):
        load_record(path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        record = load_record(path, keep_damaged=True)
    assert record.n_rounds == 6 and "left out" in record.damage and len(caught) == 1
    assert record.metrics["grad_norm2"].tolist() == [json.loads(x)["grad_norm2"] for x in lines[1:7]]


def test_amending_a_header_while_its_recorder_writes_is_refused_and_loses_no_round(tmp_path):
    """The amended copy renamed onto the record took the rounds written meanwhile with the old
    file: the record then skipped rounds and read only up to the gap."""
    from verify.records import amend_header

    path = tmp_path / "run.jsonl"
    with RunRecorder(path, 3, **SETTINGS) as rec:
        rec.record_round(0, [0, 1], [0], grad_norm2=1.0)
        with pytest.raises(ValueError, match="run.jsonl is being written by a recorder"):
            amend_header(path, constants={"L": 1.0})
        rec.record_round(1, [0, 1], [0], grad_norm2=0.5)
    amend_header(path, constants={"L": 1.0})
    record = load_record(path)
    assert record.n_rounds == 2 and record.header["constants"] == {"L": 1.0}


def test_amending_a_header_that_is_not_an_object_is_one_line(tmp_path):
    from verify.records import amend_header

    path = tmp_path / "list.jsonl"
    path.write_text("[1, 2]\n")
    with pytest.raises(ValueError, match="list.jsonl, line 1: the header must be a JSON object"):
        amend_header(path, constants={"L": 1.0})


def test_numpy_numbers_in_a_header_are_written_as_json_numbers(tmp_path):
    import numpy as np

    path = tmp_path / "np.jsonl"
    with RunRecorder(path, np.int64(3), local_steps=np.int64(2), seed=np.int64(7), algorithm="loop",
                     step_sizes={"eta_g": np.float32(1.0), "eta_l": np.array(0.25)},
                     constants={"L": np.float32(2.0), "sigma2": np.float64(0.0)}) as rec:
        rec.record_round(0, [0, 1], [0], grad_norm2=np.array(0.5))
    header = load_record(path).header
    assert header["n_clients"] == 3 and header["step_sizes"] == {"eta_g": 1.0, "eta_l": 0.25}
    assert header["constants"] == {"L": 2.0, "sigma2": 0.0}


@pytest.mark.parametrize("kwargs, words", [
    (dict(constants={"L": 10 ** 400}), "constants.L must be a finite number"),
    (dict(step_sizes={"eta_l": 10 ** 400}), "step_sizes.eta_l must be a finite number"),
])
def test_an_integer_beyond_a_floats_range_in_a_header_is_refused(tmp_path, kwargs, words):
    with pytest.raises(ValueError, match=words):
        RunRecorder(tmp_path / "big.jsonl", 3, **kwargs)


@pytest.mark.parametrize("value, words", [
    ([1.0, 2.0], "grad_norm2 must be a number, got list"), (None.__class__, "grad_norm2 must be a number"),
    (10 ** 400, "grad_norm2 must be finite, got an integer of 401 digits"),
])
def test_a_round_value_that_is_not_one_number_is_named(tmp_path, value, words):
    with RunRecorder(tmp_path / "v.jsonl", 3) as rec:
        with pytest.raises(ValueError, match=words):
            rec.record_round(0, [0], [0], grad_norm2=value)
        with pytest.raises(ValueError, match="weights of client 1 must be finite, got an integer of 401 digits"):
            rec.record_round(0, [0], [0], weights=[0.5, 10 ** 400, None])
