"""References from a theorem's declaration to its conformance search space
(``verify.search_spaces``), resolved only when a search runs, so that declaring a theorem loads
no hypothesis."""
from __future__ import annotations

__all__ = ["space"]


def space(name: str, **options):
    """``(draw, n, T) -> (problem, trace or pattern, hparams)``: ``verify.search_spaces.<name>``
    called with ``options``."""
    def draw_case(draw, n, T):
        import verify.search_spaces as spaces

        return getattr(spaces, name)(draw, n, T, **options)
    return draw_case
