"""A confusion matrix as a PNG (matplotlib, imported only when a plot is written)."""

import os
import os.path as osp
from typing import Sequence

import torch

#: Beyond this many classes the cell counts are left out (they would not be legible).
_MAX_ANNOTATED = 30


def save_confusion_matrix(matrix: torch.Tensor, class_names: Sequence[str],
                          out_file: str) -> str:
    """Draw ``matrix`` (rows: true class, columns: predicted) and write it to ``out_file``.

    Rows are normalised to recall so classes of different sizes share one
    colour scale; each cell shows the raw count.

    Args:
        matrix: ``(C, C)`` integer counts, e.g. from :func:`confusion_matrix`.
        class_names: ``C`` tick labels.
        out_file: the PNG path (its folder is created).

    Returns:
        ``out_file``.
    """
    # Imported here: matplotlib costs ~0.5 s and only evaluations that plot need it.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    counts = matrix.detach().cpu().long()
    rates = counts.double() / counts.sum(dim=1, keepdim=True).clamp(min=1)
    num_classes = len(counts)
    side = min(max(4.0, 0.5 * num_classes + 2), 40.0)
    fig = Figure(figsize=(side, side))
    FigureCanvasAgg(fig)  # attaches the Agg canvas: no GUI backend, no pyplot state
    ax = fig.add_subplot()
    image = ax.imshow(rates.numpy(), cmap='Blues', vmin=0.0, vmax=1.0)
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label='share of the true class')
    ax.set(xticks=range(num_classes), yticks=range(num_classes),
           xlabel='predicted class', ylabel='true class', title='Confusion matrix')
    ax.set_xticklabels(class_names, rotation=45, ha='right')
    ax.set_yticklabels(class_names)
    if num_classes <= _MAX_ANNOTATED:
        for true in range(num_classes):
            for pred in range(num_classes):
                ax.text(pred, true, str(counts[true, pred].item()), ha='center', va='center',
                        color='white' if rates[true, pred] > 0.5 else 'black')
    fig.tight_layout()
    os.makedirs(osp.dirname(osp.abspath(out_file)), exist_ok=True)
    fig.savefig(out_file, dpi=100)
    return out_file
