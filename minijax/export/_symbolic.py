"""Lowering a shape-polymorphic jaxpr for export, in JAX's calling convention: the jaxpr's
function `_wrapped_jax_export_main` takes the dimension variables first (`tensor<i32>`
arguments marked `jax.global_constant`), and a public `main` of the array arguments alone
reads each variable off an argument's shape (`stablehlo.get_dimension_size`), asserts it is
at least 1 (a `shape_assertion` custom call, which shape refinement checks), and calls it.

Mirrors jax/_src/export/_export.py _wrap_main_func. Taught in chapters/31-export.md.
"""

from __future__ import annotations

import numpy as np

from minijax import core
from minijax.export import shape_poly
from minijax.interpreters import mlir

_HELP = "https://docs.jax.dev/en/latest/export/shape_poly.html#shape-assertion-errors"


def _where_each_var(avals) -> dict[str, tuple[int, int]]:
    """For each dimension variable, an (argument, dimension) whose size it is alone."""
    where: dict[str, tuple[int, int]] = {}
    for i, a in enumerate(avals):
        for j, d in enumerate(a.shape):
            if shape_poly.is_symbolic_dim(d):
                v = d.as_var()
                if v is not None:
                    where.setdefault(v, (i, j))
                else:
                    raise NotImplementedError(
                        f"export: dimension {j} of args[{i}] is '{d}'; minijax exports "
                        "shapes whose symbolic dimensions are single variables ('b', not "
                        "'2*b')")
    return where


def lower_polymorphic(closed: core.ClosedJaxpr, name: str, platforms: tuple[str, ...]):
    """The exported module of `closed` for `platforms`, whose input shapes have dimension
    variables."""
    dim_vars = shape_poly.all_dim_vars(closed.in_avals)
    where = _where_each_var(closed.in_avals)
    module = mlir.lower_jaxpr_to_module(closed, name, dim_vars=dim_vars, platforms=platforms)
    platform_index = len(platforms) > 1
    ir, func, hlo = mlir.ir, mlir.func, mlir.hlo  # loaded by the lowering
    specs = ", ".join(f"args[{i}].shape = ({', '.join(map(str, a.shape))})"
                      for i, a in enumerate(closed.in_avals))
    with module.context, ir.Location.unknown():
        table = ir.SymbolTable(module.operation)
        inner = table["main"]
        inner.attributes["sym_visibility"] = ir.StringAttr.get("private")
        table.set_symbol_name(inner, "_wrapped_jax_export_main")
        ftype = inner.type
        array_types = list(ftype.inputs)[platform_index + len(dim_vars):]
        i32 = ir.RankedTensorType.get((), ir.IntegerType.get_signless(32))
        lead = [i32] if platform_index else []
        main = func.FuncOp("main", ir.FunctionType.get(lead + array_types, ftype.results),
                           ip=ir.InsertionPoint.at_block_begin(module.body))
        main.attributes["sym_visibility"] = ir.StringAttr.get("public")
        with ir.InsertionPoint(main.add_entry_block()):
            args = list(main.arguments)[len(lead):]
            one = mlir.ir_constant(np.int32(1))
            values = []
            for v in dim_vars:
                i, j = where[v]
                size = hlo.get_dimension_size(args[i], j)
                ok = hlo.compare(size, one, hlo.ComparisonDirectionAttr.get("GE"),
                                 compare_type=hlo.ComparisonTypeAttr.get("SIGNED"))
                check = hlo.CustomCallOp([], [ok, size], "shape_assertion",
                                         has_side_effect=ir.BoolAttr.get(True),
                                         api_version=ir.IntegerAttr.get(
                                             ir.IntegerType.get_signless(32), 2))
                check.attributes["error_message"] = ir.StringAttr.get(
                    f"Input shapes do not match the polymorphic shapes specification. "
                    f"Expected value >= 1 for dimension variable '{v}'. Using the following "
                    f"polymorphic shapes specifications: {specs}. Obtained dimension "
                    f"variables: '{v}' = {{0}} from args[{i}].shape[{j}]. See {_HELP}")
                values.append(size)
            out = func.CallOp(list(ftype.results),
                              ir.FlatSymbolRefAttr.get("_wrapped_jax_export_main"),
                              list(main.arguments)[:len(lead)] + values + args)
            func.ReturnOp(list(out.results))
    return module
