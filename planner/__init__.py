"""annoplan's planner: how much human overlap validates an LLM judge, and what the labels say.

Pure numpy/scipy. Label matrices are int codes of shape ``(n_items, n_raters)``, ``-1`` for
a missing cell (``MISSING``). The names below are the public API; the modules also export
their building blocks (``rules``, ``pools``, ``significance``, ``resampling``, ``tables``,
``verdicts``) for the other modules and for tests. Vocabulary: docs/vocabulary.md; method:
docs/method.md.
"""

from planner.aggregation import (
    Aggregate,
    aggregate,
    cluster_bootstrap,
)
from planner.agreement import (
    binary_association,
    cohen_kappa,
    fleiss_kappa,
    gwet_ac1,
    kappa_from_table,
    krippendorff_alpha,
    pabak,
    percent_agreement,
    scott_pi,
)
from planner.agreement_results import AgreementResult, Estimate, Scale
from planner.alt_test_recipes import alt_test_quantile, m_alt_test
from planner.bca import (
    bca_interval,
)
from planner.bounds import (
    allocation_bounds,
    manski_bounds,
    mcnemar_exact,
)
from planner.certificate import (
    BIT_GENERATOR,
    certificate_statement,
    label_snapshot,
    sha256_hex,
    verify_certificate,
)
from planner.codes import (
    CANNOT_ASSESS,
    INVALID,
    MISSING,
    SPECIAL,
    check_codes,
    code_type,
)
from planner.confidence_sequences import confidence_sequence
from planner.decision import Validation, validate_judge
from planner.design_choice import DesignChoice, choose_design, stratum_entropy
from planner.design_masks import design_masks
from planner.designs import (
    DESIGNS,
    depth_first,
    design_pool_size,
    disjoint,
    joint_strata,
    neyman,
    proportional_allocation,
    random_subsets,
    shared_panel,
    strat,
)
from planner.estimator_check import (
    raised_estimator_checks,
)
from planner.false_rejection import false_rejection_rate, m_cert, m_rank
from planner.icc import (
    ICC_FORMS,
    IccForm,
    IccResult,
    MeanSquares,
    intraclass_correlation,
    intraclass_correlations,
    mean_squares,
)
from planner.intervals import (
    ConfidenceInterval,
    optional_float,
    percentile_interval,
)
from planner.list_arrival import PlannedList, listed_arrival, lists_within
from planner.monitor_simulation import simulate_monitoring
from planner.monitor_sizing import (
    MAX_SIZING_CELLS,
    SIZING_TRIALS,
    AnytimeSizing,
    monitor_runs,
    service_order_panel,
    size_for_monitor,
)
from planner.neyman import (
    AllItemsVariances,
    moment_variances,
    neyman_allocation,
    pilot_stratum_sds,
    prior_cells,
    prior_stratum_sds,
    prior_variances,
)
from planner.overlap_samples import CHECK_DESIGNS
from planner.patterns import (
    ItemPatterns,
    item_patterns,
)
from planner.plan_check import (
    DesignCheck,
    check_design,
    fitted_channel,
    mirror_accuracy,
    needs_no_raise,
    promise_status,
    raised_check,
    raised_m,
    simulated_choice,
    true_prevalence,
)
from planner.ppi import (
    ppi_mean,
)
from planner.preferences import (
    BradleyTerry,
    PairwiseAccuracy,
    PositionConsistency,
    PPIBradleyTerry,
    bradley_terry,
    pairwise_accuracy,
    position_consistency,
    ppi_bradley_terry,
)
from planner.protocol import (
    Protocol,
    Summary,
    summarize,
    summarize_codes,
)
from planner.ranking import Ranking, rank_judges
from planner.rater_pairs import mean_pairwise_kappa, pairwise, summary_table
from planner.ratio_moments import RATIO_COEFFICIENTS, RatioPrior, ratio_moments
from planner.recipes import OverlapPlan, Recipe, certify_recipe, overlap_plan, rank_recipe
from planner.resampling import (
    ItemResample,
)
from planner.rules import (
    COEFFICIENTS,
    DEFAULT_EPSILON,
    RULES,
    Coefficient,
    Rule,
)
from planner.score_decision import (
    SCORE_RULES,
    ScoreRaterOutcome,
    ScoreRule,
    ScoreValidation,
    validate_scores,
)
from planner.score_monitor import (
    ScoreMonitoring,
    ScoreRaterMonitoring,
    monitor_scores,
    score_monitor_budget,
)
from planner.score_ranking import SCORE_RANK_SHARE, ScoreRanking, rank_score_judges, score_rank_variance
from planner.score_recipes import (
    ScorePlanCheck,
    pilot_differences,
    raised_score_check,
    score_pilot,
    score_plan_check,
    score_recipe,
)
from planner.score_slices import (
    ScoreSliceMonitoring,
    ScoreSliceOutcome,
    ScoreSliceValidation,
    monitor_scores_by_slice,
    validate_scores_by_slice,
)
from planner.scores import (
    BlandAltmanResult,
    ConcordanceResult,
    ErrorResult,
    IntervalAlphaResult,
    bland_altman,
    concordance_correlation,
    interval_alpha,
    limits_of_agreement,
    mean_absolute_error,
    root_mean_squared_error,
)
from planner.selective import (
    SelectiveCalibration,
    SelectiveStage,
    calibrate_selective,
    majority_labels,
    selective_assignment,
)
from planner.seq_designs import modal_strata, seq_coverage, seq_list, seq_refined
from planner.sequential import Monitoring, MonitorState, kept_monitoring, monitor_judge
from planner.simulate import SimulationResult, replay, simulate
from planner.slices import (
    SliceMonitoring,
    SliceOutcome,
    SliceValidation,
    monitor_judge_by_slice,
    validate_judge_by_slice,
)
from planner.synthetic import synthetic_codes
from planner.trial_decisions import DecisionRule
from planner.verdicts import (
    VerdictTable,
    verdict_table,
)
from planner.versions import (
    DriftDetection,
    VersionComparison,
    anchor_panel_size,
    compare_versions,
    drift_detection,
    independent_discordance,
)
from planner.xi_moments import (
    PilotMoments,
    XiLattice,
    advantage_moments,
    ladder_variance,
    paired_variance,
    pilot_moments,
    prior_moments,
    xi_lattice,
)

__all__ = [
    "pilot_differences",
    "score_monitor_budget",
    "SelectiveCalibration",
    "SelectiveStage",
    "calibrate_selective",
    "majority_labels",
    "selective_assignment",
    "SliceMonitoring",
    "SliceOutcome",
    "SliceValidation",
    "monitor_judge_by_slice",
    "validate_judge_by_slice",
    "BradleyTerry",
    "PairwiseAccuracy",
    "PositionConsistency",
    "PPIBradleyTerry",
    "bradley_terry",
    "pairwise_accuracy",
    "position_consistency",
    "ppi_bradley_terry",
    "DriftDetection",
    "VersionComparison",
    "anchor_panel_size",
    "compare_versions",
    "drift_detection",
    "independent_discordance",
    "DecisionRule",
    "mirror_accuracy",
    "MAX_SIZING_CELLS",
    "SIZING_TRIALS",
    "AnytimeSizing",
    "monitor_runs",
    "size_for_monitor",
    "service_order_panel",
    "RatioPrior",
    "ladder_variance",
    "Coefficient",
    "IccForm",
    "Rule",
    "Scale",
    "BIT_GENERATOR",
    "CANNOT_ASSESS",
    "CHECK_DESIGNS",
    "COEFFICIENTS",
    "DEFAULT_EPSILON",
    "DESIGNS",
    "ICC_FORMS",
    "INVALID",
    "MISSING",
    "RATIO_COEFFICIENTS",
    "RULES",
    "SPECIAL",
    "Aggregate",
    "AgreementResult",
    "AllItemsVariances",
    "BlandAltmanResult",
    "ConcordanceResult",
    "ConfidenceInterval",
    "DesignCheck",
    "DesignChoice",
    "ErrorResult",
    "Estimate",
    "IccResult",
    "IntervalAlphaResult",
    "ItemPatterns",
    "ItemResample",
    "MeanSquares",
    "MonitorState",
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
    "XiLattice",
    "advantage_moments",
    "aggregate",
    "allocation_bounds",
    "alt_test_quantile",
    "bca_interval",
    "binary_association",
    "bland_altman",
    "certificate_statement",
    "certify_recipe",
    "check_codes",
    "check_design",
    "choose_design",
    "cluster_bootstrap",
    "code_type",
    "cohen_kappa",
    "concordance_correlation",
    "confidence_sequence",
    "depth_first",
    "design_masks",
    "design_pool_size",
    "disjoint",
    "false_rejection_rate",
    "fitted_channel",
    "fleiss_kappa",
    "gwet_ac1",
    "interval_alpha",
    "intraclass_correlation",
    "intraclass_correlations",
    "item_patterns",
    "joint_strata",
    "kappa_from_table",
    "kept_monitoring",
    "krippendorff_alpha",
    "label_snapshot",
    "limits_of_agreement",
    "m_alt_test",
    "m_cert",
    "m_rank",
    "manski_bounds",
    "mcnemar_exact",
    "mean_absolute_error",
    "mean_pairwise_kappa",
    "mean_squares",
    "modal_strata",
    "moment_variances",
    "monitor_judge",
    "needs_no_raise",
    "neyman",
    "neyman_allocation",
    "optional_float",
    "overlap_plan",
    "pabak",
    "paired_variance",
    "pairwise",
    "percent_agreement",
    "percentile_interval",
    "pilot_moments",
    "pilot_stratum_sds",
    "ppi_mean",
    "prior_cells",
    "prior_moments",
    "prior_stratum_sds",
    "prior_variances",
    "promise_status",
    "proportional_allocation",
    "raised_check",
    "raised_estimator_checks",
    "raised_m",
    "random_subsets",
    "rank_judges",
    "rank_recipe",
    "ratio_moments",
    "replay",
    "root_mean_squared_error",
    "scott_pi",
    "seq_coverage",
    "seq_list",
    "seq_refined",
    "sha256_hex",
    "shared_panel",
    "simulate",
    "simulate_monitoring",
    "simulated_choice",
    "strat",
    "stratum_entropy",
    "summarize",
    "summarize_codes",
    "summary_table",
    "synthetic_codes",
    "true_prevalence",
    "validate_judge",
    "validate_scores",
    "validate_scores_by_slice",
    "monitor_scores_by_slice",
    "PlannedList",
    "listed_arrival",
    "lists_within",
    "rank_score_judges",
    "score_rank_variance",
    "SCORE_RANK_SHARE",
    "ScoreRanking",
    "ScoreSliceMonitoring",
    "ScoreSliceOutcome",
    "ScoreSliceValidation",
    "ScorePlanCheck",
    "ScoreMonitoring",
    "ScoreRaterMonitoring",
    "monitor_scores",
    "raised_score_check",
    "score_pilot",
    "score_plan_check",
    "score_recipe",
    "ScoreRaterOutcome",
    "ScoreRule",
    "ScoreValidation",
    "SCORE_RULES",
    "verdict_table",
    "verify_certificate",
    "xi_lattice",
]
