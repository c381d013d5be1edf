"""A DTensor module the audit tests read (``tests/audit/dtensor_cases.py:megatron_mlp`` on 4 gloo processes)."""

import torch
from torch import nn
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module


def megatron_mlp(mesh):
    """The Megatron MLP as DTensor writes it: the first Linear column-wise, the second row-wise."""
    mlp = nn.Sequential(nn.Linear(16, 32, bias=False), nn.GELU(), nn.Linear(32, 16, bias=False))
    mlp = parallelize_module(mlp, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
    return mlp, [torch.randn(8, 16, requires_grad=True)]
