"""JAX functions with elementwise ops of two tensors for ``shardalg audit`` (docs/audit.md), audited by
tests/audit/test_audit_elementwise.py (as ``docs/examples/elementwise.py:FUNCTION`` in a jax subprocess). One product a line: a collective is
attached to the one statement of its kind on its source line."""

import math

import jax
import jax.numpy as jnp


def residual_mlp(x, w_in, w_out):
    """An MLP with a residual add: ``x + (gelu(x @ w_in) @ w_out)``."""
    h = jax.nn.gelu(x @ w_in)
    y = h @ w_out
    return x + y


def exact_gelu_mlp(x, w_in, w_out):
    """An MLP with gelu's erf form, ``gelu(x @ w_in, approximate=False) @ w_out`` (PyTorch's default gelu)."""
    return jax.nn.gelu(x @ w_in, approximate=False) @ w_out


def gpt2_mlp(x, w_in, w_out):
    """An MLP with gelu written out as GPT-2 writes it: ``0.5 * h * (1 + tanh(sqrt(2/pi) * (h + 0.044715 h^3)))``."""
    h = x @ w_in
    return (0.5 * h * (1 + jnp.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * jnp.power(h, 3))))) @ w_out


def doubled_gelu_mlp(x, w_in, w_out):
    """Not gelu: ``h * (1 + tanh(...))`` is twice gelu (its 0.5 left out): a tanh chain of other constants."""
    h = x @ w_in
    return (h * (1 + jnp.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * jnp.power(h, 3))))) @ w_out


def relu_mlp(x, w_in, w_out):
    """An MLP with relu, ``relu(x @ w_in) @ w_out``."""
    h = jax.nn.relu(x @ w_in)
    return h @ w_out


def gated_mlp(x, w1, w3, w2):
    """A gated MLP: ``(silu(x @ w1) * (x @ w3)) @ w2``."""
    g = jax.nn.silu(x @ w1)
    u = x @ w3
    m = g * u
    return m @ w2


def gain(x, w, g):
    """A gain broadcast along the rows: ``(x @ w) * g`` with g of rank 1."""
    h = x @ w
    return h * g


def add(a, b):
    """A residual add of two inputs (XLA reshards one when their shardings differ)."""
    return a + b


def affine(x, w, g, c):
    """No unary op: every value is a tensor of the program, ``(x @ w) * g - c``."""
    h = x @ w
    s = h * g
    return s - c


def quotient(x, y, w):
    """A div of two tensors (no statement of the notation) and a scale by a constant (unary)."""
    q = x / y
    return (0.5 * q) @ w


def gated_one_line(x, w1, w3, w2):
    """The gated MLP in one line: three products on one source line."""
    return (jax.nn.silu(x @ w1) * (x @ w3)) @ w2


def sigmoid_gates(x, w, y):
    """silu written out (``h * sigmoid(h)``), then a gate by another tensor (``* sigmoid(y)``: no silu)."""
    h = x @ w
    s = h * jax.nn.sigmoid(h)
    return s * jax.nn.sigmoid(y)


def squashed(x, w):
    """The output made by a unary op after the last statement: not written, and a note says so."""
    return jax.numpy.tanh(x @ w)
