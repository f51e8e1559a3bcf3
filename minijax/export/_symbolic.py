"""Lowering a shape-polymorphic jaxpr for export, in JAX's calling convention: the jaxpr's
function `_wrapped_jax_export_main` takes the dimension variables first (`tensor<i32>`
arguments marked `jax.global_constant`), and a public `main` of the array arguments alone
reads each variable off an argument's shape (`stablehlo.get_dimension_size`), asserts it is
at least 1 (a `shape_assertion` custom call, which shape refinement checks), and calls it.

Mirrors jax/_src/export/_export.py _wrap_main_func. Taught in chapters/31-export.md.
"""

from __future__ import annotations

from minijax import core
from minijax.export import shape_poly
from minijax.interpreters import mlir


def _shape_assertion(ok, operands, message: str) -> None:
    """A `shape_assertion` custom call: `message` with `{k}` for `operands[k]` when `ok` is
    false (checked by shape refinement)."""
    ir, hlo = mlir.ir, mlir.hlo
    check = hlo.CustomCallOp([], [ok, *operands], "shape_assertion",
                             has_side_effect=ir.BoolAttr.get(True),
                             api_version=ir.IntegerAttr.get(ir.IntegerType.get_signless(32), 2))
    check.attributes["error_message"] = ir.StringAttr.get(message)


def _emit_checks(checks, env) -> None:
    """The solver's checks (shape_poly.solve_dim_vars) as shape assertions over `env`."""
    for kind, e1, e2, pieces in checks:
        v1, v2 = (mlir.DimOps.const(e) if isinstance(e, int) else
                  e.evaluate(env, mlir.DimOps) for e in (e1, e2))
        ok = mlir.DimOps._cmp(v1, v2, "EQ" if kind == "==" else "GE")
        operands, text = [], []
        for p in pieces:
            if isinstance(p, str):
                text.append(p)
            else:
                text.append(f"{{{len(operands)}}}")
                operands.append(mlir.DimOps.const(p) if isinstance(p, int) else
                                p.evaluate(env, mlir.DimOps))
        _shape_assertion(ok, operands, "".join(text))


def lower_polymorphic(closed: core.ClosedJaxpr, name: str, platforms: tuple[str, ...]):
    """The exported module of `closed` for `platforms`, whose input shapes have dimension
    variables. ValueError if a variable cannot be solved from the argument shapes."""
    dim_vars = shape_poly.all_dim_vars(closed.in_avals)
    solution, checks = shape_poly.solve_dim_vars(closed.in_avals)
    module = mlir.lower_jaxpr_to_module(closed, name, dim_vars=dim_vars, platforms=platforms)
    platform_index = len(platforms) > 1
    ir, func, hlo = mlir.ir, mlir.func, mlir.hlo  # loaded by the lowering
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
            env = {f"args[{i}].shape[{j}]": hlo.get_dimension_size(args[i], j)
                   for i, a in enumerate(closed.in_avals) for j, d in enumerate(a.shape)
                   if shape_poly.is_symbolic_dim(d)}
            _emit_checks(checks, env)
            values = [solution[v].evaluate(env, mlir.DimOps)
                      if shape_poly.is_symbolic_dim(solution[v]) else
                      mlir.DimOps.const(solution[v]) for v in dim_vars]
            out = func.CallOp(list(ftype.results),
                              ir.FlatSymbolRefAttr.get("_wrapped_jax_export_main"),
                              list(main.arguments)[:len(lead)] + values + args)
            func.ReturnOp(list(out.results))
    return module
