"""The TPU's arithmetic in the CPU check: contractions rounded as the MXU rounds them.

Off a TPU, the judge checks a candidate's answers by running its program in Pallas TPU interpret
mode on the CPU. The CPU multiplies float32 exactly; a TPU does not. At precision DEFAULT (what a
`jnp.dot` without `precision=` asks for) a float32 contraction on a TPU is one pass of the MXU:
each operand is rounded to bfloat16, the products (exact in float32) are summed in float32. Mosaic
does the same inside a kernel (its default contract precision), and XLA outside. A check that
multiplies exactly would pass a kernel the chip gets wrong by ~2^-9 relative per operand, and the
estimate would pay for the cheap single pass.

So before the checked programs run, every float32 contraction at precision DEFAULT (dot_general,
and conv_general_dilated outside kernels) gets its operands rounded to bfloat16 and accumulates
in float32, the MXU's arithmetic. HIGHEST is exact float32 (Mosaic's `fp32` contract precision,
XLA's six passes) and runs as written. HIGH (three bfloat16 passes, XLA only: Mosaic refuses it)
runs as float32: its error (~2^-16 relative) is below every float32 task's tolerance, said in
docs/pallas.md. A contraction whose numerics this module cannot reproduce (an explicit dot
algorithm other than the bfloat16 or float32 ones, float16 or float64 operands on the MXU) is
refused with its name: `unsupported()` lists them before anything runs.
"""
from __future__ import annotations

import numpy as np

from .jaxpr_check import _map_jaxprs, subjaxprs

_CONTRACTIONS = {"dot_general", "conv_general_dilated"}
_REPRODUCED_ALGORITHMS = {"DEFAULT", "BF16_BF16_F32", "F32_F32_F32"}


def _precision_name(precision) -> str:
    """DEFAULT, HIGH, HIGHEST, or an algorithm preset's name, for either operand."""
    if precision is None:
        return "DEFAULT"
    if isinstance(precision, (tuple, list)):
        names = {_precision_name(p) for p in precision}
        order = ["HIGHEST", "HIGH", "DEFAULT"]
        known = [n for n in order if n in names]
        # Mixed per-operand precisions: the lower one is what the MXU does to that operand; the
        # rounding below applies to both, which is the stricter check.
        return known[-1] if len(known) == len(names) else sorted(names)[0]
    name = getattr(precision, "name", None) or str(precision)
    return name.split(".")[-1].upper()


def _float32(var) -> bool:
    dtype = getattr(getattr(var, "aval", None), "dtype", None)
    return dtype is not None and np.dtype(dtype) == np.float32


def unsupported(closed_jaxpr) -> list[str]:
    """Contractions whose TPU numerics the check cannot reproduce, one message each."""
    problems: list[str] = []

    def walk(jaxpr):
        for eqn in jaxpr.eqns:
            if eqn.primitive.name in _CONTRACTIONS:
                precision = eqn.params.get("precision")
                name = _precision_name(precision)
                if name not in ("DEFAULT", "HIGH", "HIGHEST") and name not in _REPRODUCED_ALGORITHMS:
                    problems.append(f"`{eqn.primitive.name}` with precision {name}: the CPU check cannot reproduce "
                                    f"what a TPU computes for it; use Precision.DEFAULT or HIGHEST")
                for var in eqn.invars[:2]:
                    dtype = getattr(getattr(var, "aval", None), "dtype", None)
                    if dtype is not None and np.dtype(dtype) in (np.dtype(np.float16), np.dtype(np.float64)):
                        problems.append(f"`{eqn.primitive.name}` on {np.dtype(dtype)} operands: a TPU's MXU does "
                                        f"not multiply {np.dtype(dtype)}; the check cannot say what the chip would "
                                        f"compute")
                        break
            for sub in subjaxprs(eqn):
                walk(sub)

    walk(closed_jaxpr.jaxpr)
    return problems


def _rounds_operands(eqn) -> bool:
    """Whether a TPU rounds this contraction's float32 operands to bfloat16."""
    if eqn.primitive.name not in _CONTRACTIONS:
        return False
    if not any(_float32(v) for v in eqn.invars[:2]):
        return False
    name = _precision_name(eqn.params.get("precision"))
    return name in ("DEFAULT", "BF16_BF16_F32")


def as_on_tpu(closed_jaxpr):
    """The program with every contraction that a TPU runs in one bfloat16 pass rounded that way
    (operands to bfloat16, products accumulated in float32), inside kernels and out."""
    import jax.numpy as jnp
    from jax._src import core

    def convert(var, dtype, eqn):
        aval = var.aval
        out = core.Var(core.ShapedArray(aval.shape, dtype, weak_type=False))
        params = {"new_dtype": np.dtype(dtype), "weak_type": False, "sharding": getattr(aval, "sharding", None)}
        from jax._src.lax import lax as lax_internal
        return out, core.new_jaxpr_eqn([var], [out], lax_internal.convert_element_type_p, params, frozenset(),
                                       eqn.source_info, eqn.ctx)

    def walk(jaxpr):
        eqns = []
        for eqn in jaxpr.eqns:
            params = {k: _map_jaxprs(v, walk) for k, v in eqn.params.items()}
            eqn = eqn.replace(params=params)
            if not _rounds_operands(eqn):
                eqns.append(eqn)
                continue
            invars = list(eqn.invars)
            for k in (0, 1):
                if _float32(invars[k]) and type(invars[k]).__name__ != "Literal":
                    rounded, to_bf16 = convert(invars[k], jnp.bfloat16, eqn)
                    back, to_f32 = convert(rounded, jnp.float32, eqn)
                    eqns.extend([to_bf16, to_f32])
                    invars[k] = back
            # The products of bfloat16 values are exact in float32, and the CPU sums them in float32,
            # as the MXU's accumulator does.
            eqns.append(eqn.replace(invars=invars))
        return jaxpr.replace(eqns=eqns)

    return closed_jaxpr.replace(jaxpr=walk(closed_jaxpr.jaxpr))
