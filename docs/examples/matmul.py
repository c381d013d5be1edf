"""One product for ``shardalg audit`` (docs/audit.md, "A sub-axis"): case 4 of chapter 3 on a 2 x 4 mesh."""


def matmul(a, b):
    return a @ b
