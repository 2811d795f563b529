"""Saved cells of a resumable study: each cell's result in ``FOLDER/cells/<key>.json``, ``key``
the sha256 of the cell's configuration in canonical JSON, written atomically as soon as it is
computed, so that a stopped study resumes where it stopped and a changed configuration is a new
cell. The tightness study (``verify.studies.tightness_study``) and the measures study
(``verify.studies.measures_study``) keep their cells here.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from ..report import number, write_json

__all__ = ["cell_key", "cell_path", "load_cell", "save_cell"]


def cell_key(config: dict) -> str:
    """sha256 (hex) of the config's canonical JSON: the cell's file name."""
    text = json.dumps(config, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def cell_path(folder, key: str) -> Path:
    return Path(folder) / "cells" / f"{key}.json"


def load_cell(folder, key: str) -> dict | None:
    """The saved result of cell ``key``, or None when it is missing or is not the record of
    its own config."""
    try:
        data = json.loads(cell_path(folder, key).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("key") != key or cell_key(data.get("config", {})) != key:
        return None
    return data.get("result")


def save_cell(folder, config: dict, result: dict) -> Path:
    """Write ``result`` as the cell of ``config`` (top-level floats JSON-safe)."""
    key = cell_key(config)
    record = {"key": key, "config": config, "result": {k: number(v) if isinstance(v, float) else v
                                                       for k, v in result.items()}}
    return write_json(cell_path(folder, key), record)
