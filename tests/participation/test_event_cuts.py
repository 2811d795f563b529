"""Cutting events into rounds at the ends of the float range: one-line ValueErrors, no
OverflowError and no numpy warning."""
import warnings

import pytest

from participation import Trace

EVENTS = [[(0.0, 1), (10.0, 0)], [(1.0, 1)]]


@pytest.mark.parametrize("events, kwargs, fragment", [
    (EVENTS, dict(round_seconds=5e-324), "more than any trace can hold"),
    (EVENTS, dict(round_seconds=1.0, start=float("inf")), "start must be a finite time"),
    (EVENTS, dict(round_seconds=1.0, start=float("nan")), "start must be a finite time"),
    ([[(-1.7e308, 1), (1.7e308, 0)]], dict(round_seconds=1.0), "more than any trace can hold"),
    ([[(-1.7e308, 1), (1.7e308, 0)]], dict(round_seconds=1.0, start=-1.7e308), "more than any trace can hold"),
])
def test_sizes_beyond_any_trace_are_one_line(events, kwargs, fragment):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match=fragment) as err:
            Trace.from_events(events, **kwargs)
    assert "\n" not in str(err.value)


def test_ordinary_cuts_are_unchanged():
    trace = Trace.from_events(EVENTS, 2.0)
    # client 0 is on over [0, 10): rounds [0,2) … [8,10) whole; client 1 from t=1: whole from [2,4) on
    assert trace.mask[:, 0].tolist() == [True] * 5 and trace.mask[:, 1].tolist() == [False] + [True] * 4
