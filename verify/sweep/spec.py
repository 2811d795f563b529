"""The spec format of ``fedverify sweep``, in a module of its own so that ``--help`` shows it
without importing the sweep (or numpy)."""

__all__ = ["SPEC_FORMAT"]

SPEC_FORMAT = """\
A TOML (.toml) or JSON (.json) file. At the top level:

  description   free text (optional)
  max_cells     the most cells the spec may have (default 100000): a table has the
                product of its lists' lengths, the spec the sum over its tables
  check         a table of check cells, or a list of such tables ([[check]] in TOML)
  monte_carlo   a table of Monte-Carlo jobs, or a list of such tables ([[monte_carlo]])
  worst_case    a table of worst-case cells, or a list of such tables ([[worst_case]])

In a table every key takes one value or a list of values, and the cells are the
Cartesian product of the lists, the last key below varying fastest (a cell that two
tables both produce runs once). A key left out takes the default shown.

[check]: run each algorithm on the problem under the pattern at the step sizes the
theorem prescribes and compare the measured (1/T) Σ_t ‖∇f(x_t)‖² (mean over `runs` noise
seeds, one-sided limits) with the bound, as `fedverify check` does; also record
f(x_T) of the first run.
  problems     "quadratic"            quadratic, logistic-digits, logistic-synthetic, cnn-digits
  algorithms   fedsum-b, fedsum,      any of algorithms.names()
               fedsum-cr, fedavg,
               scaffold
  patterns     P1, P2, P3             presets scaled to n_clients (S = N/5 per round), or trace
                                      files (.npz, .csv, .json; relative to the spec's folder)
  theorems     "fedsum.theorem_4_1"   any theorem `fedverify bound --list` prints
  n_clients    20
  rounds       500                    (a shorter trace file runs its own length)
  local_steps  5
  seeds        0                      seed s: the pattern's trace has seed s and the runs
                                      noise seeds s·runs … s·runs + runs − 1 (so seed 0 is
                                      `fedverify check --seeds RUNS`)
  runs         5                      noise seeds per cell: the sample of the verdict
  confidence   0.95                   one-sided confidence of the verdict, in [0.5, 1)

[monte_carlo]: E[τ_max] and E[τ_avg] over `reps` traces of `rounds` rounds, with
confidence intervals, beside the exact values (where a formula exists) and FedSUM's
App. F bound on E[τ_max] (where it applies), as `fedverify mc` does.
  patterns     P1, P2, P3             presets (fedverify delays --list)
  n_clients    the preset's own       scale the preset to N clients (S = N/5 per round)
  rounds       2000
  reps         1000                   at least 2
  seeds        0
  confidence   0.95                   two-sided confidence of the intervals, in (0, 1)

[worst_case]: the exact worst case of (1/T) Σ_t ‖∇f(x_t)‖² of each algorithm on the
pattern's trace over the theorem's class at σ² = 0 (a semidefinite programme, as `fedverify
worst-case` solves it), beside the theorem's bound at its prescribed step sizes and the
ratio bound / worst case. For a theorem in expectation over the participation the worst
case is the mean over `traces` traces of the per-trace worst cases.
  algorithms   fedsum-b, fedsum       fedsum-b, fedsum, fedsum-cr, fedavg, scaffold, fedgm,
                                      fedavgm, fednag, qhm (those the theorem's class runs)
  patterns     "P1"                   presets with ⌊2N/3⌋ clients a round where they sample, or
                                      trace files (relative to the spec's folder)
  theorems     "fedsum.theorem_4_1"   fedsum.theorem_4_1, fedsum.corollary_4_1,
                                      momentum.theorem_4_1, momentum.theorem_4_6
  n_clients    3                      the programme grows as (N·T·K)²: keep N, T, K small
  rounds       6
  local_steps  2
  seeds        0                      seed of the pattern's trace(s)
  traces       3                      traces per cell of a theorem in expectation
  solvers      "clarabel"             clarabel or scs
  L, delta_f, F0, sigma_g2   1.0      the class's constants (sigma_g2: the momentum theorems)

Output folder: cells/<key>.json (one record per finished cell), cells/<key>.claim while a
sweep runs the cell, and results.csv (one row per cell of the spec, in spec order). Sweeps
started together on one output folder split the cells between them and end with the same
table. A spec file is at most 4 MiB and nests at most 16 levels.
"""
