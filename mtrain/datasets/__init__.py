"""Datasets, samplers and the data loader builder."""

from .builder import build_dataloader
from .digits import DigitsDataset
from .samplers import DistributedSampler

__all__ = ['DigitsDataset', 'DistributedSampler', 'build_dataloader']
