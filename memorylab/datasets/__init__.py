"""Public benchmark datasets as experiment cases: ``import_dataset(store, "locomo", path)``.

A dataset's conversations become sessions (through the one import writer) and its questions the
probes of an experiment spec, the gold answers as facts and the dataset's categories as probe kinds;
``memorylab eval`` runs that spec like any other. The data is not shipped: docs/experiments.md says
where to get each file.
"""
from .cases import DATASETS, DatasetImport, import_dataset

__all__ = ["DATASETS", "DatasetImport", "import_dataset"]
