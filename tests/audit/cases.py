"""JAX functions the audit tests read (audited as ``tests/audit/cases.py:FUNCTION`` in a jax subprocess)."""

import jax


def matmul(a, b):
    """One product: the four cases of chapter 3 differ only in the inputs' shardings."""
    return a @ b


def mlp(x, w_in, w_out):
    """A two-layer MLP: FSDP or Megatron by the inputs' shardings."""
    h = jax.nn.gelu(x @ w_in)
    return h @ w_out


def branches_on_data(a, b):
    """Does not trace: Python branches on a traced value."""
    if (a @ b).sum() > 0:
        return a @ b
    return -(a @ b)


NOT_A_FUNCTION = 3
