"""Labeled query datasets."""

from bench.datasets.labels import check_against_tools
from bench.datasets.loader import Dataset, available_datasets, load_dataset

__all__ = ["Dataset", "available_datasets", "check_against_tools", "load_dataset"]
