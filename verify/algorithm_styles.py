"""One colour and one line style per algorithm, the same in every figure.

FedSUM and FedSUM-CR often lie on top of each other (their curves differ by less than the
line's width), so they differ in line style as well as colour; so do the two baselines that
lead the FedSUM experiment (SCAFFOLD, FedVARP). An algorithm not listed (a plugin's) gets a
colour from the rest of matplotlib's tab10 cycle, chosen by its name, so that it too keeps
its colour from figure to figure.
"""
from __future__ import annotations

import zlib

#: name -> (colour, line style)
STYLES = {
    "fedsum": ("tab:blue", "-"),
    "fedsum-cr": ("tab:orange", "--"),
    "fedsum-b": ("tab:cyan", ":"),
    "fedavg": ("tab:green", "-"),
    "fedau": ("tab:purple", "-"),
    "fedawe": ("tab:brown", "-"),
    "fedvarp": ("tab:red", "-."),
    "mifa": ("tab:gray", "-"),
    "scaffold": ("tab:pink", (0, (6, 2))),
    "fedavgm": ("tab:olive", "-"),
}
_SPARE = ("tab:olive", "black", "gold", "teal", "navy", "crimson")
_SPARE_DASHES = ("-", "--", "-.", ":")


def style(name: str) -> dict:
    """``color`` and ``linestyle`` keyword arguments for ``Axes.plot`` of algorithm ``name``."""
    if name in STYLES:
        colour, dashes = STYLES[name]
    else:
        key = zlib.crc32(name.encode())
        colour, dashes = _SPARE[key % len(_SPARE)], _SPARE_DASHES[(key // len(_SPARE)) % len(_SPARE_DASHES)]
    return {"color": colour, "linestyle": dashes}
