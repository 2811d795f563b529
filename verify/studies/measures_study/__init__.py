"""Which participation measure predicts convergence? A study across every sampler.

FedSUM's bound reads the participation through τ_max and τ_avg (arXiv:2512.18275, §2.2);
other analyses read it through the participation error δ̃²(P) (Wang & Ji, NeurIPS 2022,
arXiv:2205.13648), the hitting or return time of the availability chain (Even, ICML 2023,
arXiv:2302.14428) or its mixing time (Sun, Sun, Yin, NeurIPS 2018; CA-Fed). This study measures
convergence under traces of every participation sampler fedverify has and asks which of these
measures (:mod:`participation.measures`) predicts it on samplers a model has not seen.

* :mod:`.family` — the traces;
* :mod:`.runs` — the problems, the shared step-size grid, the engine's batched runs, saved per
  cell so that a study resumes;
* :mod:`.models` — leave-one-sampler-out model comparison with cluster-bootstrap intervals;
* :mod:`.study` — plan, run, collect, analyse, and the worst-case ranks;
* :mod:`.report` — the report, its findings computed from the data, figures and files.
"""
from .runs import Design
from .study import analyse, cnn_design, collect, estimate_seconds, pending, plan, quick_design, run, worst_case_ranks

__all__ = ["Design", "plan", "pending", "run", "collect", "analyse", "quick_design", "cnn_design", "estimate_seconds",
           "worst_case_ranks"]
