"""JAX functions the audit tests read (this file is audited as FILE.py:FUNCTION, in a jax subprocess)."""

import jax


def matmul(a, b):
    """One product; the four cases of chapter 3 differ only in the inputs' shardings."""
    return a @ b


def mlp(x, w_in, w_out):
    """A two-layer MLP: FSDP or Megatron by the inputs' shardings."""
    h = jax.nn.gelu(x @ w_in)
    return h @ w_out
