"""What an index map that reads a scalar-prefetched table names, at every size set.

The proof (program_identity.py, decision_coverage.py) evaluates index maps from the grid positions
alone; a map that reads a table (`lambda i, j, k, t: (i, t[k])`) follows data there, and its
blocks were not counted. So a K axis of a fixed 3 steps that names its blocks through
`t = arange(3) % (K/256)` read every block of K where checked (2 and 3 of them) and 3 of 32 at the
full size, and an output whose blocks are named through a table could be left unwritten there:
trusted estimates of 2.5x to 511x for a few percent of the work (red team, round 12).

The tables are computed by the program itself, outside its kernels, so they are computed here: the
program up to its kernels' prefetched operands is traced, cut to what those operands need (XLA's
dead-code rule, jax's `dce_jaxpr`), priced, and run on the task's own inputs (only those the cut
reads; a table that depends on a kernel's output is not computed). Each index map is then
evaluated over the whole grid with its tables, and the blocks it names are counted: a block
mapping that names every block of its operand at every checked size and not at the full size
leaves the full-size work undone. Fail closed: a table the judge could not compute, or a grid too
large to walk, leaves the estimate unproven with the reason named."""
from __future__ import annotations

import math

import numpy as np

from .jaxpr_check import subjaxprs

# Work the cut program may take (tpu_estimate's proxy: output elements, a matmul's scaled by its
# depth/128), and bytes of the task's inputs it may draw: a table is a few integer operations on
# small operands (group sizes, page tables, lengths); a cut past these is not run.
MAX_TABLE_WORK = 8 << 20
MAX_TABLE_INPUT_BYTES = 256 << 20
# Grid points whose index maps are evaluated (one vectorized call per block mapping).
MAX_GRID_POINTS = 1 << 21
# Calls the tables are followed through: the program's own functions, inlined by the trace below.
_INLINED = {"pjit", "closed_call", "core_call", "custom_jvp_call", "custom_vjp_call", "custom_vjp_call_jaxpr",
            "remat", "checkpoint"}


class _Unknown(Exception):
    """A table, or what its index maps name, that the judge could not compute."""


def problems(programs: dict, draw, fit_sets, target: str, facts_out: dict | None = None) -> list[str]:
    """Reasons the full-size program's table-named blocks are not the checked ones'. `programs`:
    size set -> closed jaxpr; `draw(size_set, wanted)`: the task's inputs at those positions;
    `facts_out`: filled with decision_coverage's Facts of each size set's program walked with its
    tables' values (for the rules that count what each output block reads: layout_cuts)."""
    if not any(_prefetching(programs[target].jaxpr)):
        return []
    named, tables = {}, {}
    for name in (*fit_sets, target):
        try:
            named[name], tables[name] = _named_per_mapping(programs[name], lambda wanted, name=name: draw(name, wanted))
        except _Unknown as error:
            return [f"an index map reads a scalar-prefetched table that {error}, so the blocks it names at the "
                    f"{name} sizes are not known"]
        except Exception as error:  # a program this check cannot follow is not shown to cover alike
            return [f"the blocks named through scalar-prefetched tables at the {name} sizes could not be counted "
                    f"({type(error).__name__}: {str(error)[:160]})"]
    from . import decision_coverage
    found = []
    for c in sorted({key[0] for key in named[target]}):
        found += decision_coverage.per_output_block_problems(
            f"pallas_call {c} (through a scalar-prefetched table)",
            {k[1]: v for k, v in named[target].items() if len(k) == 3 and k[0] == c},
            [{k[1]: v for k, v in named[s].items() if len(k) == 3 and k[0] == c} for s in fit_sets])
    for key, (count, total, unit) in sorted((k, v) for k, v in named[target].items() if len(k) == 2):
        seen = [named[s].get(key) for s in fit_sets]
        if all(s is not None and s[0] == s[1] for s in seen) and count < total:
            call, b = key
            found.append(f"pallas_call {call} block mapping {b} (through a scalar-prefetched table): every checked "
                         f"grid names each of its operand's {unit}, and the full-size grid names {count} of its "
                         f"{total} (the rest of the work is never done there)")
    # The kernels' own copies at starts read from the tables (`a_hbm.at[:, pl.ds(t[k] * 256, 256)]`):
    # the kernels walked again with the tables' values, and what each output block's steps read
    # counted (red team, round 13: a K axis of 3 steps copying slices t[k] = k mod (K/256), 1.12x
    # trusted for 0.10x). Only that is kept of this walk: the rest of the proof treats the tables
    # as the data they are.
    try:
        walked = {name: decision_coverage.evaluate(programs[name], tables=tables[name]) for name in (*fit_sets, target)}
    except Exception as error:
        return found + [f"the kernels' copies at starts read from scalar-prefetched tables could not be counted "
                        f"({type(error).__name__}: {str(error)[:160]})"]
    found += decision_coverage.group_read_problems(walked[target], [walked[s] for s in fit_sets])
    if facts_out is not None:
        facts_out.update(walked)
    return found


def _prefetching(jaxpr):
    """The pallas_calls that prefetch tables, anywhere in the program (any sub-jaxpr)."""
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "pallas_call":
            if int(getattr(eqn.params.get("grid_mapping"), "num_index_operands", 0) or 0):
                yield eqn
            continue
        for sub in subjaxprs(eqn):
            yield from _prefetching(sub)


def _named_per_mapping(closed_jaxpr, draw) -> tuple[dict, dict]:
    """{(call, mapping): (blocks named, blocks in all, unit)} for every block mapping of every
    prefetching call, in program order; and {id of a prefetching call's equation: its tables}."""
    calls, tables = _tables(closed_jaxpr, draw)
    from . import decision_coverage
    named = {}
    for c, (eqn, values) in enumerate(zip(calls, tables)):
        mapping = eqn.params["grid_mapping"]
        grid = tuple(int(g) for g in mapping.grid)
        points = math.prod(grid)
        if points > MAX_GRID_POINTS:
            raise _Unknown(f"names blocks over a grid of {points} steps (more than {MAX_GRID_POINTS} walked)")
        per_mapping = _evaluate(mapping.block_mappings, grid, values)
        evaluated = {}
        for b, (block, blocks) in enumerate(zip(mapping.block_mappings, per_mapping)):
            evaluated[b] = blocks.reshape((blocks.shape[0],) + grid)
            counted = decision_coverage._blocks_named(block, evaluated[b])
            if counted is not None:
                named[(c, b)] = counted
        inputs = int(getattr(mapping, "num_inputs", 0) or 0)
        for b, per_dim in decision_coverage.per_output_block_reads(mapping.block_mappings, evaluated, inputs).items():
            named[(c, b, "per output block")] = per_dim
    return named, {id(eqn): values for eqn, values in zip(calls, tables)}


def _evaluate(block_mappings, grid: tuple, tables) -> list[np.ndarray]:
    """The blocks each index map names at every grid point, (components, points) per mapping: all
    of a call's maps in one program over the flattened grid."""
    import jax
    import jax.numpy as jnp
    from jax._src import core
    from jax._src.state.discharge import discharge_state
    points = math.prod(grid)
    maps = [(discharge_state(b.index_map_jaxpr), len(b.index_map_jaxpr.jaxpr.outvars)) for b in block_mappings]
    if points == 0:
        return [np.zeros((outs, 0), np.int64) for _, outs in maps]

    def at(*args):  # a read of a table ref is a read of an array; the tables' final values dropped
        return [core.jaxpr_as_fun(pure)(*args)[:outs] for pure, outs in maps]

    positions = [jnp.asarray(p.reshape(-1)) for p in np.indices(grid, dtype=np.int32)]
    try:
        per_mapping = _quick(jax.vmap(at, in_axes=(0,) * len(grid) + (None,) * len(tables)), *positions, *tables)
    except Exception as error:
        raise _Unknown(f"could not be evaluated over the grid ({type(error).__name__}: {str(error)[:120]})")
    return [np.stack([np.broadcast_to(np.asarray(o).reshape(-1), (points,)) for o in outs]).astype(np.int64)
            if outs else np.zeros((0, points), np.int64) for outs in per_mapping]


def _tables(closed_jaxpr, draw):
    """(the prefetching calls in program order, each one's table values), computed from the task's
    inputs through the program's cut to them."""
    import jax
    from jax._src import core
    from jax._src.interpreters import partial_eval as pe
    calls, operands = [], []  # the prefetching calls met, and each one's table operands

    def walk(jaxpr, consts, args):
        """The program, equation by equation, functions inlined; a kernel's outputs are new inputs
        (their values unknown), a prefetching kernel's table operands are recorded."""
        env = {}

        def read(v):
            return v.val if isinstance(v, core.Literal) else env[v]
        for v, x in zip(jaxpr.constvars, consts):
            env[v] = x
        for v, x in zip(jaxpr.invars, args):
            env[v] = x
        for eqn in jaxpr.eqns:
            invals = [read(v) for v in eqn.invars]
            name = eqn.primitive.name
            if name == "pallas_call":
                prefetched = int(getattr(eqn.params["grid_mapping"], "num_index_operands", 0) or 0)
                if prefetched:
                    calls.append(eqn)
                    operands.append(invals[:prefetched])
                for v in eqn.outvars:
                    env[v] = _KERNEL_OUTPUT
                continue
            if name in _INLINED and list(subjaxprs(eqn)):
                sub = eqn.params.get("jaxpr") or eqn.params.get("call_jaxpr") or eqn.params.get("fun_jaxpr")
                sub_consts = getattr(sub, "consts", ())
                outs = walk(getattr(sub, "jaxpr", sub), sub_consts, invals)
            else:
                if any(x is _KERNEL_OUTPUT for x in invals):
                    for v in eqn.outvars:
                        env[v] = _KERNEL_OUTPUT  # follows a kernel's output
                    continue
                if any(next(_prefetching(sub), None) for sub in subjaxprs(eqn)):
                    raise _Unknown("is computed for a kernel inside a loop or branch")
                outs = eqn.primitive.bind(*invals, **eqn.primitive.get_bind_params(eqn.params))
                outs = outs if eqn.primitive.multiple_results else [outs]
            for v, o in zip(eqn.outvars, outs):
                env[v] = o
        return [read(v) for v in jaxpr.outvars]

    avals = [v.aval for v in closed_jaxpr.jaxpr.invars]

    def tables_of(*args):
        calls.clear()
        operands.clear()
        walk(closed_jaxpr.jaxpr, closed_jaxpr.consts, args)
        flat = [t for tables in operands for t in tables]
        if any(t is _KERNEL_OUTPUT for t in flat):
            raise _Unknown("is computed from a kernel's output")
        return flat

    try:
        traced = jax.make_jaxpr(tables_of)(*[jax.ShapeDtypeStruct(a.shape, a.dtype) for a in avals])
    except _Unknown:
        raise
    except Exception as error:
        raise _Unknown(f"could not be traced ({type(error).__name__}: {str(error)[:120]})")
    found = list(calls)
    cut, used = pe.dce_jaxpr(traced.jaxpr, [True] * len(traced.jaxpr.outvars))
    from . import tpu_estimate
    work = tpu_estimate._jaxpr_work(cut)
    if work > MAX_TABLE_WORK:
        raise _Unknown(f"takes {work / (1 << 20):.1f}M units of work to compute (more than "
                       f"{MAX_TABLE_WORK / (1 << 20):.0f}M)")
    wanted = [k for k, u in enumerate(used) if u]
    held = sum(math.prod(avals[k].shape) * np.dtype(avals[k].dtype).itemsize for k in wanted)
    if held > MAX_TABLE_INPUT_BYTES:
        raise _Unknown(f"is computed from {held >> 20} MiB of inputs (more than {MAX_TABLE_INPUT_BYTES >> 20})")
    try:
        inputs = draw(wanted) if wanted else []
    except Exception as error:  # e.g. a JAXBench case, whose inputs are drawn all at once
        raise _Unknown(f"is computed from inputs that could not be drawn ({str(error)[:160]})")
    try:
        flat = _quick(lambda *args: core.eval_jaxpr(cut, traced.consts, *args), *inputs)
    except Exception as error:
        raise _Unknown(f"could not be computed ({type(error).__name__}: {str(error)[:120]})")
    flat = [np.asarray(x) for x in flat]
    tables, at = [], 0
    for eqn in found:
        n = int(eqn.params["grid_mapping"].num_index_operands)
        tables.append(flat[at:at + n])
        at += n
    return found, tables


def _quick(fn, *args):
    """fn(*args), compiled as one program without XLA's backend optimizations: it runs once, on a
    few integers, and compiling it op by op (jax's eager mode) took 4x longer."""
    import jax
    lowered = jax.jit(fn).lower(*args)
    try:
        compiled = lowered.compile(compiler_options={"xla_backend_optimization_level": 0})
    except Exception:  # an option this jaxlib does not take
        compiled = lowered.compile()
    return compiled(*args)


# Stands for a value that is (or follows) a kernel's output: unknown to the judge.
_KERNEL_OUTPUT = object()
