"""``masked_im2col_forward`` / ``masked_col2im_forward`` of ``mmcv._ext`` as index gathers.

mmcv 1.7.2's ``MaskedConv2dFunction`` (batch size 1, stride 1) gathers the
``k_h x k_w`` patch around each masked pixel into ``col`` (row
``c * k_h * k_w + i * k_w + j``, column = the mask point; zero outside the
image), multiplies by the weight, and scatters the result back to the masked
pixels of ``im``. Both are one advanced-indexing expression here.
"""

import torch
import torch.nn.functional as F
from torch import Tensor


def masked_im2col_forward(im: Tensor, mask_h_idx: Tensor, mask_w_idx: Tensor, col: Tensor,
                          kernel_h: int, kernel_w: int, pad_h: int, pad_w: int) -> None:
    """Fills ``col`` ``(channels * kernel_h * kernel_w, points)`` from image 0 of ``im``."""
    _, c, h, w = im.shape
    # Pad so every patch is inside; the padding is the zero outside the image.
    top, left = max(pad_h, 0), max(pad_w, 0)
    bottom, right = max(kernel_h - 1 - pad_h, 0), max(kernel_w - 1 - pad_w, 0)
    padded = F.pad(im[0], (left, right, top, bottom))
    rows = (mask_h_idx - pad_h + top).view(-1, 1, 1) + torch.arange(
        kernel_h, device=im.device).view(1, -1, 1)
    cols = (mask_w_idx - pad_w + left).view(-1, 1, 1) + torch.arange(
        kernel_w, device=im.device).view(1, 1, -1)
    patches = padded[:, rows, cols]  # c, points, kernel_h, kernel_w
    col.copy_(patches.permute(0, 2, 3, 1).reshape(c * kernel_h * kernel_w, -1))


def masked_col2im_forward(col: Tensor, mask_h_idx: Tensor, mask_w_idx: Tensor, im: Tensor,
                          height: int, width: int, channels: int) -> None:
    """Writes ``col[c, m]`` to pixel ``(mask_h_idx[m], mask_w_idx[m])`` of image 0 of ``im``."""
    im[0, :channels, mask_h_idx, mask_w_idx] = col[:channels].to(im.dtype)


ENTRY_POINTS = {
    'masked_im2col_forward': masked_im2col_forward,
    'masked_col2im_forward': masked_col2im_forward,
}
