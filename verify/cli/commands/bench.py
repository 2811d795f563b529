"""``fedverify bench``: throughput ratios measured in one run."""
from __future__ import annotations

from . import arguments

HELP = ("throughput ratios against straightforward implementations, batched runs against the same runs one at a "
        "time, Flower (with fedverify[peers]) and, on a GPU, the CPU")


def add_arguments(parser) -> None:
    """The options of ``bench``."""
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("--workers", type=arguments.processes, default=1, help="also time Monte-Carlo on this many processes")


def run(args) -> str:
    """The bench report."""
    from ...bench import report

    return report(quick=args.quick, workers=args.workers)
