"""Every JSON the toolkit reads (run records, --constants files, event logs, trace files) is read
strictly: repeated keys, NaN, integers beyond any float and runaway nesting are one-line
ValueErrors naming the file, never a silent last-key-wins, an OverflowError or a RecursionError."""
import json

import pytest

from participation import Trace
from participation.events import load_events
from participation.files import FLOAT_DIGITS, strict_json

HUGE = "1" + "0" * 400
DEEP = "[" * 5000 + "]" * 5000


@pytest.mark.parametrize("text, fragment", [
    ('{"a": 1, "a": 2}', "appears twice"), (DEEP, "nested deeper"), ('{"x": ' + HUGE + "}", "401 digits"),
    ('{"x": NaN}', "NaN is not"), ('{"x": -Infinity}', "-Infinity is not"), ('{"x": 1', "invalid JSON"),
    (b'{"x": "\xff"}', "not UTF-8")])
def test_strict_json_refuses_in_one_line(text, fragment):
    with pytest.raises(ValueError, match=fragment) as err:
        strict_json(text)
    assert "\n" not in str(err.value)


def test_strict_json_reads_what_json_reads():
    doc = {"a": [1, 2.5, -3, None, True, "x"], "b": {"c": 10 ** 308}, "d": 1e308}
    assert strict_json(json.dumps(doc)) == doc
    assert float(strict_json(str(10 ** 308))) == 1e308              # 309 digits, still a float
    with pytest.raises(OverflowError):
        float(2 * 10 ** 308)                                         # 309 digits beyond the largest float...
    with pytest.raises(ValueError, match="309 digits"):
        strict_json(str(2 * 10 ** 308))                              # ...refused in one line
    assert len(str(10 ** 308)) == FLOAT_DIGITS


def _record_lines(tmp_path, header_extra="", round_extra=""):
    from verify.records import FORMAT, VERSION

    path = tmp_path / "r.jsonl"
    header = (f'{{"format": "{FORMAT}", "version": {VERSION}, "n_clients": 2, "local_steps": 1, '
              '"constants": {"L": 1, "sigma2": 0.1, "delta_f": 1, "F0": 1}' + header_extra + "}")
    rnd = '{"round": 0, "selected": [0], "replied": [0], "grad_norm2": 0.5' + round_extra + "}"
    path.write_text(header + "\n" + rnd + "\n")
    return path


@pytest.mark.parametrize("round_extra, fragment", [
    (', "grad_norm2": 5', "appears twice"), (', "loss": ' + HUGE, "digits"), (', "loss": NaN', "NaN")])
def test_run_records_are_read_strictly(tmp_path, round_extra, fragment):
    from verify.records import load_record

    path = _record_lines(tmp_path, round_extra=round_extra)
    with pytest.raises(ValueError, match=fragment):
        load_record(path)


def test_a_deeply_nested_record_is_one_line(tmp_path):
    from verify.records import load_record

    path = tmp_path / "deep.jsonl"
    path.write_text(DEEP + "\n")
    with pytest.raises(ValueError, match="nested deeper"):
        load_record(path)


def test_record_round_refuses_an_integer_beyond_any_float(tmp_path):
    from verify.records import RunRecorder

    with RunRecorder(tmp_path / "r.jsonl", 2, algorithm="fedavg", local_steps=1) as rec:
        with pytest.raises(ValueError, match="finite"):
            rec.record_round(0, [0], [0], grad_norm2=10 ** 400)


@pytest.mark.parametrize("text, fragment", [(DEEP, "nested deeper"), ('{"L": ' + HUGE + "}", "digits"),
                                            ('{"L": 1, "L": 2}', "appears twice")])
def test_check_run_constants_files_are_read_strictly(tmp_path, capsys, text, fragment):
    from verify.cli import main

    record = _record_lines(tmp_path)
    constants = tmp_path / "c.json"
    constants.write_text(text)
    assert main(["check-run", str(record), "--constants", str(constants)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and fragment in err


@pytest.mark.parametrize("text, fragment", [(DEEP, "nested deeper"), ('{"a": {"active": [' + HUGE + ']}}', "digits")])
def test_event_logs_are_read_strictly(tmp_path, text, fragment):
    path = tmp_path / "events.json"
    path.write_text(text)
    with pytest.raises(ValueError, match=fragment):
        load_events(path)


def test_trace_json_with_a_repeated_key_is_refused(tmp_path):
    path = tmp_path / "t.json"
    path.write_text('{"format": "x", "format": "y"}')
    with pytest.raises(ValueError, match="appears twice"):
        Trace.load(path)
