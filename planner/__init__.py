"""annoplan's planner: how much human overlap validates an LLM judge, and what the labels say.

Pure numpy/scipy. Label matrices are int codes of shape ``(n_items, n_raters)``, ``-1`` for
a missing cell (``MISSING``). The names below are the public API; the modules also export
their building blocks (``rules``, ``pools``, ``significance``, ``resampling``, ``tables``,
``verdicts``) for the other modules and for tests. Vocabulary: docs/vocabulary.md; method:
docs/method.md.
"""

from planner.aggregation import Aggregate, aggregate, cluster_bootstrap
from planner.agreement import (
    AgreementResult,
    Estimate,
    binary_association,
    cohen_kappa,
    fleiss_kappa,
    gwet_ac1,
    kappa_from_table,
    krippendorff_alpha,
    mean_pairwise_kappa,
    pabak,
    pairwise,
    percent_agreement,
    scott_pi,
    summary_table,
)
from planner.bca import bca_interval
from planner.bounds import allocation_bounds, manski_bounds, mcnemar_exact
from planner.certificate import certificate_statement, verify_certificate
from planner.codes import CANNOT_ASSESS, INVALID, MISSING, check_codes
from planner.decision import Ranking, Validation, rank_judges, validate_judge
from planner.designs import (
    DESIGNS,
    DesignChoice,
    choose_design,
    depth_first,
    design_masks,
    joint_strata,
    modal_strata,
    neyman,
    proportional_allocation,
    random_subsets,
    seq_coverage,
    seq_refined,
    shared_panel,
    strat,
    stratum_entropy,
)
from planner.intervals import ConfidenceInterval, optional_float, percentile_interval
from planner.neyman import moment_variances, neyman_allocation, prior_variances
from planner.patterns import ItemPatterns, item_patterns
from planner.plan_check import CHECK_DESIGNS, DesignCheck, check_design, raised_check, simulated_choice
from planner.ppi import ppi_mean
from planner.protocol import Protocol, Summary, summarize, summarize_codes
from planner.recipes import (
    OverlapPlan,
    PilotMoments,
    Recipe,
    advantage_moments,
    alt_test_quantile,
    certify_recipe,
    false_rejection_rate,
    m_alt_test,
    m_cert,
    m_rank,
    overlap_plan,
    pilot_moments,
    prior_moments,
    rank_recipe,
    ratio_moments,
)
from planner.rules import COEFFICIENTS, DEFAULT_EPSILON, RULES
from planner.sequential import Monitoring, confidence_sequence, monitor_judge
from planner.simulate import SimulationResult, replay, simulate, synthetic_codes
from planner.verdicts import VerdictTable, verdict_table

__all__ = [
    "CANNOT_ASSESS",
    "CHECK_DESIGNS",
    "COEFFICIENTS",
    "DEFAULT_EPSILON",
    "DESIGNS",
    "DesignCheck",
    "INVALID",
    "MISSING",
    "RULES",
    "Aggregate",
    "AgreementResult",
    "ConfidenceInterval",
    "DesignChoice",
    "Estimate",
    "ItemPatterns",
    "Monitoring",
    "OverlapPlan",
    "PilotMoments",
    "Protocol",
    "Ranking",
    "Recipe",
    "SimulationResult",
    "Summary",
    "Validation",
    "VerdictTable",
    "advantage_moments",
    "aggregate",
    "allocation_bounds",
    "alt_test_quantile",
    "bca_interval",
    "binary_association",
    "certificate_statement",
    "certify_recipe",
    "check_codes",
    "check_design",
    "choose_design",
    "cluster_bootstrap",
    "cohen_kappa",
    "confidence_sequence",
    "depth_first",
    "design_masks",
    "false_rejection_rate",
    "fleiss_kappa",
    "gwet_ac1",
    "item_patterns",
    "joint_strata",
    "kappa_from_table",
    "krippendorff_alpha",
    "m_alt_test",
    "m_cert",
    "m_rank",
    "manski_bounds",
    "mcnemar_exact",
    "mean_pairwise_kappa",
    "modal_strata",
    "moment_variances",
    "monitor_judge",
    "neyman",
    "neyman_allocation",
    "optional_float",
    "overlap_plan",
    "pabak",
    "pairwise",
    "percent_agreement",
    "percentile_interval",
    "pilot_moments",
    "ppi_mean",
    "prior_moments",
    "prior_variances",
    "proportional_allocation",
    "random_subsets",
    "rank_judges",
    "rank_recipe",
    "raised_check",
    "ratio_moments",
    "replay",
    "scott_pi",
    "seq_coverage",
    "seq_refined",
    "shared_panel",
    "simulate",
    "simulated_choice",
    "strat",
    "stratum_entropy",
    "summarize",
    "summarize_codes",
    "summary_table",
    "synthetic_codes",
    "validate_judge",
    "verdict_table",
    "verify_certificate",
]
