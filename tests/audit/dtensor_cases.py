"""A DTensor module the audit tests read (``tests/audit/dtensor_cases.py:megatron_mlp`` on 4 gloo processes)."""

import torch
from torch import nn
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
from torch.nn import functional as F


def megatron_mlp(mesh):
    """The Megatron MLP as DTensor writes it: the first Linear column-wise, the second row-wise."""
    mlp = nn.Sequential(nn.Linear(16, 32, bias=False), nn.GELU(), nn.Linear(32, 16, bias=False))
    mlp = parallelize_module(mlp, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
    return mlp, [torch.randn(8, 16, requires_grad=True)]


class _Activations(nn.Module):
    """An MLP whose hidden value goes through the three functions the audit writes (gelu's tanh form, silu,
    relu), one after the other, so one run reads them all."""

    def __init__(self):
        super().__init__()
        self.up, self.down = nn.Linear(16, 32, bias=False), nn.Linear(32, 16, bias=False)

    def forward(self, x):
        return self.down(F.relu(F.silu(F.gelu(self.up(x), approximate="tanh"))))


def activations_mlp(mesh):
    """The Megatron MLP with gelu (tanh), silu and relu between its products."""
    mlp = parallelize_module(_Activations(), mesh, {"up": ColwiseParallel(), "down": RowwiseParallel()})
    return mlp, [torch.randn(8, 16, requires_grad=True)]
