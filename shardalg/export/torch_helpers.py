"""The helper functions a generated torch module may call, as source, each with the helpers it needs.

A module gets only the helpers its steps use (:func:`helpers_source`), in this table's order. Groups come from
the ``DeviceMesh``: ``mesh.get_group("X")`` for one axis and, for several, the group of their flattened mesh
(``mesh["X", "Y"]._flatten("X_Y")``, as TorchTitan flattens its data-parallel dims).

Imports: :mod:`shardalg.algebra.mesh` (for the mesh constants).
"""

from __future__ import annotations

from shardalg.algebra.mesh import Mesh

__all__ = ["HELPERS", "helpers_source", "mesh_source"]

# name -> (source, the helpers it calls)
HELPERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "_group": (
        '''
def _group(mesh, axes):
    """The process group over mesh axes: mesh.get_group(name) for one; their flattened mesh's for several."""
    if len(axes) == 1:
        return mesh.get_group(axes[0])
    return mesh[axes]._flatten("_".join(axes)).get_group()
''',
        (),
    ),
    "axis_index": (
        '''
def axis_index(mesh, axes):
    """This rank's index along ``axes`` of the mesh (the first axis major)."""
    r = 0
    for a in axes:
        r = r * mesh.size(mesh.mesh_dim_names.index(a)) + mesh.get_local_rank(a)
    return r
''',
        (),
    ),
    "_by_rank": (
        '''
def _by_rank(blocks, order):
    """Blocks in position order -> blocks in group-rank order (position p lives on group rank order[p])."""
    if order is None:
        return blocks
    out = [None] * len(blocks)
    for p, r in enumerate(order):
        out[r] = blocks[p]
    return out
''',
        (),
    ),
    "_all_gather": (
        """
def _all_gather(x, group, dim, order=None):
    n = dist.get_world_size(group)
    x = x.contiguous()
    out = x.new_empty((n * x.shape[0],) + tuple(x.shape[1:]))
    dist.all_gather_single(out, x, group=group)
    blocks = list(out.chunk(n, dim=0))
    if order is not None:
        blocks = [blocks[r] for r in order]
    return torch.cat(blocks, dim=dim)
""",
        (),
    ),
    "_reduce_scatter": (
        """
def _reduce_scatter(x, group, dim, order=None):
    n = dist.get_world_size(group)
    blocks = _by_rank(list(x.chunk(n, dim=dim)), order)
    out = torch.empty_like(blocks[0].contiguous())
    dist.reduce_scatter_single(out, torch.cat([b.contiguous() for b in blocks], dim=0), group=group)
    return out
""",
        ("_by_rank",),
    ),
    "_all_reduce": (
        """
def _all_reduce(x, group):
    out = x.clone()
    dist.all_reduce(out, group=group)
    return out
""",
        (),
    ),
    "_all_reduce_max": (
        """
def _all_reduce_max(x, group):
    out = x.clone()
    dist.all_reduce(out, op=dist.ReduceOp.MAX, group=group)
    return out
""",
        (),
    ),
    "_all_to_all": (
        """
def _all_to_all(x, group, split_dim, concat_dim, order=None):
    n = dist.get_world_size(group)
    blocks = _by_rank(list(x.chunk(n, dim=split_dim)), order)
    sent = torch.cat([b.contiguous() for b in blocks], dim=0)
    got = torch.empty_like(sent)
    dist.all_to_all_single(got, sent, group=group)
    parts = list(got.chunk(n, dim=0))
    if order is not None:
        parts = [parts[r] for r in order]
    return torch.cat(parts, dim=concat_dim)
""",
        ("_by_rank",),
    ),
    "_slice": (
        """
def _slice(x, mesh, axes, dim, n):
    k = x.shape[dim] // n
    return x.narrow(dim, axis_index(mesh, axes) * k, k).contiguous()
""",
        ("axis_index",),
    ),
    "_zero_pad": (
        """
def _zero_pad(x, mesh, axes, dim, n):
    shape = list(x.shape)
    shape[dim] *= n
    out = x.new_zeros(shape)
    out.narrow(dim, axis_index(mesh, axes) * x.shape[dim], x.shape[dim]).copy_(x)
    return out
""",
        ("axis_index",),
    ),
    "_permute": (
        '''
def _permute(x, sources):
    """Rank r receives the shard of rank sources[r]."""
    me = dist.get_rank()
    src, dst = sources[me], sources.index(me)
    if src == me:
        return x.clone()
    buf = torch.empty_like(x)
    ops = [dist.P2POp(dist.isend, x.contiguous(), dst), dist.P2POp(dist.irecv, buf, src)]
    for work in dist.batch_isend_irecv(ops):
        work.wait()
    return buf
''',
        (),
    ),
    "_distribute": (
        '''
def _distribute(x, mesh, placements):
    """distribute_tensor, and for Partial placements (which distribute_tensor does not take) the value kept
    on index 0 of each Partial mesh dim and zeros on the others: partial sums that add up to x."""
    if not any(p.is_partial() for p in placements):
        return distribute_tensor(x, mesh, placements)
    kept = [Replicate() if p.is_partial() else p for p in placements]
    local = distribute_tensor(x, mesh, kept).to_local()
    if any(mesh.get_local_rank(i) != 0 for i, p in enumerate(placements) if p.is_partial()):
        local = torch.zeros_like(local)
    return DTensor.from_local(local, mesh, placements, run_check=False)
''',
        (),
    ),
}


def helpers_source(used: set[str]) -> str:
    """The source of the used helpers and of the helpers they call, in table order."""
    need: set[str] = set()
    todo = list(used)
    while todo:
        name = todo.pop()
        if name not in need:
            need.add(name)
            todo.extend(HELPERS[name][1])
    return "".join("\n" + HELPERS[n][0] for n in HELPERS if n in need)


def mesh_source(mesh: Mesh) -> str:
    """The generated module's mesh constants and ``make_mesh``."""
    return f'''MESH_AXES = {tuple(mesh.names)!r}
MESH_SHAPE = {tuple(mesh.shape)!r}


def make_mesh(device_type="cpu"):
    """The {" x ".join(map(str, mesh.shape))} DeviceMesh ({", ".join(mesh.names)}) over the default process group; every rank calls it."""
    return init_device_mesh(device_type, MESH_SHAPE, mesh_dim_names=MESH_AXES)
'''
