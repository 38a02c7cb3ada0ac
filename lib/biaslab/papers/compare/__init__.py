"""Notebook 5's glue (one report across models and benchmarks): the tables built from the outputs of notebooks 1-4
(:mod:`.tables`), and the closing sentences rendered from their verdict columns (:mod:`.findings`)."""

from .findings import summary_lines
from .tables import (agreement_table, all_metrics, comparison_groups, decide_pairs, metric, metric_headers,
                     model_metric_table, outputs_root, paired_table, responder_table, source_provenance,
                     tie_group_table, unit_responses, unread_metrics)

__all__ = ["agreement_table", "all_metrics", "comparison_groups", "decide_pairs", "metric", "metric_headers",
           "model_metric_table", "outputs_root", "paired_table", "responder_table", "source_provenance",
           "summary_lines", "tie_group_table", "unit_responses", "unread_metrics"]
