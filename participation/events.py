"""Availability event logs → round traces.

Real fleets are recorded as events: client i becomes available or unavailable at time t
(seconds). A federated round of length Δ starting at b_r = start + r·Δ needs a rule saying
which clients take part in it:

* ``"start"``: the client is available at the round's start, b_r;
* ``"whole"``: it is available for the whole round [b_r, b_r + Δ) (the default: a device
  that leaves mid-round does not report);
* ``"fraction"``: it is available for at least ``fraction``·Δ of the round.

A client keeps its last state until its next event; before its first event it is
unavailable (``initial=0``) unless told otherwise. Only complete rounds are made: with
``end`` (default: the latest event of any client) the trace has ⌊(end − start)/Δ⌋ rounds.

Loaders (``load_events``) read the forms real traces come in, as JSON, never unpickled:

* fedverify's event JSON, also the shipped MobiPerf data set:
  ``{"devices": {"id": [[t, s], ...], ...}}`` with s = 1 available, 0 unavailable;
* FLASH's state traces (C. Yang et al., "Characterizing Impacts of Heterogeneity in
  Federated Learning upon Large-Scale Smartphone Data", WWW 2021): per device a
  ``"messages"`` text of ``YYYY-mm-dd HH:MM:SS<TAB>state`` lines; a device is ready when
  its screen is locked, it is on Wi-Fi and it is charging;
* FedScale-style client behaviour traces (F. Lai et al., "FedScale: Benchmarking Model and
  System Performance of Federated Learning at Scale", ICML 2022): per client
  ``{"active": [t...], "inactive": [t...]}``, available on [active_k, inactive_k).
  FedScale distributes these as a pickle, which fedverify never opens; convert it once in
  your own environment::

      import json, pickle
      with open("client_behave_trace", "rb") as f:
          trace = pickle.load(f)
      json.dump({str(k): {"active": v["active"], "inactive": v["inactive"]} for k, v in trace.items()},
                open("behave_trace.json", "w"))
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from .files import strict_json
from .event_cuts import RULES, _client_events, as_event_lists, events_to_mask  # noqa: F401  (re-exported)
from .validation import quote

__all__ = ["RULES", "EventLog", "events_to_mask", "load_events", "FORMATS", "as_event_lists"]

FORMATS = ("events", "flash", "fedscale")
#: Largest event file read (bytes): real traces of tens of thousands of devices fit well below.
MAX_FILE_BYTES = 1 << 30


@dataclass(frozen=True)
class EventLog:
    """Per-client availability events: ``clients`` (ids), ``events`` (one float (k, 2) array
    of (time, state) per client, seconds from ``origin``), ``horizon`` (the latest event
    time), ``source`` (what it was read from) and ``meta`` (what the file said about itself)."""

    clients: tuple[str, ...]
    events: tuple[np.ndarray, ...]
    horizon: float
    source: str = ""
    meta: dict = field(default_factory=dict, compare=False)

    def __post_init__(self):
        if len(self.clients) != len(self.events):
            raise ValueError(f"{len(self.clients)} client ids for {len(self.events)} event lists")

    @property
    def n_clients(self) -> int:
        return len(self.clients)

    def to_mask(self, round_seconds: float, **rule) -> np.ndarray:
        return events_to_mask(self.events, round_seconds, names=self.clients, **{"end": self.horizon, **rule})

    def to_trace(self, round_seconds: float, **rule):
        """The round trace (``rule``, ``fraction``, ``start``, ``end``, ``initial`` as in
        :func:`events_to_mask`); clients in the log's order."""
        from .trace import Trace

        return Trace(self.to_mask(round_seconds, **rule))


# ---------------------------------------------------------------------------- loaders


def _read_json(path: Path):
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise ValueError(f"{path.name} is {size} bytes; event files above {MAX_FILE_BYTES} bytes are refused")
    try:
        return strict_json(path.read_bytes())
    except ValueError as err:
        raise ValueError(f"{path.name}: {err}") from None


def _detect(doc) -> str:
    if isinstance(doc, dict) and isinstance(doc.get("devices"), dict):
        return "events"
    if isinstance(doc, dict) and doc:
        first = next(iter(doc.values()))
        if isinstance(first, dict) and "messages" in first:
            return "flash"
        if isinstance(first, dict) and "active" in first and "inactive" in first:
            return "fedscale"
    raise ValueError("unknown event format: expected {\"devices\": {id: [[t, s], ...]}}, FLASH's per-device "
                     "\"messages\", or FedScale-style per-client \"active\"/\"inactive\" lists")


def _from_devices(doc: dict, source: str) -> EventLog:
    devices = doc["devices"]
    ids = tuple(str(k) for k in devices)
    events = tuple(_client_events(v, k) for k, v in zip(ids, devices.values()))
    horizon = max((float(e[-1, 0]) for e in events if len(e)), default=0.0)
    meta = {k: v for k, v in doc.items() if k != "devices"}
    return EventLog(ids, events, horizon, source, meta)


#: FLASH state words and what each sets (None: no effect on readiness).
_FLASH_STATES = {"battery_charged_on": ("charging", True), "battery_charged_off": ("charging", False),
                 "wifi": ("wifi", True), "4g": ("wifi", False), "3g": ("wifi", False), "2g": ("wifi", False),
                 "unknown": ("wifi", False), "screen_lock": ("locked", True), "screen_unlock": ("locked", False),
                 "screen_on": None, "screen_off": None, "battery_low": None, "battery_okay": None,
                 "phone_on": None, "phone_off": ("off", True)}


def _flash_device(uid: str, messages: str) -> tuple[list[float], list[int]]:
    """(times, ready) of one FLASH device: ready = locked ∧ wifi ∧ charging, each flag
    False until set; ``phone_off`` clears all three (a switched-off phone is not ready);
    battery-level lines ("57%") and screen on/off do not change readiness."""
    flags = {"charging": False, "wifi": False, "locked": False}
    times, ready = [], []
    for number, line in enumerate(messages.splitlines(), start=1):
        if not line.strip():
            continue
        stamp, sep, state = line.strip().partition("\t")
        if not sep:
            raise ValueError(f"device {quote(str(uid))}, message {number}: expected 'YYYY-mm-dd HH:MM:SS<TAB>state', "
                             f"got {line.strip()[:60]!r}")
        try:
            moment = datetime.strptime(stamp.strip(), "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc)
        except ValueError:
            raise ValueError(f"device {quote(str(uid))}, message {number}: bad time {stamp.strip()[:40]!r}") from None
        state = state.strip().lower()
        if state.endswith("%"):
            continue
        if state not in _FLASH_STATES:
            raise ValueError(f"device {quote(str(uid))}, message {number}: unknown state {state[:40]!r}")
        effect = _FLASH_STATES[state]
        if effect is not None:
            if effect[0] == "off":
                flags = dict.fromkeys(flags, False)
            else:
                flags[effect[0]] = effect[1]
        times.append(moment.timestamp())
        ready.append(int(all(flags.values())))
    return times, ready


def _from_flash(doc: dict, source: str) -> EventLog:
    ids, raw = [], []
    for uid, record in doc.items():
        if not isinstance(record, dict) or not isinstance(record.get("messages"), str):
            raise ValueError(f"device {quote(str(uid))}: expected an object with a 'messages' text")
        ids.append(str(uid))
        raw.append(_flash_device(str(uid), record["messages"]))
    origin = min((t[0] for t, _ in raw if t), default=0.0)
    events = tuple(_client_events(np.column_stack([np.asarray(t) - origin, s]) if t else np.zeros((0, 2)), uid)
                   for uid, (t, s) in zip(ids, raw))
    horizon = max((float(e[-1, 0]) for e in events if len(e)), default=0.0)
    return EventLog(tuple(ids), events, horizon, source,
                    {"origin_utc": datetime.fromtimestamp(origin, timezone.utc).isoformat(), "format": "flash"})


def _from_fedscale(doc: dict, source: str) -> EventLog:
    ids, events = [], []
    for cid, record in doc.items():
        if not isinstance(record, dict):
            raise ValueError(f"client {quote(str(cid))}: expected an object with 'active' and 'inactive' lists")
        try:
            on = np.asarray(record["active"], dtype=float).ravel()
            off = np.asarray(record["inactive"], dtype=float).ravel()
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"client {quote(str(cid))}: 'active' and 'inactive' must be lists of times") from None
        if on.size != off.size:
            raise ValueError(f"client {quote(str(cid))}: {on.size} 'active' times but {off.size} 'inactive' times")
        if (off < on).any():
            k = int(np.flatnonzero(off < on)[0])
            raise ValueError(f"client {quote(str(cid))}: interval {k} ends at {off[k]:g} before it starts at {on[k]:g}")
        pairs = np.column_stack([np.ravel(np.column_stack([on, off])), np.tile([1.0, 0.0], on.size)])
        ids.append(str(cid))
        events.append(_client_events(pairs, str(cid)))
    horizon = max((float(e[-1, 0]) for e in events if len(e)), default=0.0)
    return EventLog(tuple(ids), tuple(events), horizon, source, {"format": "fedscale"})


def load_events(path, format: str | None = None) -> EventLog:
    """Read an event log: fedverify's event JSON (the shipped data sets' form), FLASH state
    traces or FedScale-style active/inactive lists (``format`` in :data:`FORMATS`, or None to
    detect it from the content). Every failure is a one-line ValueError naming the file."""
    path = Path(path)
    if format is not None and format not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {format!r}")
    if not path.is_file():
        raise ValueError(f"event file {str(path)!r} does not exist or is not a file")
    doc = _read_json(path)
    kind = format or _detect(doc)
    readers = {"events": _from_devices, "flash": _from_flash, "fedscale": _from_fedscale}
    try:
        return readers[kind](doc, path.name)
    except ValueError as err:
        raise ValueError(f"{path.name}: {err}") from None
    except (KeyError, TypeError, AttributeError) as err:
        raise ValueError(f"{path.name}: not a {kind} event log ({type(err).__name__}: {err})") from None
