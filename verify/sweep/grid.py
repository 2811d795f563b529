"""The grid of a sweep: a spec's tables with every name checked, their sizes, and their cells.

``iter_cells(spec)`` yields the spec's ``Cell`` s in spec order, each once, one at a time
(``expand(spec)`` lists them); ``count_cells(spec)`` counts them without expanding.

Sizes. The cells are counted before anything is expanded: the product of the lengths of a
table's lists, summed over the tables (an upper bound: two tables may share cells). A spec
of more than ``max_cells`` cells (default ``MAX_CELLS`` = 100,000) is refused with the count
and the limit; write ``max_cells = N`` at the top of the spec to allow more. The cells
themselves are never all held at once (they stream to the workers, a few per worker in
flight); the table of results is, about 4 KiB a cell, within ``participation.budget``'s memory
limit, and so is each table's largest cell (its trace and history, problem and noise seeds'
results for a check, ``check_monte_carlo`` for a Monte-Carlo job), checked with the names
before any cell runs and refused in one line naming the table and the cell's fields.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping, Sequence

from participation import Trace
from participation.budget import require_memory

from . import worst_case_cells
from .cells import Cell, _file_sha256, _scaled_pattern
from .spec import KINDS, Spec, _as_spec, _short
from ..choices import PROBLEMS, TRACE_SUFFIXES, canonical, problem_bytes

__all__ = ["count_cells", "iter_cells", "expand"]


#: Memory one cell of a sweep keeps until the end (its row of the table), for the budget check.
_CELL_BYTES = 4096


class _Resolver:
    """Validates and canonicalises names (algorithms, theorems, patterns), once per name."""

    def __init__(self, base: Path):
        self.base = base
        self.algorithms: dict[str, str] = {}
        self.theorems: dict[str, str] = {}
        self.patterns: dict[tuple, tuple] = {}
        self.scaled: set[tuple] = set()
        self.file_rounds: dict[str, int] = {}

    def algorithm(self, name: str) -> str:
        if name not in self.algorithms:
            import algorithms

            self.algorithms[name] = algorithms.get(name).name
        return self.algorithms[name]

    def theorem(self, name: str) -> str:
        if name not in self.theorems:
            from ..checking import resolve_theorem

            self.theorems[name] = resolve_theorem(name).name
        return self.theorems[name]

    def problem(self, name: str) -> str:
        if name not in PROBLEMS:
            raise ValueError(f"unknown problem {_short(name)}; choose from {', '.join(PROBLEMS)}")
        return name

    def pattern(self, text: str, n_clients: int | None, files: bool) -> tuple[str, dict, str | None]:
        """(label, extra config, trace file) of a preset scaled to ``n_clients`` or a trace file."""
        if (text, files) not in self.patterns:
            self.patterns[text, files] = self._pattern(text, files)
        label, extra, trace_file, clients = self.patterns[text, files]
        if trace_file is not None:
            if clients != n_clients:
                raise ValueError(f"trace {Path(trace_file).name} has {clients} clients but n_clients is {n_clients}")
        elif n_clients is not None and (label, n_clients) not in self.scaled:
            _scaled_pattern(label, n_clients)
            self.scaled.add((label, n_clients))
        return label, extra, trace_file

    def _pattern(self, text: str, files: bool):
        from participation.patterns import preset_names

        label = canonical(text)
        if label in preset_names():
            return label, {}, None, None
        path = self.base / text
        if not files or not (path.suffix.lower() in TRACE_SUFFIXES or path.exists()):
            what = "a preset" if not files else f"a preset or a trace file ({', '.join(TRACE_SUFFIXES)})"
            raise ValueError(f"unknown pattern {_short(text)}: not {what}; presets: {', '.join(preset_names())}")
        if not path.is_file():
            raise ValueError(f"trace file {_short(text)} not found in {str(self.base)!r}")

        trace = Trace.load(path)
        self.file_rounds[str(path.resolve())] = trace.n_rounds
        return path.name, {"trace_sha256": _file_sha256(path)}, str(path.resolve()), trace.n_clients


def _singular(key: str) -> str:
    return {"problems": "problem", "algorithms": "algorithm", "patterns": "pattern", "theorems": "theorem",
            "seeds": "seed", "solvers": "solver"}.get(key, key)


def _table_size(grid: dict) -> int:
    return math.prod(len(values) for values in grid.values())


def count_cells(spec) -> int:
    """The number of cells of ``spec``, counted without expanding it: the product of the
    lengths of each table's lists, summed over the tables. Two tables that share cells count
    them twice (the sweep runs them once), so this is an upper bound; it is what
    ``max_cells`` limits."""
    spec = _as_spec(spec)
    return sum(_table_size(grid) for kind in KINDS for grid in getattr(spec, kind))


def _check_size(spec: Spec) -> int:
    """``count_cells(spec)``, or a one-line ValueError when it is above the spec's
    ``max_cells`` or the table of that many cells would not fit the memory budget."""
    n = count_cells(spec)
    if n > spec.max_cells:
        raise ValueError(f"the spec has {n:,} cells, more than the limit of {spec.max_cells:,}; "
                         f"shorten its lists, or write max_cells = {n} at the top of the spec to run them all")
    require_memory(n * _CELL_BYTES, f"a sweep of {n:,} cells")
    return n


@dataclass(frozen=True)
class _Table:
    """One table of a spec with every value checked and canonical: ``axes`` in product
    order, a pattern as (label, extra config, trace file); ``ids`` per axis, the values that
    make a cell's config (to tell the cells an earlier table already has)."""

    kind: str
    axes: tuple[tuple[str, tuple], ...]
    ids: tuple[frozenset, ...]
    where: str = ""


def _pattern_id(item: tuple) -> tuple:
    label, extra, _ = item
    return label, tuple(sorted(extra.items()))


def _tables(spec: Spec) -> list[_Table]:
    """The spec's tables, every name checked (algorithms, theorems, problems, presets and
    their scaling to each n_clients, trace files) once per distinct value, not per cell."""
    resolver = _Resolver(spec.base)
    tables = []
    for kind in KINDS:
        grids = getattr(spec, kind)
        for i, grid in enumerate(grids):
            where = kind if len(grids) == 1 else f"{kind}[{i}]"
            axes = {}
            what = "patterns"
            try:
                if kind == "check":
                    what = "problems"
                    axes["problems"] = tuple(dict.fromkeys(resolver.problem(v) for v in grid["problems"]))
                    what = "algorithms"
                    axes["algorithms"] = tuple(dict.fromkeys(resolver.algorithm(v) for v in grid["algorithms"]))
                    what = "theorems"
                    axes["theorems"] = tuple(dict.fromkeys(resolver.theorem(v) for v in grid["theorems"]))
                elif kind == "worst_case":
                    what = "algorithms and theorems"
                    axes["algorithms"], axes["theorems"] = worst_case_cells.check_names(grid["algorithms"],
                                                                                        grid["theorems"])
                what = "patterns"
                patterns = {}
                for text in grid["patterns"]:
                    for n_clients in grid["n_clients"]:
                        item = resolver.pattern(text, n_clients, files=kind != "monte_carlo")
                    patterns.setdefault(_pattern_id(item), item)
            except ValueError as err:
                raise ValueError(f"{where}.{what}: {' '.join(str(err).split())}") from None
            axes["patterns"] = tuple(patterns.values())
            ordered = tuple((key, axes.get(key, grid[key])) for key in grid)
            ids = tuple(frozenset(_pattern_id(v) for v in values) if key == "patterns" else frozenset(values)
                        for key, values in ordered)
            tables.append(_Table(kind, ordered, ids, where))
    _check_cell_sizes(tables, resolver.file_rounds)
    return tables


#: What one check cell keeps, counted as ``fedverify check`` counts a run: its history a round (the
#: trace adds N booleans a round), and each noise seed's number and measured value.
_HISTORY_BYTES, _SEED_BYTES = 64, 128


def _check_cell_sizes(tables: Sequence[_Table], file_rounds: Mapping[str, int]) -> None:
    """Refuse, before any cell runs, a table whose largest cell cannot fit the memory limit, in
    one line naming the table, the fields of that cell with their values, the need and the limit.
    A check cell holds one run's trace and history (a trace file runs its own length where it is
    shorter), the problem's clients and its noise seeds' results; a Monte-Carlo cell is checked by
    ``check_monte_carlo`` (its replicates' results and its largest chunk) at the table's largest
    rounds and reps, for every pattern and n_clients."""
    for table in tables:
        axes = dict(table.axes)
        if table.kind == "check":
            _check_run_sizes(table.where, axes, file_rounds)
        elif table.kind == "monte_carlo":
            _check_monte_carlo_sizes(table.where, axes)


def _refuse_cells(where: str, fields: Mapping, nbytes: float, what: str) -> None:
    """``require_memory`` for the cells of table ``where`` with these ``fields`` (name → value)."""
    cells = ", ".join(f"{key} = {_short(value)}" for key, value in fields.items())
    require_memory(nbytes, f"{where} cells with {cells}: {what}")


def _check_run_sizes(where: str, axes: Mapping, file_rounds: Mapping[str, int]) -> None:
    n, rounds, runs = max(axes["n_clients"]), max(axes["rounds"]), max(axes["runs"])
    run = max(rounds if path is None else min(rounds, file_rounds[path]) for _, _, path in axes["patterns"])
    _refuse_cells(where, {"rounds": rounds, "n_clients": n}, run * (n + _HISTORY_BYTES), "one run's trace and history")
    _refuse_cells(where, {"runs": runs}, runs * _SEED_BYTES, "the noise seeds' results")
    for problem in axes["problems"]:
        _refuse_cells(where, {"problem": problem, "n_clients": n}, problem_bytes(problem, n), "the problem")


def _check_monte_carlo_sizes(where: str, axes: Mapping) -> None:
    from participation.expected import check_monte_carlo
    from participation.expected.montecarlo import RESULT_BYTES, clear_table_caches

    rounds, reps = max(axes["rounds"]), max(axes["reps"])
    _refuse_cells(where, {"reps": reps}, reps * RESULT_BYTES, f"{reps} replicates' τ_max and τ_avg")
    try:
        for label, _, _ in axes["patterns"]:
            for n in axes["n_clients"]:
                fields = {"pattern": label, **({} if n is None else {"n_clients": n}), "rounds": rounds, "reps": reps}
                try:
                    check_monte_carlo(_scaled_pattern(label, n), rounds, reps)
                except ValueError as err:
                    cells = ", ".join(f"{key} = {_short(value)}" for key, value in fields.items())
                    raise ValueError(f"{where} cells with {cells}: {err}") from None
    finally:
        clear_table_caches()     # the cells build their own tables, in their own processes


def _walk(tables: Sequence[_Table]) -> Iterator[Cell | None]:
    """Every position of every table, in spec order: its ``Cell``, or None where an earlier
    table of the same kind already has that cell. Nothing is held but the current cell."""
    for j, table in enumerate(tables):
        earlier = [t.ids for t in tables[:j] if t.kind == table.kind]
        names = [_singular(key) for key, _ in table.axes]
        position = names.index("pattern")
        for values in itertools.product(*(values for _, values in table.axes)):
            if earlier and any(all((_pattern_id(v) if k == position else v) in ids[k] for k, v in enumerate(values))
                               for ids in earlier):
                yield None
                continue
            config = dict(zip(names, values))
            label, extra, trace_file = values[position]
            config["pattern"] = label
            config.update(extra)
            yield Cell(table.kind, config, trace_file)


def iter_cells(spec) -> Iterator[Cell]:
    """The cells of ``spec`` (a ``Spec``, a mapping or a path), in spec order, each once, one
    at a time.

    The spec is checked at the call, before the first cell: its size (``count_cells``
    against ``max_cells`` and the memory budget) and every name (algorithms, theorems,
    problems, presets, trace files), so a bad spec fails before anything runs, with a
    ValueError naming the key and the value."""
    spec = _as_spec(spec)
    _check_size(spec)
    return (cell for cell in _walk(_tables(spec)) if cell is not None)


def expand(spec) -> list[Cell]:
    """The cells of ``spec`` as a list (``iter_cells`` streams them); refused, like
    ``iter_cells``, above ``max_cells``."""
    return list(iter_cells(spec))
