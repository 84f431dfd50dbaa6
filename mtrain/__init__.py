"""mtrain: a config-driven PyTorch training framework (the mmcv 1.x runner design)."""

__version__ = '0.1.0'
