"""The studies behind ``fedverify experiment``: each runs many cells (a run, a programme, a seed),
saves every finished cell as its own file so that a stopped study resumes where it stopped, and
writes its report from the saved cells alone.

* ``experiment``: FedSUM Section 5 (Fig. 1a/1b) on the digits or a user's MNIST files;
  ``seed_study``: the same across seeds, with paired differences and Holm-corrected tests
  (``report_statistics``);
* ``delay_study``: FedSUM's bound and measured convergence across participation traces at
  chosen (τ_max, τ_avg);
* ``tightness_study``: FedSUM Thm 4.1 beside the exact worst case (PEPit);
* ``measures_study``: which participation measure predicts convergence.

What they share: ``cell_store`` (a cell's key, its atomic save and its checked load) and
``verify.report`` (atomic writes, tables, figures).
"""
