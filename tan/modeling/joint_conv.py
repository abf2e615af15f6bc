"""MMN's proposal branch: stacked masked 2D convolutions, each followed by
batch norm, then two 1 x 1 convolutions that embed every valid cell twice in
the joint space, once for matching and once for the IoU score (docs/mmn.md §2).

State-dict names follow MMN's code (``proposal_conv.convs.{l}``,
``proposal_conv.bn.{l}``, ``conv1x1_contrastive``, ``conv1x1_iou``), so its
released checkpoints load. The weight maps are built once from the mask (as
for TAN's predictor) instead of being convolved anew every forward. The two
heads run on the valid cells only, as a matrix product, because nothing reads
the others.

TAN's row-strip computation does not apply here: batch norm's statistics are
taken over every cell of each conv's output, the ones no valid cell depends
on included, so they must all be computed.
"""
from torch import nn
from torch.nn import functional as F

from .predictor import build_weight_maps


class JointProposalConv(nn.Module):
    def __init__(self, input_size, hidden_size, kernel_size, num_stack_layers, joint_size, mask2d):
        super().__init__()
        padding = (kernel_size - 1) * num_stack_layers // 2
        self.bn = nn.ModuleList(nn.BatchNorm2d(hidden_size) for _ in range(num_stack_layers))
        convs = [nn.Conv2d(input_size, hidden_size, kernel_size, padding=padding)]
        convs += [nn.Conv2d(hidden_size, hidden_size, kernel_size) for _ in range(num_stack_layers - 1)]
        self.convs = nn.ModuleList(convs)
        self.conv1x1_iou = nn.Conv2d(hidden_size, joint_size, 1)
        self.conv1x1_contrastive = nn.Conv2d(hidden_size, joint_size, 1)
        for index, weight in enumerate(build_weight_maps(mask2d, kernel_size, num_stack_layers)):
            self.register_buffer(f"weight_map_{index}", weight, persistent=False)
        n = mask2d.shape[-1]
        i, j = mask2d.nonzero(as_tuple=True)
        self.register_buffer("cells", i * n + j, persistent=False)  # valid cells, row-major

    @staticmethod
    def _embed(head, x):
        # A 1 x 1 conv over the selected cells: x [V, H, C] -> [V, J, C].
        return F.conv1d(x, head.weight[..., 0], head.bias)

    def forward(self, x):
        """x [V, H_in, N, N] -> (matching, IoU) cell embeddings, each [V, J, C] over the C valid cells."""
        for index, (conv, bn) in enumerate(zip(self.convs, self.bn)):
            weight = getattr(self, f"weight_map_{index}")
            x = bn(conv(x)).relu() * weight.to(x.dtype)
        cells = x.flatten(2).index_select(2, self.cells)  # [V, H, C]
        return self._embed(self.conv1x1_contrastive, cells), self._embed(self.conv1x1_iou, cells)
