"""One writer per record, and no good round lost to a damaged tail: a second recorder resuming a
record that another recorder holds is refused (so two writers can no longer append the same
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
