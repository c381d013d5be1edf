"""Reading compiled HLO text and its replica groups (no jax): the three spellings of replica groups, operand
shapes looked up by name, metadata to source lines, and groups mapped back to mesh axes and sub-axes."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from shardalg.audit.groups import axes_of_groups
from shardalg.audit.hlo import collectives, iota_groups, mesh_groups, parse_groups

HLO = """HloModule jit_f, num_partitions=8

FileNames
1 "/src/model.py"

FunctionNames
1 "f"

FileLocations
1 {file_name_id=1 function_name_id=1 line=12 end_line=12 column=8 end_column=8}

StackFrames
1 {file_location_id=1 parent_frame_id=1}

ENTRY %main (param: f32[8,32], param.1: f32[32,16]) -> f32[8,32] {
  %param = f32[8,32]{1,0} parameter(0), sharding={devices=[2,1,4]<=[8] last_tile_dim_replicate}
  %param.1 = bf16[32,16]{1,0} parameter(1)
  %all-gather = bf16[32,64]{1,0} all-gather(%param.1), channel_id=1, replica_groups=[2,4]<=[8], dimensions={1}, use_global_device_ids=true, metadata={op_name="jit(f)/dot_general" stack_frame_id=1}
  %ag2 = f32[16,32]{1,0} all-gather(%param), channel_id=2, replica_groups=mesh['axis_0'=2,'axis_1'=4] {'axis_0'}, dimensions={0}, metadata={op_name="jit(f)/transpose(jvp(f))/dot_general" stack_frame_id=1}
  %all-reduce = (f32[8,32]{1,0}, f32[16,32]{1,0}) all-reduce(%param, %ag2), channel_id=3, replica_groups={{0,2},{1,3},{4,6},{5,7}}, to_apply=%add
  ROOT %cp = f32[8,32]{1,0} collective-permute(%param), channel_id=4, source_target_pairs={{0,4},{4,0}}
}
"""


def test_every_collective_with_groups_shapes_dims_and_line():
    found = collectives(HLO)
    assert [(c.kind, c.name) for c in found] == [
        ("AllGather", "all-gather"),
        ("AllGather", "ag2"),
        ("AllReduce", "all-reduce#0"),
        ("AllReduce", "all-reduce#1"),
        ("Permute", "cp"),
    ]
    ag = found[0]
    assert ag.groups == ((0, 1, 2, 3), (4, 5, 6, 7))
    assert (ag.operand, ag.result, ag.dtype, ag.dim) == ((32, 16), (32, 64), "bf16", 1)
    assert (ag.file, ag.line, ag.backward) == ("/src/model.py", 12, False)
    assert found[1].backward and found[1].groups == ((0, 4), (1, 5), (2, 6), (3, 7))
    assert [c.operand for c in found[2:4]] == [(8, 32), (16, 32)]  # a combined all-reduce: one per operand
    assert found[4].groups == ((0, 4), (4, 0))


def test_iota_and_mesh_forms_agree_with_the_explicit_groups():
    assert iota_groups("[4,2]<=[2,4]T(1,0)") == ((0, 4), (1, 5), (2, 6), (3, 7))
    assert iota_groups("[1,8]<=[8]") == ((0, 1, 2, 3, 4, 5, 6, 7),)
    assert mesh_groups("mesh['axis_0'=1,'axis_1'=2,'axis_2'=4] {'axis_1'}") == (
        (0, 4),
        (1, 5),
        (2, 6),
        (3, 7),
    )
    assert mesh_groups("mesh['a'=2,'b'=4] {'b','a'}") == ((0, 4, 1, 5, 2, 6, 3, 7),)
    assert parse_groups("{{0,1},{2,3}}") == ((0, 1), (2, 3))


NAMES, SIZES, DEVICES = ("X", "Y"), (2, 4), tuple(range(8))


def test_groups_to_axes_and_sub_axes():
    cases = {
        ((0, 1, 2, 3), (4, 5, 6, 7)): ("Y",),
        ((0, 4), (1, 5), (2, 6), (3, 7)): ("X",),
        ((0, 2), (1, 3), (4, 6), (5, 7)): ("Y:(1)2",),  # the major half of Y: coordinates 0 and 2
        ((0, 1), (2, 3), (4, 5), (6, 7)): ("Y:(2)2",),  # the minor half: 0 and 1
        ((0, 2, 4, 6), (1, 3, 5, 7)): ("X", "Y:(1)2"),
        ((0, 4, 2, 6), (1, 5, 3, 7)): ("Y:(1)2", "X"),  # the order of the list is the gathered order
        (tuple(range(8)),): ("X", "Y"),
    }
    for groups, axes in cases.items():
        assert axes_of_groups(groups, NAMES, SIZES, DEVICES).axes == axes, groups


def test_groups_that_are_no_product_of_axes_say_so():
    g = axes_of_groups(((0, 3), (1, 2), (4, 7), (5, 6)), NAMES, SIZES, DEVICES)
    assert g.axes == () and "not a factor" in g.problem
    g = axes_of_groups(((0, 1),), NAMES, SIZES, DEVICES)
    assert g.axes == () and "do not cover the mesh" in g.problem


@st.composite
def meshes_and_parts(draw):
    sizes = draw(st.lists(st.sampled_from([1, 2, 4]), min_size=1, max_size=3))
    names = [f"A{k}" for k in range(len(sizes))]
    parts = []  # (axis index, pre k, size m)
    for k, n in enumerate(sizes):
        options = [None, (1, n)] + ([(1, 2), (2, 2)] if n == 4 else [])
        choice = draw(st.sampled_from(options))
        if choice is not None and n > 1:
            parts.append((k, *choice))
    parts = draw(st.permutations(parts))
    return names, sizes, parts


@settings(max_examples=60, deadline=None)
@given(meshes_and_parts())
def test_groups_built_from_any_axes_map_back_to_them(case):
    """Groups made from (sub-)axes, major first, map back to exactly those (sub-)axes."""
    names, sizes, parts = case
    devices = list(range(1, 1 + _prod(sizes)))[::-1]  # device ids need not be the positions

    def coords(i):
        out = []
        for s in reversed(sizes):
            out.append(i % s)
            i //= s
        return out[::-1]

    def part_coord(c, part):
        k, pre, m = part
        return (c[k] // (sizes[k] // (pre * m))) % m

    def rest(c):
        key = []
        for k in range(len(sizes)):
            mine = [p for p in parts if p[0] == k]
            if not mine:
                key.append(c[k])
            else:
                _, pre, m = mine[0]
                inner = sizes[k] // (pre * m)
                key.append((c[k] // (inner * m), c[k] % inner))
        return tuple(key)

    groups: dict[tuple, list[tuple[tuple[int, ...], int]]] = {}
    for i, d in enumerate(devices):
        c = coords(i)
        groups.setdefault(rest(c), []).append((tuple(part_coord(c, p) for p in parts), d))
    lists = [tuple(d for _, d in sorted(g)) for g in groups.values()]
    expected = tuple(names[k] if m == sizes[k] else f"{names[k]}:({pre}){m}" for k, pre, m in parts)
    got = axes_of_groups(lists, names, sizes, devices)
    if not parts:
        assert got.axes == () or got.problem
    else:
        assert got.axes == expected, (got, parts)


def _prod(xs):
    out = 1
    for x in xs:
        out *= x
    return out


def test_a_tuple_all_to_all_is_one_collective():
    text = """ENTRY %main (p: f32[2,4], q: f32[2,4]) -> (f32[2,4], f32[2,4]) {
  %p = f32[2,4]{1,0} parameter(0)
  %q = f32[2,4]{1,0} parameter(1)
  ROOT %a2a = (f32[2,4]{1,0}, f32[2,4]{1,0}) all-to-all(%p, %q), channel_id=1, replica_groups={{0,1}}
}
"""
    (c,) = collectives(text)
    assert (c.kind, c.operand, c.result, c.dim) == ("AllToAll", (2, 2, 4), (2, 2, 4), None)
