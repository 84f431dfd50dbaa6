"""Datasets, samplers, pipelines and the data loader builder."""

from .builder import build_dataloader, dataset_num_classes
from .digits import DigitsDataset
from .image_classification import ImageClassificationDataset
from .multitask import MultiTaskDigitsDataset, collate_task_batches
from .pipeline import Compose, build_pipeline
from .samplers import DistributedSampler
from .torchvision_datasets import DATASET_NAMES, TRANSFORM_NAMES, LazyTorchvisionEntry

__all__ = ['DATASET_NAMES', 'TRANSFORM_NAMES', 'Compose', 'DigitsDataset', 'DistributedSampler',
           'ImageClassificationDataset', 'LazyTorchvisionEntry', 'MultiTaskDigitsDataset',
           'build_dataloader', 'build_pipeline', 'dataset_num_classes', 'collate_task_batches']
