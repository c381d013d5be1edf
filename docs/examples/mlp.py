"""A two-layer MLP for ``shardalg audit`` (README, "Auditing real code")."""

import jax


def mlp(x, w_in, w_out):
    h = jax.nn.gelu(x @ w_in)
    return h @ w_out
