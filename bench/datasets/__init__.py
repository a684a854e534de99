"""Labeled query datasets."""

from bench.datasets.loader import (Dataset, LabelProblem, available_datasets, check_against_tools,
                                   iter_label_problems, load_dataset)

__all__ = ["Dataset", "LabelProblem", "available_datasets", "check_against_tools",
           "iter_label_problems", "load_dataset"]
