"""The full-size program itself, run off a TPU on a sample of its grid (a feasibility prototype).

Off a TPU the estimate prices the full-size program, which is never run: it is tied to the
checked small programs by a proof (program_identity.py, decision_coverage.py). This module runs
it instead, on a few of its output blocks: the candidate's full-size `pallas_call`, in TPU
interpret mode, on only the grid steps that write the sampled blocks, with the real index maps
and the real kernel body, on inputs drawn at the full sizes. Each sampled block is compared with
an oracle computed on the same inputs: the task's trusted starter, run the same way on the grid
steps that cover the same elements.

How a subset of a grid runs. The out index maps are evaluated over the whole full-size grid
(vectorized): every step that writes a sampled block is kept, in grid order, since accumulators
live across those steps. The `pallas_call` is rewritten to a grid of S steps (the kept ones):
- every index map becomes a table lookup of the block it named at that step, into operands that
  hold only the blocks the kept steps touch (`compact`: per dimension, the distinct blocks named),
  so a full-size input is never materialized;
- the kernel body is untouched; its `program_id`s read the original step's coordinates and its
  `num_programs` the full-size extents (the grid environment the interpreter binds), so a branch
  on either sees the full size;
- inputs are drawn per tile from the seed and the tile's position (`LazyInputs`): the values of an
  element do not depend on which blocks were sampled, so the candidate's and the oracle's runs
  read the same numbers; an operand that is an input through position ops (`Chain`: reshapes,
  transposes, slices, pads, broadcasts, casts) is read through them element by element;
- scalar-prefetch operands are computed whole (from small inputs), the index maps evaluated with
  their values, and passed to the rewritten call, whose kernel reads them as it would.

What it refuses, by name (`not_sampled`; the caller decides what that means for the payment):
programs whose outputs are not one `pallas_call`'s, operands computed from large inputs outside
the kernel other than by position ops, operands in HBM/ANY (manual DMA: the block tables say
nothing of what it reads), aliased outputs, vmapped grids, index maps with other than blocked or squeezed
dimensions, and an output block written in two separate runs of steps (what a TPU would have
written back in between cannot be reproduced by running the runs side by side).

What it cannot see (said in docs/pallas.md): state carried in scratch from one output block's
steps to the next (the sampled run starts from uninitialized, NaN-filled scratch), and a kernel
that writes into its own input buffers; and, being a sample, a difference confined to blocks
that were not drawn.
"""
from __future__ import annotations

import dataclasses
import time
from typing import Sequence

import numpy as np

# Inputs at most this large (and inputs whose draw is global: permutations, partitions) are drawn
# whole; larger ones per tile, only where a kept step reads them.
WHOLE_INPUT_BYTES = 4 << 20
# The tile an input is drawn in: its last dimension in runs of 512, the one before in runs of 64
# for a matrix and of 8 above (often a head axis: one head's rows read 8 heads' worth, not 64),
# the others one at a time. The tiling is fixed per tensor, never the candidate's.
TILE_LAST, TILE_SECOND, TILE_SECOND_HIGHER = 512, 64, 8
# The kept blocks of all operands and outputs together may hold at most this many bytes: a sampled
# block that reads a whole large input (a reduction over it) is refused rather than drawn (one
# such run, 4 GiB of float32 read by every sampled block, took 21 GiB before this limit).
MAX_COMPACT_BYTES = 256 << 20
# A full grid larger than this is not evaluated (the index maps are evaluated at every step).
MAX_GRID_POINTS = 1 << 24
# A sample that needs more grid steps than this is not run (a step costs ~6-10 ms of CPU in TPU
# interpret mode: the judge's CPU-time limit for the sample would be spent on this many).
MAX_SAMPLED_STEPS = 2048


@dataclasses.dataclass
class Verdict:
    status: str               # "agree", "disagree", "not_sampled", "crashed"
    reason: str = ""
    blocks: list = dataclasses.field(default_factory=list)   # (output, block index) compared
    steps: int = 0            # grid steps the candidate ran
    oracle_steps: int = 0
    # plan, oracle, candidate: wall-clock seconds; oracle_cpu, candidate_cpu: CPU seconds of this
    # process (all its threads: XLA's included)
    seconds: dict = dataclasses.field(default_factory=dict)
    # not_sampled: whose program could not be sampled, "oracle" (the task's starter: no candidate
    # of this task can be) or "candidate" (its own design, where the starter's can be)
    side: str = ""
    costly: bool = False      # not_sampled by a bound on the sample's cost (TooCostly)


class NotSampled(Exception):
    """A program this module cannot run on a sample of its grid; the message says why."""


class SeveralCalls(NotSampled):
    """The program's outputs come from different pallas_calls: a candidate's are sampled one output
    at a time (_one_output)."""


class SplitBlocks(NotSampled):
    """The wanted blocks together are held past the block bound (two sampled blocks of another
    batch and head hold the product of both): run one block at a time (_run_blocks), each then
    bounded on its own."""


class TooCostly(NotSampled):
    """A program whose sample would hold more than its bounds in the judge's memory (blocks of
    more than 256 MiB, inputs in HBM over 256 MiB together): a size honest designs reach (large
    blocks, a KV cache copied by the kernel), not a form the sample cannot run. The other bounds
    (steps, blocks wanted of a kernel, reads of an earlier kernel's output, positions followed
    one by one) are forms: grid axes that do nothing, a copy kernel in front, cost a kernel
    little and would switch the sample off (red team 25: 14.65x behind a copy kernel whose reads
    passed the bound)."""


class Revisits(Exception):
    """The full-size grid writes an output block in two separate runs of steps: TPU interpret mode
    refuses that (a revisited block) in the checked runs, and a TPU writes back whatever its
    buffer held in between. A failing verdict, not a limit of the sampling."""


# --------------------------------------------------------------------------- the program's form

# Primitives that only re-view an array, keeping each element's row-major position.
_VIEWS = ("reshape", "squeeze", "expand_dims")
# Primitives whose every output element is one element of their one array operand, at a position
# that depends on the position only, or a pad's literal value (and a dtype conversion, applied to
# the values): an operand computed from a program input by a chain of them (keys flattened and
# transposed, a slice, a padding, a broadcast) is read from the input's lazily drawn tiles,
# element by element, never whole.
_POSITION_OPS = _VIEWS + ("transpose", "broadcast_in_dim", "slice", "rev", "convert_element_type", "copy", "pad")
# Elementwise primitives: each output element a function of the element at the same position of
# their one array operand (the others scalar literals: `-q`, `q * 0.125`, `1 - x`). In a chain they
# move no position and are applied to the values read; an attacker's negation of an input outside
# the kernel, or of the kernel's output, does not hide the kernel from the sample.
_VALUE_OPS = ("neg", "abs", "sign", "floor", "ceil", "round", "exp", "exp2", "log", "log1p", "expm1", "tanh",
              "logistic", "sqrt", "rsqrt", "cbrt", "sin", "cos", "tan", "erf", "erfc", "square", "integer_pow",
              "reduce_precision", "not", "add", "sub", "mul", "div", "max", "min", "pow", "rem", "and", "or", "xor",
              "atan2", "nextafter")


# Elementwise primitives of several array operands (of one shape) for input_tree.
_ELEMENTWISE = _VALUE_OPS + ("select_n", "clamp", "convert_element_type", "eq", "ne", "lt", "le", "gt", "ge")


def _chain_link(eqn):
    """The one array operand through which `eqn` is a link of a chain, or None: a position op or a
    value op whose other operands are all scalar literals."""
    name = eqn.primitive.name
    if name not in _POSITION_OPS and name not in _VALUE_OPS:
        return None
    arrays = [v for v in eqn.invars if not hasattr(v, "val")]
    literals = [v for v in eqn.invars if hasattr(v, "val")]
    if len(arrays) != 1 or len(eqn.outvars) != 1:
        return None
    if name in _VALUE_OPS and any(np.ndim(v.val) != 0 for v in literals):
        return None
    return arrays[0]


@dataclasses.dataclass
class Chain:
    """How an operand's elements are a program input's: the ops from the input to the operand."""
    ops: list                 # the chain's equations, from the input forward

    def back(self, where: np.ndarray) -> tuple[np.ndarray, dict]:
        """Positions in the operand ([n, its dims]) as positions in the input ([n, its dims]), and
        per pad of the chain the positions that are its padding there (their input position is
        then any valid one: the pad's value replaces what is read)."""
        padding = {}
        for i in reversed(range(len(self.ops))):
            eqn = self.ops[i]
            name, params = eqn.primitive.name, eqn.params
            in_shape = tuple(int(d) for d in eqn.invars[0].aval.shape)
            out_shape = tuple(int(d) for d in eqn.outvars[0].aval.shape)
            if name in _VIEWS:
                flat = np.ravel_multi_index(tuple(where.T), out_shape) if out_shape else np.zeros(where.shape[0], np.int64)
                where = np.stack(np.unravel_index(flat, in_shape), axis=1) if in_shape else np.zeros((where.shape[0], 0), np.int64)
            elif name == "transpose":
                back = np.empty_like(where)
                for d, source in enumerate(params["permutation"]):
                    back[:, source] = where[:, d]
                where = back
            elif name == "broadcast_in_dim":
                dims = params["broadcast_dimensions"]
                where = np.stack([where[:, dims[j]] if in_shape[j] != 1 else np.zeros(where.shape[0], np.int64)
                                  for j in range(len(in_shape))], axis=1) if in_shape else np.zeros((where.shape[0], 0), np.int64)
            elif name == "slice":
                strides = params["strides"] or (1,) * len(in_shape)
                where = np.asarray(params["start_indices"]) + where * np.asarray(strides)
            elif name == "rev":
                where = where.copy()
                for d in params["dimensions"]:
                    where[:, d] = in_shape[d] - 1 - where[:, d]
            elif name in _VALUE_OPS:
                continue
            elif name == "pad":
                low = np.asarray([c[0] for c in params["padding_config"]])
                step = np.asarray([c[2] + 1 for c in params["padding_config"]])
                shifted = where - low
                source = shifted // step
                outside = np.any((shifted % step != 0) | (source < 0) | (source >= np.asarray(in_shape)), axis=1)
                padding[i] = outside
                where = np.where(outside[:, None], 0, source)
        return where, padding

    def back_by_dimension(self, positions: Sequence[np.ndarray]):
        """back() for chains that move each dimension on its own (no reshape but of unit
        dimensions): per input dimension its positions and the operand dimension they follow
        (None: one position, 0), and each pad's padding as a mask over the operand's positions
        (np.ix_ form, broadcast). None for other chains."""
        dims = [(d, np.asarray(p, np.int64)) for d, p in enumerate(positions)]
        lengths = [len(p) for p in positions]
        padding = {}
        for i in reversed(range(len(self.ops))):
            eqn = self.ops[i]
            name, params = eqn.primitive.name, eqn.params
            in_shape = tuple(int(x) for x in eqn.invars[0].aval.shape)
            out_shape = tuple(int(x) for x in eqn.outvars[0].aval.shape)
            if name in _VALUE_OPS or name in ("convert_element_type", "copy"):
                continue
            if name == "transpose":
                back = [None] * len(dims)
                for d, source in enumerate(params["permutation"]):
                    back[source] = dims[d]
                dims = back
            elif name == "broadcast_in_dim":
                bd = params["broadcast_dimensions"]
                dims = [dims[bd[j]] if in_shape[j] != 1 else (None, np.zeros(1, np.int64)) for j in range(len(in_shape))]
            elif name == "slice":
                strides = params["strides"] or (1,) * len(in_shape)
                dims = [(d, start + p * stride) for (d, p), start, stride in zip(dims, params["start_indices"], strides)]
            elif name == "rev":
                dims = [(d, in_shape[j] - 1 - p) if j in params["dimensions"] else (d, p) for j, (d, p) in enumerate(dims)]
            elif name == "pad":
                mask = np.zeros(lengths, bool)
                new = []
                for j, ((d, p), (low, _, interior)) in enumerate(zip(dims, params["padding_config"])):
                    shifted = p - low
                    source = shifted // (interior + 1)
                    outside = (shifted % (interior + 1) != 0) | (source < 0) | (source >= in_shape[j])
                    if d is not None and outside.any():
                        shape = [1] * len(lengths)
                        shape[d] = lengths[d]
                        mask |= outside.reshape(shape)
                    elif d is None and outside.any():
                        mask[...] = True
                    new.append((d, np.where(outside, 0, source)))
                padding[i] = mask.reshape(-1)
                dims = new
            elif name in ("squeeze", "expand_dims", "reshape") and \
                    [x for x in in_shape if x != 1] == [x for x in out_shape if x != 1]:
                kept = iter([e for e, x in zip(dims, out_shape) if x != 1])
                dims = [next(kept) if x != 1 else (None, np.zeros(1, np.int64)) for x in in_shape]
            else:
                return None
        return [p for _, p in dims], [d for d, _ in dims], padding

    def values(self, array: np.ndarray, padding: dict) -> np.ndarray:
        """The input's values as the operand holds them: the chain's dtype conversions and value
        ops, and each pad's value where that pad's padding lies (back()'s `padding`), in order."""
        import jax.numpy as jnp
        for i, eqn in enumerate(self.ops):
            if eqn.primitive.name in _VALUE_OPS:
                args = [v.val if hasattr(v, "val") else jnp.asarray(array) for v in eqn.invars]
                array = np.asarray(eqn.primitive.bind(*args, **eqn.params))
            elif eqn.primitive.name == "convert_element_type":
                array = np.asarray(jnp.asarray(array).astype(eqn.params["new_dtype"]))
            elif eqn.primitive.name == "pad":
                array = array.copy()
                array.reshape(-1)[padding[i]] = np.asarray(eqn.invars[1].val, dtype=array.dtype)
        return array


@dataclasses.dataclass
class Plan:
    closed: object            # the full-size ClosedJaxpr
    eqn: object               # its one pallas_call
    operand_sources: list     # per blocked operand: ("input", i, Chain), ("kernel", Plan, k, Chain),
    #                           ("tree", node: inputs through links and concatenations), ("literal",
    #                           value) or ("computed", var)
    prefetch_sources: list    # per scalar-prefetch operand: ("literal", value) or ("computed", var), computed whole
    output_of: list           # per program output: index among the pallas_call's outputs
    output_chains: list       # per program output: the Chain from that pallas_call output to it
    full_grid: tuple


# Calls whose forward value is their body's (a differentiation rule or a rematerialization
# policy changes what a gradient computes, never the value): inlined with the jits. An
# optimization barrier is the identity on its operands.
_INLINED_CALLS = {"jit": "jaxpr", "pjit": "jaxpr", "custom_jvp_call": "call_jaxpr", "custom_vjp_call": "call_jaxpr",
                  "remat2": "jaxpr", "checkpoint": "jaxpr"}


def _jits_inlined(closed_jaxpr):
    """The program with its `jit`s (at any depth outside the kernels) replaced by their bodies, and
    what they compute from literals alone folded: jnp.pad, jnp.flip and jnp.roll are jits around
    their position ops, whose pad value is a literal converted inside. So are the other calls of
    _INLINED_CALLS (a kernel under `jax.custom_vjp`, `jax.checkpoint`) and optimization barriers."""
    import jax
    from jax._src import core

    def run(jaxpr, consts, *args):
        env = {}

        def read(v):
            return v.val if isinstance(v, core.Literal) else env[v]

        for v, x in zip(jaxpr.constvars, consts):
            env[v] = x
        for v, x in zip(jaxpr.invars, args):
            env[v] = x
        for eqn in jaxpr.eqns:
            values = [read(v) for v in eqn.invars]
            if eqn.primitive.name in _INLINED_CALLS:
                inner = eqn.params[_INLINED_CALLS[eqn.primitive.name]]
                if isinstance(inner, core.ClosedJaxpr):
                    outs = run(inner.jaxpr, inner.consts, *values)
                else:  # remat's body is an open jaxpr: its constants are among its operands
                    outs = run(inner, [], *values)
            elif eqn.primitive.name == "optimization_barrier":
                outs = values
            else:
                with eqn.ctx.manager:
                    outs = eqn.primitive.bind(*values, **eqn.primitive.get_bind_params(eqn.params))
                outs = outs if eqn.primitive.multiple_results else [outs]
            for v, x in zip(eqn.outvars, outs):
                env[v] = x
        return [read(v) for v in jaxpr.outvars]

    if not any(e.primitive.name in _INLINED_CALLS or e.primitive.name == "optimization_barrier"
               for e in closed_jaxpr.jaxpr.eqns):
        return closed_jaxpr
    avals = [v.aval for v in closed_jaxpr.jaxpr.invars]
    return jax.make_jaxpr(lambda *args: run(closed_jaxpr.jaxpr, closed_jaxpr.consts, *args))(*avals)


# The most pallas_calls one sampled program may chain (each runs on the steps the next one needs),
# and the most elements of an earlier kernel's output the sampled steps of a later one may read.
MAX_CHAINED_CALLS = 4
MAX_CHAINED_POSITIONS = 1 << 22
# The most output blocks one sampled run may be asked for (a chain's later kernel reading many).
MAX_WANTED_BLOCKS = 256


def plan(closed_jaxpr) -> Plan:
    """The program's sampled form, or NotSampled with the reason."""
    closed_jaxpr = _jits_inlined(closed_jaxpr)
    jaxpr = closed_jaxpr.jaxpr
    # Only the kernels the outputs depend on count: a pallas_call whose results are dropped (put
    # there to make the program look unsampleable) changes no answer.
    calls = [e for e in _cone_eqns(jaxpr) if e.primitive.name == "pallas_call"]
    if not calls:
        raise NotSampled("the program has no pallas_call the outputs depend on")
    if len(calls) > MAX_CHAINED_CALLS:
        raise NotSampled(f"the program has {len(calls)} pallas_calls; sampling chains at most {MAX_CHAINED_CALLS}")
    producers = {o: e for e in jaxpr.eqns for o in e.outvars}
    invar_index = {v: i for i, v in enumerate(jaxpr.invars)}

    def chain_to(var):
        # The chain of position and value ops that computes `var` from an earlier value: (that
        # value, the chain from it to `var`).
        ops = []
        if hasattr(var, "val"):
            return var, Chain([])  # a literal: no producer
        while var in producers and _chain_link(producers[var]) is not None:
            ops.append(producers[var])
            var = _chain_link(producers[var])
        return var, Chain(list(reversed(ops)))

    def call_plan(eqn, depth: int) -> Plan:
        _check_call(eqn)
        gm = eqn.params["grid_mapping"]
        # Operands: program inputs through position and value ops (read by tiles), another kernel's
        # output through them (that kernel run on the steps that write what this one reads), or
        # values computed outside the kernels from small inputs only (a bias reshaped, a scale),
        # computed whole. Scalar-prefetch operands (the tables blocks follow) are computed whole:
        # the index maps are evaluated with their values, and the kernel reads them as it would.
        n_prefetch = gm.num_index_operands
        prefetch_sources = [("literal", v.val) if hasattr(v, "val") else ("computed", v)
                            for v in eqn.invars[:n_prefetch]]
        sources = []
        for var in eqn.invars[n_prefetch:]:
            if hasattr(var, "val"):
                sources.append(("literal", var.val))
                continue
            source, chain = chain_to(var)
            producer = producers.get(source)
            if source in invar_index:
                sources.append(("input", invar_index[source], chain))
            elif producer is not None and producer.primitive.name == "pallas_call":
                if depth + 1 >= MAX_CHAINED_CALLS:
                    raise NotSampled(f"the kernels chain more than {MAX_CHAINED_CALLS} deep")
                k = [o for o in producer.outvars].index(source)
                sources.append(("kernel", call_plan(producer, depth + 1), k, chain))
            else:
                tree = input_tree(var)
                sources.append(("tree", tree) if tree is not None else ("computed", var))
        return Plan(closed_jaxpr, eqn, sources, prefetch_sources, [], [], tuple(int(g) for g in gm.grid))

    def input_tree(var, depth: int = 0):
        # How `var` is made of program inputs by chain links and concatenations (of inputs, of
        # copies of one: `jnp.concatenate([k, k])`): a tree read position by position, or None.
        if var in invar_index:
            return ("leaf", invar_index[var])
        producer = producers.get(var)
        if producer is None or depth > 64:
            return None
        link = _chain_link(producer)
        if link is not None:
            child = input_tree(link, depth + 1)
            return None if child is None else ("link", producer, child)
        name = producer.primitive.name
        if name == "concatenate" and not any(hasattr(v, "val") for v in producer.invars):
            children = [input_tree(v, depth + 1) for v in producer.invars]
            return None if any(c is None for c in children) else ("concat", producer, children)
        if name in _ELEMENTWISE and len(producer.outvars) == 1:
            # Several arrays of one shape combined element by element (k * ones_like(k), a select
            # on a mask built from iotas): each read at the same positions.
            shape = producer.outvars[0].aval.shape
            children = []
            for v in producer.invars:
                if hasattr(v, "val"):
                    if np.ndim(v.val) != 0:
                        return None
                    children.append(None)
                elif tuple(v.aval.shape) != tuple(shape):
                    return None
                else:
                    children.append(input_tree(v, depth + 1))
                    if children[-1] is None:
                        return None
            return ("elementwise", producer, children)
        if name == "broadcast_in_dim" and hasattr(producer.invars[0], "val"):
            return ("constant", np.asarray(producer.invars[0].val))
        if name == "iota":
            return ("iota", producer)
        return None

    output_of, output_chains, finals = [], [], set()
    for var in jaxpr.outvars:
        source, chain = chain_to(var)
        producer = None if hasattr(source, "val") else producers.get(source)
        if producer is None or producer.primitive.name != "pallas_call":
            raise NotSampled("a program output is computed outside the pallas_calls (other than by position and "
                             "elementwise ops on one of their outputs)")
        finals.add(id(producer))
        output_of.append(list(producer.outvars).index(source))
        output_chains.append(chain)
    if len(finals) != 1:
        raise SeveralCalls("the program's outputs come from different pallas_calls")
    final = producers[chain_to(jaxpr.outvars[0])[0]]
    planned = call_plan(final, 0)
    return dataclasses.replace(planned, output_of=output_of, output_chains=output_chains)


def _blocked(bm) -> bool:
    """Whether a block mapping's blocks are tiles named by its index map (in VMEM, every dimension
    blocked or squeezed), so that the sample can hold only the blocks the kept steps name."""
    space = str(getattr(bm.transformed_block_aval, "memory_space", "")).lower()
    return not ("any" in space or "hbm" in space) and \
        all(type(dim).__name__ in ("Blocked", "Squeezed") for dim in bm.block_shape)


# Inputs that are not blocked (in HBM, or with element-offset dimensions) are passed whole while
# they hold at most this much together (drawn tile by tile: ~1.4 CPU-s for 64 MiB of bfloat16;
# the judge holds about three copies while interpret mode runs: 1.41 GiB resident for one of 256
# MiB, 2.3 GiB and 11-15 CPU-s for gemm's A and B, 576 MiB, which an honest manual-copy GEMM
# passes). Past it, program inputs as they are are past the sample's bounds; an operand computed
# outside the kernel (broadcast, concatenated) is refused as a form: made large to switch the
# sample off.
WHOLE_OPERAND_BYTES = 256 << 20
# ...and one the kernel never reads is refused above this size: nothing to check in it, and a
# large one only costs the sample memory (a 256 MiB one took the judge to 1.65 GiB resident).
UNREAD_OPERAND_BYTES = 16 << 20


def _check_call(eqn) -> None:
    """NotSampled for a pallas_call whose sampled run cannot be set up."""
    gm = eqn.params["grid_mapping"]
    if gm.num_dynamic_grid_bounds:
        raise NotSampled("the grid has dynamic bounds")
    if gm.vmapped_dims:
        raise NotSampled("the pallas_call is vmapped")
    if eqn.params.get("mesh") is not None:
        raise NotSampled("the kernel runs on a core mesh")
    # An input in HBM (manual DMA) or with other than blocked dimensions is passed whole, if small
    # (run_sampled); an output must be blocked: its sampled blocks are what the steps write.
    # An output aliased to an input is run unaliased: a blocked output's block is written from
    # VMEM whole, so the aliased buffer's old contents reach only blocks no step writes, and those
    # are never sampled (a wanted block no step writes disagrees).
    for bm in gm.block_mappings[gm.num_inputs:]:
        if not _blocked(bm):
            # The kernel writes it by its own copies, where its index maps do not say: any step may
            # write any of it, so a sample would be the whole grid with the whole output, and the
            # copies themselves are slow to interpret (a kernel of one step writing its output in
            # 4 KiB copies took 55 CPU-s). A form, not a size: an output block written by a copy
            # costs a kernel nothing and would switch the sample off on every task (red team 25:
            # a window of key blocks paid 5.42x behind it, a rotation of K blocks 1.58x).
            raise NotSampled(f"{bm.origin} is written by the kernel's own copies (in HBM, not blocked): the "
                             f"sample cannot tell which grid steps write a block of it")
    grid = tuple(int(g) for g in gm.grid)
    if int(np.prod(grid, dtype=np.int64)) > MAX_GRID_POINTS:
        raise NotSampled(f"the grid has {int(np.prod(grid))} steps")


def _cone_eqns(jaxpr) -> list:
    """The equations the program's outputs depend on, in program order."""
    producers = {o: e for e in jaxpr.eqns for o in e.outvars}
    needed, todo = set(), [v for v in jaxpr.outvars if not hasattr(v, "val")]
    while todo:
        v = todo.pop()
        e = producers.get(v)
        if e is None or id(e) in needed:
            continue
        needed.add(id(e))
        todo.extend(x for x in e.invars if not hasattr(x, "val"))
    return [e for e in jaxpr.eqns if id(e) in needed]


def _cone_inputs(jaxpr, var) -> set:
    """The program inputs a value outside the kernel is computed from."""
    producers = {o: e for e in jaxpr.eqns for o in e.outvars}
    seen, todo, inputs = set(), [var], set()
    invars = set(jaxpr.invars)
    while todo:
        v = todo.pop()
        if hasattr(v, "val") or v in seen:
            continue
        seen.add(v)
        if v in invars:
            inputs.add(v)
        elif v in producers:
            if producers[v].primitive.name == "pallas_call":
                raise NotSampled("an operand is computed by another pallas_call")
            todo.extend(producers[v].invars)
    return inputs


# --------------------------------------------------------------------------- the grid

def _grid_points(grid: tuple) -> np.ndarray:
    """Every step of the grid in the order the grid runs them (last axis fastest): [steps, axes]."""
    if not grid:
        return np.zeros((1, 0), np.int32)
    return np.indices(grid, dtype=np.int32).reshape(len(grid), -1).T


def _index_map_table(bm, points: np.ndarray, prefetch: Sequence[np.ndarray] = ()) -> np.ndarray:
    """The block each step names: [steps, dims] (one evaluation of the index map, vectorized), the
    scalar-prefetch tables it reads given as their values."""
    import jax
    from jax._src import core
    closed = bm.index_map_jaxpr
    if prefetch:
        from jax._src.state.discharge import discharge_state
        pure = discharge_state(closed)
        n_out = len(closed.jaxpr.outvars)
        tables = [jax.numpy.asarray(t) for t in prefetch]
        fn = lambda *ids: core.jaxpr_as_fun(pure)(*ids, *tables)[:n_out]  # noqa: E731
    else:
        fn = core.jaxpr_as_fun(closed)
    cols = [points[:, a] for a in range(points.shape[1])]
    out = jax.vmap(lambda *ids: tuple(fn(*ids)))(*cols) if cols else tuple(fn())
    out = [np.broadcast_to(np.asarray(o, np.int64), (points.shape[0],)) for o in out]
    return np.stack(out, axis=1) if out else np.zeros((points.shape[0], 0), np.int64)


def _extent(bm, dim: int, full: int) -> int:
    d = bm.block_shape[dim]
    return 1 if type(d).__name__ == "Squeezed" else int(d.block_size)


def _block_count(bm, dim: int) -> int:
    full = int(bm.array_aval.shape[dim])
    size = _extent(bm, dim, full)
    return -(-full // size)


def element_box(bm, block: Sequence[int]) -> tuple:
    """The elements block `block` of mapping `bm` covers: (start, stop) per dimension."""
    box = []
    for d, b in enumerate(block):
        full = int(bm.array_aval.shape[d])
        size = _extent(bm, d, full)
        box.append((int(b) * size, min((int(b) + 1) * size, full)))
    return tuple(box)


# --------------------------------------------------------------------------- inputs

class LazyInputs:
    """A task's full-size inputs, drawn per tile from (seed, input, tile position) with the task's
    initializers (inputs.values): the same element has the same value whoever asks for it, a block
    read or the whole input (an operand in HBM)."""

    def __init__(self, specs, seed: int):
        from . import inputs as draws
        self.specs, self.seed, self._draws = specs, seed, draws
        self._whole: dict[int, np.ndarray] = {}
        self._tiles: dict[tuple, np.ndarray] = {}  # the candidate's run reads the oracle's tiles again
        self._generators: dict[int, np.random.Generator] = {}

    def _tile(self, spec) -> tuple:
        n = len(spec.shape)
        second = TILE_SECOND if n == 2 else TILE_SECOND_HIGHER
        return tuple(TILE_LAST if d == n - 1 else second if d == n - 2 else 1 for d in range(n))

    def whole_size(self, index: int) -> bool:
        spec = self.specs[index]
        nbytes = int(np.prod(spec.shape, dtype=np.int64)) * np.dtype(spec.dtype).itemsize
        return nbytes <= WHOLE_INPUT_BYTES or spec.init["kind"] in ("permutation", "partition")

    def whole(self, index: int) -> np.ndarray:
        if index not in self._whole:
            spec = self.specs[index]
            if not self.whole_size(index):
                raise NotSampled(f"input '{spec.name}' is too large to draw whole "
                                 f"({list(spec.shape)}) and the kernel does not read it by blocks")
            self._whole[index] = self._draws.draw(spec, np.random.default_rng([self.seed, index, 1 << 30]))
        return self._whole[index]

    def take(self, index: int, positions: Sequence[np.ndarray], shape: Sequence[int] | None = None) -> np.ndarray:
        """The elements at these positions per dimension (np.ix_) of the input viewed with `shape`
        (a reshape of it: the same row-major order; default its own shape)."""
        spec = self.specs[index]
        view = tuple(int(d) for d in (spec.shape if shape is None else shape))
        if not self.whole_size(index) and all(len(p) == n and (n == 0 or (p[0] == 0 and np.all(np.diff(p) == 1)))
                                              for p, n in zip(positions, view)):
            return self.every_tile(index).reshape(view)  # the whole input (an operand in HBM)
        if shape is not None and tuple(shape) != tuple(spec.shape):
            grid = np.meshgrid(*positions, indexing="ij")
            flat = np.ravel_multi_index(tuple(g.reshape(-1) for g in grid), tuple(shape))
            return self.take_flat(index, flat).reshape(tuple(len(p) for p in positions))
        if self.whole_size(index):
            return self.whole(index)[np.ix_(*positions)]
        tile = self._tile(spec)
        tiles = [np.unique(p // t) for p, t in zip(positions, tile)]
        shape = [len(ts) * t for ts, t in zip(tiles, tile)]
        block = np.empty(shape, dtype=spec.dtype)
        for coords in np.ndindex(*[len(ts) for ts in tiles]):
            where = tuple(int(tiles[d][c]) for d, c in enumerate(coords))
            piece = self._piece(index, where)
            block[tuple(slice(c * t, c * t + s) for c, t, s in zip(coords, tile, piece.shape))] = piece
        local = [np.searchsorted(ts, p // t) * t + p % t for ts, p, t in zip(tiles, positions, tile)]
        return block[np.ix_(*local)]

    def take_through(self, index: int, positions: Sequence[np.ndarray], chain: "Chain") -> np.ndarray:
        """The elements at these positions per dimension (np.ix_) of a value computed from the input
        by a chain of position ops."""
        if all(e.primitive.name in _VIEWS for e in chain.ops):
            shape = chain.ops[-1].outvars[0].aval.shape if chain.ops else None
            return self.take(index, positions, None if shape is None else tuple(int(d) for d in shape))
        separable = chain.back_by_dimension(positions)
        if separable is not None:
            # Each input dimension follows one operand dimension (or none): the input's box, then
            # that box indexed along the operand's dimensions. No position is listed one by one.
            lists, follows, padding = separable
            box = self.take(index, lists)
            lengths = tuple(len(p) for p in positions)
            index_arrays = []
            for j, d in enumerate(follows):
                shape = [1] * len(lengths)
                if d is not None:
                    shape[d] = lengths[d]
                index_arrays.append(np.arange(lengths[d] if d is not None else 1).reshape(shape))
            values = np.broadcast_to(box[tuple(index_arrays)], lengths) if index_arrays else np.broadcast_to(box, lengths)
            return chain.values(np.ascontiguousarray(values), padding)
        where = _every_position(positions)
        source, padding = chain.back(where)
        spec = self.specs[index]
        flat = np.ravel_multi_index(tuple(source.T), tuple(spec.shape)) if len(spec.shape) else np.zeros(where.shape[0], np.int64)
        values = self.take_flat(index, flat).reshape(tuple(len(p) for p in positions))
        return chain.values(values, padding)

    def take_flat(self, index: int, flat: np.ndarray) -> np.ndarray:
        """The elements at these row-major positions."""
        spec = self.specs[index]
        if self.whole_size(index):
            return self.whole(index).reshape(-1)[flat]
        tile = np.asarray(self._tile(spec))
        where = np.stack(np.unravel_index(flat, tuple(spec.shape)), axis=1)
        tiles = where // tile
        tile_id = np.ravel_multi_index(tuple(tiles.T), tuple(-(-np.asarray(spec.shape) // tile)))
        order = np.argsort(tile_id, kind="stable")
        _, starts = np.unique(tile_id[order], return_index=True)
        out = np.empty(flat.shape[0], dtype=spec.dtype)
        for a, b in zip(starts, list(starts[1:]) + [order.shape[0]]):
            rows = order[a:b]
            coords = tiles[rows[0]]
            piece = self._piece(index, tuple(int(c) for c in coords))
            out[rows] = piece[tuple((where[rows] - coords * tile).T)]
        return out

    def every_tile(self, index: int) -> np.ndarray:
        """The whole input, tile by tile (the same values as its tiles read one by one)."""
        spec = self.specs[index]
        tile = self._tile(spec)
        out = np.empty(tuple(spec.shape), dtype=spec.dtype)
        counts = [-(-int(n) // t) for n, t in zip(spec.shape, tile)]
        for where in np.ndindex(*counts):
            piece = self._tiles.get((index, where))
            if piece is None:
                piece = self._drawn_tile(index, where)
            out[tuple(slice(w * t, w * t + s) for w, t, s in zip(where, tile, piece.shape))] = piece
        return out

    def _piece(self, index: int, where: tuple) -> np.ndarray:
        piece = self._tiles.get((index, where))
        if piece is None:
            piece = self._tiles[(index, where)] = self._drawn_tile(index, where)
        return piece

    def _drawn_tile(self, index: int, where: tuple) -> np.ndarray:
        """One tile, from a counter-based stream (Philox, keyed by the seed and the input): the
        tile's number is the counter's high word, so a tile costs its draws and no generator's
        construction (a whole 64 MiB input is 65,536 tiles)."""
        spec = self.specs[index]
        tile = self._tile(spec)
        sizes = tuple(min(t, int(full) - w * t) for t, full, w in zip(tile, spec.shape, where))
        generator = self._generators.get(index)
        if generator is None:
            key = np.random.SeedSequence([self.seed, index]).generate_state(2, np.uint64)
            generator = self._generators[index] = np.random.Generator(np.random.Philox(key=key))
        counts = [-(-int(n) // t) for n, t in zip(spec.shape, tile)]
        state = generator.bit_generator.state
        state["state"]["counter"] = np.array([0, np.ravel_multi_index(where, counts) if counts else 0, 0, 0], np.uint64)
        state["buffer_pos"], state["has_uint32"], state["uinteger"] = 4, 0, 0  # nothing buffered from another tile
        generator.bit_generator.state = state
        n = int(np.prod(sizes, dtype=np.int64))
        return self._draws.rounded(self._draws.values(spec.init, n, generator), spec).reshape(sizes)


# --------------------------------------------------------------------------- a sampled run

def _steps_for(plan_: Plan, want: dict[int, list[tuple]], prefetch: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The grid steps that write the wanted blocks of each pallas_call output (in grid order), and
    1 for each that starts a run of consecutive steps. Revisits if a block is written in two runs."""
    gm = plan_.eqn.params["grid_mapping"]
    points = _grid_points(plan_.full_grid)
    n_in = gm.num_inputs
    keep = np.zeros(points.shape[0], bool)
    wanted = sum(len(blocks) for blocks in want.values())
    if wanted > MAX_WANTED_BLOCKS:
        raise NotSampled(f"the sample needs {wanted} output blocks of a kernel (more than {MAX_WANTED_BLOCKS})")
    for k, blocks in want.items():
        table = _index_map_table(gm.block_mappings[n_in + k], points, prefetch)
        for block in blocks:
            hit = np.all(table == np.asarray(block, np.int64), axis=1)
            where = np.flatnonzero(hit)
            if where.size and where[-1] - where[0] + 1 != where.size:
                raise Revisits(f"at the full sizes, output {k}'s block {tuple(block)} is written in separate runs "
                               f"of grid steps (first at step {where[0]}, again at step {where[-1]} after others): "
                               f"a revisited output block")
            keep |= hit
    linear = np.flatnonzero(keep)
    if linear.shape[0] > MAX_SAMPLED_STEPS:
        raise NotSampled(f"the sampled blocks are written by {linear.shape[0]} grid steps at the full sizes "
                         f"(more than {MAX_SAMPLED_STEPS})")
    # A run is a stretch of consecutive grid steps; the steps between runs are not run.
    starts = np.ones(linear.shape[0], np.int32)
    starts[1:] = (np.diff(linear) != 1).astype(np.int32)
    return points[keep], starts


def run_sampled(plan_: Plan, want: dict[int, list[tuple]], lazy: LazyInputs, interpret_params,
                poison: tuple = (float("nan"), -(1 << 31))) -> tuple:
    """Runs the pallas_call on the steps that write the wanted blocks. Returns ({(k, block):
    array or None when no step writes it}, steps run). At the first step of each run of
    consecutive steps, every scratch buffer is overwritten first (`poison`: floats, integers):
    what the steps in between would have left there is not reproduced, so a kernel that reads it
    reads poison, not the previous run's leftovers."""
    import jax
    import jax.numpy as jnp
    from jax._src import core
    from jax._src.pallas import core as pallas_core
    from jax._src.pallas.pallas_call import pallas_call_p

    eqn = plan_.eqn
    gm = eqn.params["grid_mapping"]
    n_in, n_out = gm.num_inputs, gm.num_outputs
    computed = _computed_operands(plan_, lazy)
    prefetch = [np.asarray(source[1]) if source[0] == "literal" else np.asarray(computed[source[1]])
                for source in plan_.prefetch_sources]
    steps, starts = _steps_for(plan_, want, prefetch)
    result = {}
    if steps.shape[0] == 0:
        return {(k, tuple(b)): None for k, bs in want.items() for b in bs}, 0
    tables = [_index_map_table(bm, steps, prefetch) for bm in gm.block_mappings]
    whole = [not _blocked(bm) for bm in gm.block_mappings]
    whole_bytes = 0
    for m, (bm, table) in enumerate(zip(gm.block_mappings, tables)):
        if whole[m]:
            nbytes = int(np.prod(bm.array_aval.shape, dtype=np.int64)) * np.dtype(bm.array_aval.dtype).itemsize
            if nbytes > UNREAD_OPERAND_BYTES and m < n_in and not _body_reads(eqn, m):
                raise NotSampled(f"{bm.origin} stays in HBM and holds {nbytes >> 20} MiB, and the kernel never "
                                 f"reads it")
            whole_bytes += nbytes
            if whole_bytes > WHOLE_OPERAND_BYTES:
                source = plan_.operand_sources[m] if m < n_in else None
                if m < n_in and not (source[0] == "input" and all(e.primitive.name in _VIEWS for e in source[2].ops)):
                    raise NotSampled(f"{bm.origin} stays in HBM, holds {nbytes >> 20} MiB and is computed outside "
                                     f"the kernel (more than {WHOLE_OPERAND_BYTES >> 20} MiB to pass whole)")
                raise TooCostly(f"{bm.origin} stays in HBM or has other than blocked dimensions and holds "
                                f"{nbytes >> 20} MiB ({whole_bytes >> 20} MiB with the other operands passed whole: "
                                f"more than {WHOLE_OPERAND_BYTES >> 20} MiB)")
            continue
        for d in range(table.shape[1]):
            count = _block_count(bm, d)
            outside = np.flatnonzero((table[:, d] < 0) | (table[:, d] >= count))
            if outside.size:  # told here: the compact operands would wrap a negative index around
                q = outside[0]
                raise KernelRaised(f"at the full sizes, step {tuple(int(x) for x in steps[q])} names block "
                                   f"{tuple(int(x) for x in table[q])} of {bm.origin}, outside its "
                                   f"{count} blocks along dimension {d}")
    kept = [[np.unique(t[:, d]) for d in range(t.shape[1])] for t in tables]
    compact_tables = [tables[m].astype(np.int32) if whole[m] or not tables[m].shape[1] else
                      np.stack([np.searchsorted(kept[m][d], tables[m][:, d]) for d in range(tables[m].shape[1])],
                               axis=1).astype(np.int32)
                      for m in range(len(tables))]

    def positions(bm, m) -> list[np.ndarray]:
        if whole[m]:  # the whole operand, its index map's own values
            return [np.arange(int(n)) for n in bm.array_aval.shape]
        out = []
        for d, blocks in enumerate(kept[m]):
            full = int(bm.array_aval.shape[d])
            size = _extent(bm, d, full)
            out.append(np.concatenate([np.arange(b * size, min((b + 1) * size, full)) for b in blocks]))
        return out

    # Operands: the kept blocks only (whole ones are bounded above, on their own), held as the
    # product of the blocks kept along each dimension. Past the bound, only what the steps name
    # is a size: an operand the body never reads, or blocks that move along several dimensions at
    # once (a rotation of K blocks by the output tile: the product of its positions, not its
    # blocks), is a form (red team 26: an unread copy of B switched the sample off at 0.230x for
    # the starter's 0.241x, and paid wrong kernels 3.25x-4.64x).
    held, named, unread = 0, 0, []
    for m, bm in enumerate(gm.block_mappings):
        if whole[m]:
            continue
        itemsize = np.dtype(bm.array_aval.dtype).itemsize
        product = int(np.prod([len(p) for p in positions(bm, m)], dtype=np.int64)) * itemsize
        held += product
        if m < n_in and not _body_reads(eqn, m):
            unread.append((product, bm.origin))
            continue
        block = int(np.prod([_extent(bm, d, int(bm.array_aval.shape[d])) for d in range(tables[m].shape[1])],
                            dtype=np.int64)) * itemsize
        named += (len(np.unique(tables[m], axis=0)) if tables[m].shape[1] else 1) * block
    if held > MAX_COMPACT_BYTES:
        if any(product > UNREAD_OPERAND_BYTES for product, _ in unread):
            product, origin = max(unread)
            raise NotSampled(f"{origin} is never read by the kernel and its sampled blocks hold {product >> 20} MiB")
        if sum(len(blocks) for blocks in want.values()) > 1:
            raise SplitBlocks(f"the sampled blocks together are held as {held >> 20} MiB")
        if named <= MAX_COMPACT_BYTES:
            raise NotSampled(f"the sampled blocks name {named >> 20} MiB, held as the product of the blocks kept "
                             f"along each dimension {held >> 20} MiB (more than {MAX_COMPACT_BYTES >> 20} MiB): "
                             f"blocks that move along several dimensions at once")
        raise TooCostly(f"the sampled blocks read and write {held >> 20} MiB at the full sizes "
                        f"(more than {MAX_COMPACT_BYTES >> 20} MiB)")
    operands = []
    earlier_steps = 0  # the steps earlier kernels of a chain ran to feed this one
    for m, (bm, source) in enumerate(zip(gm.block_mappings[:n_in], plan_.operand_sources)):
        pos = positions(bm, m)
        if source[0] == "input":
            operands.append(lazy.take_through(source[1], pos, source[2]))
        elif source[0] == "kernel":
            if whole[m]:
                raise NotSampled(f"{bm.origin} is another kernel's output and is not blocked")
            values, ran = _from_kernel(source[1], source[2], source[3], pos, lazy, interpret_params, poison)
            operands.append(values)
            earlier_steps += ran
        elif source[0] == "literal":
            operands.append(np.asarray(source[1])[np.ix_(*pos)] if pos else np.asarray(source[1]))
        elif source[0] == "tree":
            operands.append(_tree_values(source[1], _every_position(pos), lazy).reshape(tuple(len(p) for p in pos)))
        else:
            operands.append(np.asarray(computed[source[1]])[np.ix_(*pos)] if pos else np.asarray(computed[source[1]]))
    out_shapes = [tuple(len(p) for p in positions(bm, n_in + k)) for k, bm in enumerate(gm.block_mappings[n_in:])]

    # The rewritten call: S steps, index maps as table lookups, the body's grid environment the
    # original step's coordinates and the full-size extents.
    pid_table = jnp.asarray(steps.astype(np.int32))
    full_grid = plan_.full_grid

    start_table = jnp.asarray(starts)

    def local_grid_env(grid_point, grid):
        # The original axes, and one more that the poisoning wrapper reads: 1 at a run's first step.
        return tuple(pallas_core.GridAxis(pid_table[grid_point[0], a], full_grid[a]) for a in range(len(full_grid))) + \
            (pallas_core.GridAxis(start_table[grid_point[0]], 2),)

    new_bms = []
    # The index maps become lookups of the step's blocks; they still take the scalar-prefetch refs
    # (the call's signature), which they no longer read.
    prefetch_avals = list(gm.index_map_avals[len(full_grid):])
    for m, bm in enumerate(gm.block_mappings):
        table = jnp.asarray(compact_tables[m])
        ndim = compact_tables[m].shape[1]
        index_map = _traced(lambda s, *refs, t=table, n=ndim: tuple(t[s, d] for d in range(n)),
                            [core.ShapedArray((), jnp.int32), *prefetch_avals])
        shape = tuple(operands[m].shape) if m < n_in else out_shapes[m - n_in]
        new_bms.append(dataclasses.replace(bm, index_map_jaxpr=index_map,
                                           array_aval=bm.array_aval.update(shape=shape),
                                           allow_captured_consts=True))
    from jax import tree_util
    new_gm = dataclasses.replace(
        gm, grid=(int(steps.shape[0]),), grid_names=None, block_mappings=tuple(new_bms),
        index_map_tree=tree_util.tree_structure(((0,) * (1 + len(prefetch_avals)), {})),
        index_map_avals=(core.ShapedArray((), jnp.int32), *prefetch_avals), local_grid_env=local_grid_env)
    body = _poisoned_at_run_starts(eqn.params["jaxpr"], len(gm.scratch_avals), full_grid, poison)
    params = dict(eqn.params, grid_mapping=new_gm, interpret=interpret_params, jaxpr=body, input_output_aliases=(),
                  out_avals=tuple(a.update(shape=s) for a, s in zip(eqn.params["out_avals"], out_shapes)),
                  compiler_params=_one_axis(eqn.params.get("compiler_params")), cost_estimate=None)
    try:
        # On the device one at a time, the host copy dropped: an operand passed whole is large.
        for i in range(len(operands)):
            operands[i] = jnp.asarray(operands[i])
        outs = pallas_call_p.bind(*[jnp.asarray(t) for t in prefetch], *operands, **params)
        outs = [np.asarray(o) for o in outs]
    except Exception as error:  # the kernel's doing (an interpret-mode error, a bad read)
        from jax.experimental.pallas import tpu as pltpu
        pltpu.reset_tpu_interpret_mode_state()  # interpret mode's shared state is stale after an error
        raise KernelRaised(f"{type(error).__name__}: {str(error)[:300]}") from error

    # The wanted blocks, cut out of the compact outputs.
    for k, blocks in want.items():
        m = n_in + k
        bm = gm.block_mappings[m]
        for block in blocks:
            block = tuple(int(b) for b in block)
            written = any(np.array_equal(row, block) for row in tables[m])
            if not written:
                result[(k, block)] = None
                continue
            index = []
            for d, b in enumerate(block):
                full = int(bm.array_aval.shape[d])
                size = _extent(bm, d, full)
                start = sum(min((u + 1) * size, full) - u * size for u in kept[m][d] if u < b)
                index.append(slice(start, start + min((b + 1) * size, full) - b * size))
            result[(k, block)] = outs[k][tuple(index)]
    return result, int(steps.shape[0]) + earlier_steps


def _every_position(positions: Sequence[np.ndarray]) -> np.ndarray:
    """Every position of the np.ix_ product of per-dimension positions, as rows [n, dims] (one row
    of no dimensions for a scalar). At most MAX_CHAINED_POSITIONS of them: listed one by one, a
    position costs 8 bytes a dimension and more in the ops it goes through (red team 25's doubled
    512 MiB operand, followed position by position, took a judge past 6 GiB)."""
    if not len(positions):
        return np.zeros((1, 0), np.int64)
    count = int(np.prod([len(p) for p in positions], dtype=np.int64))
    if count > MAX_CHAINED_POSITIONS:
        raise NotSampled(f"an operand computed outside the kernel would be followed position by position at "
                         f"{count} positions (more than {MAX_CHAINED_POSITIONS})")
    grid = np.meshgrid(*positions, indexing="ij")
    return np.stack([g.reshape(-1) for g in grid], axis=1).astype(np.int64)


def _tree_values(node, where: np.ndarray, lazy: LazyInputs) -> np.ndarray:
    """The values at these positions ([n, dims]) of a value made of program inputs (plan's
    input_tree): positions mapped back through each link, split among a concatenation's operands,
    the same positions of every operand of an elementwise op, a broadcast constant, an iota's."""
    kind = node[0]
    if kind == "leaf":
        spec = lazy.specs[node[1]]
        flat = np.ravel_multi_index(tuple(where.T), tuple(spec.shape)) if len(spec.shape) else np.zeros(where.shape[0], np.int64)
        return lazy.take_flat(node[1], flat)
    if kind == "link":
        link = Chain([node[1]])
        back, padding = link.back(where)
        return link.values(_tree_values(node[2], back, lazy), padding)
    if kind == "constant":
        return np.full(where.shape[0], node[1])
    if kind == "iota":
        eqn = node[1]
        return where[:, eqn.params["dimension"]].astype(np.dtype(eqn.params["dtype"]))
    if kind == "elementwise":
        import jax.numpy as jnp
        eqn = node[1]
        args = [v.val if child is None else jnp.asarray(_tree_values(child, where, lazy))
                for v, child in zip(eqn.invars, node[2])]
        return np.asarray(eqn.primitive.bind(*args, **eqn.params))
    eqn = node[1]  # a concatenation
    axis = eqn.params["dimension"]
    out = np.empty(where.shape[0], dtype=np.dtype(eqn.outvars[0].aval.dtype))
    start = 0
    for operand, child in zip(eqn.invars, node[2]):
        size = int(operand.aval.shape[axis])
        rows = np.flatnonzero((where[:, axis] >= start) & (where[:, axis] < start + size))
        if rows.size:
            part = where[rows].copy()
            part[:, axis] -= start
            out[rows] = _tree_values(child, part, lazy)
        start += size
    return out


def _body_reads(eqn, m: int) -> bool:
    """Whether the kernel body touches its operand m at all (a ref no equation of the body names,
    in a branch or a loop included, since those name it among their operands, is never read)."""
    gm = eqn.params["grid_mapping"]
    body = eqn.params["jaxpr"]
    ref = body.invars[gm.num_index_operands + m]
    return any(ref in e.invars for e in body.eqns) or ref in body.outvars


def _from_kernel(producer: Plan, k: int, chain: Chain, positions: Sequence[np.ndarray], lazy: LazyInputs,
                 interpret_params, poison: tuple) -> tuple[np.ndarray, int]:
    """The elements at these positions per dimension (np.ix_) of a value computed from another
    kernel's output k through `chain`: that kernel run on the steps that write the blocks holding
    them (a block no step writes reads as uninitialized memory: NaN, or the most negative integer).
    Returns the values and the steps run."""
    count = int(np.prod([len(p) for p in positions], dtype=np.int64))
    if count > MAX_CHAINED_POSITIONS:
        raise NotSampled(f"the sampled steps read {count} elements of another kernel's output (more than "
                         f"{MAX_CHAINED_POSITIONS})")
    where = _every_position(positions)
    gm = producer.eqn.params["grid_mapping"]
    shape = tuple(int(d) for d in gm.block_mappings[gm.num_inputs + k].array_aval.shape)
    if chain.ops:
        where, padding = chain.back(where)
    else:
        padding = {}
    flat = np.ravel_multi_index(tuple(where.T), shape) if shape else np.zeros(where.shape[0], np.int64)
    _, _, blocks = _blocks_of(producer, k, flat)
    got, ran = run_sampled(producer, {k: blocks}, lazy, interpret_params, poison)
    dtype = np.dtype(gm.block_mappings[gm.num_inputs + k].array_aval.dtype)
    for block in blocks:
        if got[(k, block)] is None:  # never written: what the chip's buffer held
            size = tuple(hi - lo for lo, hi in element_box(gm.block_mappings[gm.num_inputs + k], block))
            fill = np.nan if np.issubdtype(dtype, np.floating) or dtype.kind == "V" else np.iinfo(dtype).min
            got[(k, block)] = np.full(size, fill, dtype)
    values = _gather(producer, k, flat, got).reshape(tuple(len(p) for p in positions))
    return chain.values(values, padding), ran


def _traced(fn, avals):
    """fn traced on these avals (refs among them) as a ClosedJaxpr, its captured arrays as consts."""
    from jax._src import api_util, core
    from jax._src import linear_util as lu
    from jax._src.interpreters import partial_eval as pe
    info = api_util.debug_info("sampled index map", fn, tuple(avals), {})
    jaxpr, _, consts = pe.trace_to_jaxpr_dynamic(lu.wrap_init(fn, debug_info=info), avals)
    return core.ClosedJaxpr(jaxpr, consts)


def _poisoned_at_run_starts(body, n_scratch: int, full_grid: tuple, poison: tuple):
    """The kernel body with its scratch buffers overwritten at a run's first step (the grid axis
    after the original ones says which), then the body as it was."""
    if not n_scratch:
        return body
    import jax
    import jax.numpy as jnp
    from jax._src import api_util, core
    from jax._src import linear_util as lu
    from jax._src.interpreters import partial_eval as pe
    from jax._src.pallas import core as pallas_core
    from jax.experimental import pallas as pl

    def poison_value(dtype):
        if jnp.issubdtype(dtype, jnp.floating):
            return poison[0]
        if jnp.issubdtype(dtype, jnp.integer):
            info = jnp.iinfo(dtype)
            return max(info.min, min(info.max, poison[1]))
        return True

    def wrapped(*refs):
        def poison():
            for ref in refs[len(refs) - n_scratch:]:
                if jax.dtypes.issubdtype(ref.dtype, jax.dtypes.extended):
                    continue  # a DMA semaphore: its count is the interpreter's, zero at a run's start
                ref[...] = jnp.full(ref.shape, poison_value(ref.dtype), ref.dtype)
        pl.when(pl.program_id(len(full_grid)) == 1)(poison)
        core.eval_jaxpr(body, [], *refs)
        return []

    avals = [v.aval for v in body.invars]
    info = api_util.debug_info("sampled kernel", wrapped, tuple(avals), {})
    with pallas_core.tracing_grid_env(tuple(full_grid) + (2,), ()):
        jaxpr, _, consts = pe.trace_to_jaxpr_dynamic(lu.wrap_init(wrapped, debug_info=info), avals)
    if consts:
        raise NotSampled("the kernel body could not be wrapped without constants")
    return jaxpr


def _one_axis(compiler_params):
    """The kernel's compiler parameters for a one-axis grid: dimension semantics for one axis
    (a sequential one: the kept steps run in grid order). A mapping of backends to parameters
    (jax's older form) or the TPU's parameters themselves."""
    def fix(value):
        if dataclasses.is_dataclass(value) and getattr(value, "dimension_semantics", None) is not None:
            return dataclasses.replace(value, dimension_semantics=("arbitrary",))
        return value
    if isinstance(compiler_params, dict):
        return {key: fix(value) for key, value in compiler_params.items()}
    return fix(compiler_params)


class KernelRaised(Exception):
    """The candidate's kernel raised while it ran on its sampled steps."""


def _computed_operands(plan_: Plan, lazy: LazyInputs) -> dict:
    """The operands computed outside the kernel, from whole (small) inputs only."""
    from jax._src import core
    jaxpr = plan_.closed.jaxpr
    wanted = [s[1] for s in plan_.operand_sources + plan_.prefetch_sources if s[0] == "computed"]
    if not wanted:
        return {}
    env = {}
    for v in set().union(*[_cone_inputs(jaxpr, w) for w in wanted]):
        env[v] = lazy.whole(jaxpr.invars.index(v))
    for cv, c in zip(jaxpr.constvars, plan_.closed.consts):
        env[cv] = c
    pending = set(wanted) - set(env)  # an input itself (a prefetched table) is there already
    for e in jaxpr.eqns:
        if not pending:
            break
        if e.primitive.name == "pallas_call":
            continue
        if not all(hasattr(v, "val") or v in env for v in e.invars):
            continue
        vals = [v.val if hasattr(v, "val") else env[v] for v in e.invars]
        out = e.primitive.bind(*vals, **e.params)
        out = out if e.primitive.multiple_results else [out]
        for o, val in zip(e.outvars, out):
            env[o] = val
        pending -= set(e.outvars)
        if not pending:
            break
    if pending:
        raise NotSampled("an operand computed outside the kernel could not be evaluated")
    return {w: env[w] for w in wanted}


# --------------------------------------------------------------------------- the check

def choose_blocks(bm, rng: np.random.Generator, count: int) -> list[tuple]:
    """The last block of an output, and `count` more drawn at random (not the candidate's choice:
    the judge's seed). The last is where a window over the grid's own positions (a causal prefix
    cut short) is shortest; only the drawn ones defend against a kernel wrong elsewhere, since a
    fixed choice can be written around."""
    counts = [_block_count(bm, d) for d in range(len(bm.block_shape))]
    chosen = {tuple(c - 1 for c in counts)}
    total = int(np.prod(counts, dtype=np.int64))
    for flat in rng.choice(total, size=min(count, total), replace=False):
        chosen.add(tuple(int(x) for x in np.unravel_index(int(flat), counts)))
    return sorted(chosen)


def _blocks_of(plan_: Plan, k: int, flat: np.ndarray) -> tuple[np.ndarray, list[tuple]]:
    """Where row-major positions of pallas_call output k lie: their multi-indices, the block of each
    (an array [n, dims]) and the distinct blocks."""
    gm = plan_.eqn.params["grid_mapping"]
    bm = gm.block_mappings[gm.num_inputs + k]
    shape = tuple(int(d) for d in bm.array_aval.shape)
    if int(np.prod(shape, dtype=np.int64)) <= int(flat.max(initial=0)):
        raise NotSampled(f"output {k} has {int(np.prod(shape))} elements; the sample reaches {int(flat.max())}")
    where = np.stack(np.unravel_index(flat, shape), axis=1)
    extents = np.asarray([_extent(bm, d, shape[d]) for d in range(len(shape))])
    blocks = where // extents
    # Distinct blocks through their row-major numbers: np.unique over rows (axis=0) sorts a
    # structured view, tens of times slower on the 10^5 positions of a block or two.
    if blocks.shape[1] == 0:
        return where, blocks, [()] if len(flat) else []
    counts = tuple(int(c) for c in blocks.max(axis=0, initial=0) + 1)
    keys = np.unique(np.ravel_multi_index(tuple(blocks.T), counts))
    return where, blocks, [tuple(int(x) for x in b) for b in np.stack(np.unravel_index(keys, counts), axis=1)]


def _gather(plan_: Plan, k: int, flat: np.ndarray, got: dict) -> np.ndarray | tuple:
    """The values at row-major positions of output k from the blocks a sampled run returned, or
    the first block that no step wrote."""
    gm = plan_.eqn.params["grid_mapping"]
    bm = gm.block_mappings[gm.num_inputs + k]
    shape = tuple(int(d) for d in bm.array_aval.shape)
    where, blocks, distinct = _blocks_of(plan_, k, flat)
    extents = np.asarray([_extent(bm, d, shape[d]) for d in range(len(shape))])
    out = None
    for block in distinct:
        value = got[(k, block)]
        if value is None:
            return block
        box = element_box(bm, block)
        value = value.reshape(tuple(hi - lo for lo, hi in box))
        if out is None:
            out = np.empty(flat.shape[0], dtype=value.dtype)
        rows = np.flatnonzero(np.all(blocks == np.asarray(block), axis=1))
        local = where[rows] - np.asarray(block) * extents
        out[rows] = value[tuple(local.T)]
    return out


def _kernel_flat(plan_: Plan, j: int, flat: np.ndarray) -> tuple[np.ndarray, dict]:
    """Row-major positions of program output j as positions of the pallas_call output it is
    computed from (through its chain), and the chain's padding there (Chain.back)."""
    chain = plan_.output_chains[j]
    if all(e.primitive.name in _VIEWS for e in chain.ops):
        return flat, {}  # a view keeps every element's row-major position
    shape = tuple(int(d) for d in plan_.closed.jaxpr.outvars[j].aval.shape)
    where = np.stack(np.unravel_index(flat, shape), axis=1).astype(np.int64)
    source, padding = chain.back(where)
    gm = plan_.eqn.params["grid_mapping"]
    k_shape = tuple(int(d) for d in gm.block_mappings[gm.num_inputs + plan_.output_of[j]].array_aval.shape)
    return np.ravel_multi_index(tuple(source.T), k_shape), padding


def _program_values(plan_: Plan, j: int, flat: np.ndarray, got: dict) -> np.ndarray | tuple:
    """Program output j's values at row-major positions, from the blocks a sampled run returned
    through the output's chain, or the first block that no step wrote."""
    flat_k, padding = _kernel_flat(plan_, j, flat)
    values = _gather(plan_, plan_.output_of[j], flat_k, got)
    return values if isinstance(values, tuple) else plan_.output_chains[j].values(values, padding)


def _chained(plan_: Plan) -> list:
    """The plan and those of the kernels that feed it, at any depth."""
    return [plan_] + [p for s in plan_.operand_sources if s[0] == "kernel" for p in _chained(s[1])]


def _scratch_avals(plan_: Plan) -> list:
    """The scratch buffers that hold values (DMA semaphores are the interpreter's, not poisoned)."""
    import jax
    return [a for p in _chained(plan_) for a in p.eqn.params["grid_mapping"].scratch_avals
            if not jax.dtypes.issubdtype(getattr(a, "dtype", np.float32), jax.dtypes.extended)]


def _integer_scratch(plan_: Plan) -> bool:
    return any(np.issubdtype(np.dtype(getattr(a, "dtype", np.float32)), np.integer) for a in _scratch_avals(plan_))


def _float_scratch(plan_: Plan) -> bool:
    return any(np.issubdtype(np.dtype(getattr(a, "dtype", np.int32)), np.floating) or
               str(getattr(a, "dtype", "")) == "bfloat16" for a in _scratch_avals(plan_))


def _nan_in_sample(plan_: Plan, samples: dict, got: dict) -> bool:
    for (j, _), (flat, expected) in samples.items():
        actual = _program_values(plan_, j, flat, got)
        if not isinstance(actual, tuple) and _nan_where_finite(expected, actual):
            return True
    return False


def _same(a, b) -> bool:
    if a is None or b is None:
        return a is b
    return np.array_equal(np.asarray(a).view(np.uint8), np.asarray(b).view(np.uint8))


def _nan_where_finite(expected: np.ndarray, actual: np.ndarray) -> bool:
    if not (np.issubdtype(actual.dtype, np.floating) or actual.dtype.kind == "V" or str(actual.dtype) == "bfloat16"):
        return False
    e, a = expected.astype(np.float64), actual.astype(np.float64)
    return bool(np.any(np.isnan(a) & np.isfinite(e)))


def _compare(expected: np.ndarray, actual: np.ndarray, atol: float, rtol: float) -> int:
    e, a = expected.astype(np.float64), actual.astype(np.float64)
    if np.issubdtype(expected.dtype, np.integer):
        return int(np.sum(e != a))
    return int(np.sum(~(np.abs(a - e) <= atol + rtol * np.abs(e))))


def interpret_params():
    from jax.experimental.pallas import tpu as pltpu
    return pltpu.InterpretParams(out_of_bounds_reads="raise", uninitialized_memory="nan")


def sample(oracle_full, task, seed: int, count: int = 2) -> tuple:
    """The oracle's side of a check, which does not depend on the candidate (a judge can compute it
    once per task and seed, beside the reference's outputs): the sampled elements of each program
    output (those of the oracle's last block and of `count` blocks drawn from the seed,
    as row-major positions) and the oracle's values there. Returns ({(output, block): (positions,
    values)}, steps, inputs, seconds)."""
    from . import tpu_numerics
    started, started_cpu = time.perf_counter(), time.process_time()
    try:
        orac = plan(tpu_numerics.as_on_tpu(oracle_full))
    except NotSampled as error:
        raise NotSampled(f"the oracle (the task's starter): {error}") from None
    # The oracle's blocks are taken in its kernel's outputs: its outputs may be views of them and
    # elementwise functions of them (a starter's epilogue outside the kernel), which keep positions.
    keeps_positions = _VIEWS + _VALUE_OPS + ("convert_element_type", "copy")
    lazy = LazyInputs(task.size_sets["full"].inputs, seed)
    rng = np.random.default_rng([seed, 0x5A3D])
    if any(e.primitive.name not in keeps_positions for chain in orac.output_chains for e in chain.ops):
        samples, steps = _sample_program_boxes(orac, lazy, rng, count)
        return samples, steps, lazy, {"oracle": time.perf_counter() - started,
                                      "oracle_cpu": time.process_time() - started_cpu}
    gm = orac.eqn.params["grid_mapping"]
    want = {k: choose_blocks(gm.block_mappings[gm.num_inputs + k], rng, count) for k in sorted(set(orac.output_of))}
    got, steps = _run_blocks(orac, want, lazy)
    samples = {}
    for j, k in enumerate(orac.output_of):
        bm = gm.block_mappings[gm.num_inputs + k]
        shape = tuple(int(d) for d in bm.array_aval.shape)
        for block in want[k]:
            box = element_box(bm, block)
            grid = np.meshgrid(*[np.arange(lo, hi) for lo, hi in box], indexing="ij")
            flat = np.ravel_multi_index(tuple(g.reshape(-1) for g in grid), shape)
            values = _gather(orac, k, flat, got)
            if isinstance(values, tuple):
                raise NotSampled(f"the oracle (the task's starter) writes no block {values} of output {j}")
            values = orac.output_chains[j].values(values, {})
            samples[(j, tuple(block))] = (flat, values)
    return samples, steps, lazy, {"oracle": time.perf_counter() - started, "oracle_cpu": time.process_time() - started_cpu}


# The box of program output positions sampled where the oracle's output is not its kernel's (a
# slice of it, a transpose): up to this many along each of the last two dimensions, one along the
# others.
BOX_EDGE = 128


def _sample_program_boxes(orac: Plan, lazy: LazyInputs, rng: np.random.Generator, count: int) -> tuple:
    """The oracle's side when its outputs move their kernel's elements (a convolution's padded
    result sliced back): boxes of program output positions (the last one, ending at the last
    element, and `count` drawn), the oracle's kernel run on the blocks that hold them."""
    boxes = {}
    for j, var in enumerate(orac.closed.jaxpr.outvars):
        shape = tuple(int(d) for d in var.aval.shape)
        edge = [min(n, BOX_EDGE) if d >= len(shape) - 2 else 1 for d, n in enumerate(shape)]
        starts = [tuple(n - e for n, e in zip(shape, edge))]
        starts += [tuple(int(rng.integers(0, n - e + 1)) for n, e in zip(shape, edge)) for _ in range(count)]
        for start in dict.fromkeys(starts):
            grid = np.meshgrid(*[np.arange(a, a + e) for a, e in zip(start, edge)], indexing="ij")
            boxes[(j, start)] = np.ravel_multi_index(tuple(g.reshape(-1) for g in grid), shape) if shape else \
                np.zeros(1, np.int64)
    want = {}
    for (j, _), flat in boxes.items():
        want.setdefault(orac.output_of[j], set()).update(_blocks_of(orac, orac.output_of[j], _kernel_flat(orac, j, flat)[0])[2])
    got, steps = _run_blocks(orac, {k: sorted(v) for k, v in want.items()}, lazy)
    samples = {}
    for (j, start), flat in boxes.items():
        values = _program_values(orac, j, flat, got)
        if isinstance(values, tuple):
            raise NotSampled(f"the oracle (the task's starter) writes no block {values} of output {j}")
        samples[(j, start)] = (flat, values)
    return samples, steps


def check_program(candidate_full, oracle_full, task, seed: int, count: int = 2, oracle=None) -> Verdict:
    """The candidate's full-size program against the oracle's on the same sampled output elements.
    Both programs as the judge holds them (ClosedJaxprs traced at the full sizes); `oracle` is
    sample()'s result when the caller keeps it.

    The oracle's side comes first: a task whose starter cannot be sampled leaves every candidate
    to the proof (side "oracle"), while a candidate that cannot be sampled where its starter can
    chose a form the sample does not run (side "candidate"; the sample's own failure on it
    included), or a size past the sample's bounds (side "candidate", costly)."""
    seconds = {}
    try:
        samples, oracle_steps, lazy, oracle_seconds = oracle or sample(oracle_full, task, seed, count)
    except (NotSampled, Revisits) as error:
        return Verdict("not_sampled", str(error), side="oracle")
    seconds.update(oracle_seconds)
    try:
        return _check_candidate(candidate_full, task, samples, oracle_steps, lazy, seconds)
    except TooCostly as error:
        return Verdict("not_sampled", str(error), oracle_steps=oracle_steps, seconds=seconds, side="candidate",
                       costly=True)
    except NotSampled as error:
        return Verdict("not_sampled", str(error), oracle_steps=oracle_steps, seconds=seconds, side="candidate")
    except Revisits as error:
        return Verdict("crashed", str(error), seconds=seconds)
    except KernelRaised as error:
        return Verdict("crashed", f"the full-size kernel raised on its sampled steps: {error}", seconds=seconds)
    except Exception as error:  # the sample's own failure on a program it did not foresee
        return Verdict("not_sampled", f"the sample failed on it ({type(error).__name__}: {str(error)[:200]})",
                       oracle_steps=oracle_steps, seconds=seconds, side="candidate")


def _one_output(closed_jaxpr, j: int):
    """The program with output j only (what the others need alone is dropped by plan's cone)."""
    from jax._src import core
    return core.ClosedJaxpr(closed_jaxpr.jaxpr.replace(outvars=[closed_jaxpr.jaxpr.outvars[j]]), closed_jaxpr.consts)


def _run_blocks(plan_: Plan, wanted: dict, lazy, poison: tuple = (float("nan"), -(1 << 31))) -> tuple:
    """run_sampled on all wanted blocks at once, or one block at a time where only their product
    across blocks passes the block bound (each block's steps are a run of their own either way:
    scratch is poisoned at a run's first step)."""
    try:
        return run_sampled(plan_, wanted, lazy, interpret_params(), poison)
    except SplitBlocks:
        got, steps = {}, 0
        for k, blocks in wanted.items():
            for block in blocks:
                one, ran = run_sampled(plan_, {k: [block]}, lazy, interpret_params(), poison)
                got.update(one)
                steps += ran
        return got, steps


def _check_candidate(candidate_full, task, samples: dict, oracle_steps: int, lazy, seconds: dict) -> Verdict:
    from . import tpu_numerics
    started = time.perf_counter()
    on_tpu = tpu_numerics.as_on_tpu(candidate_full)
    full = task.size_sets["full"]
    outputs = len(on_tpu.jaxpr.outvars)
    try:
        parts = [(plan(on_tpu), list(range(outputs)))]
    except SeveralCalls:
        # Each output from its own kernel (a rotary embedding's two tensors by two calls): each
        # output's program sampled on its own, the others dropped from it.
        parts = [(plan(_one_output(on_tpu, j)), [j]) for j in range(outputs)]
    if outputs != len(full.outputs):
        return Verdict("disagree", f"the program has {outputs} outputs; the task has {len(full.outputs)}")
    seconds["plan"] = time.perf_counter() - started
    t, t_cpu = time.perf_counter(), time.process_time()
    actuals, steps = {}, 0
    for cand, part_outputs in parts:
        local = {j: i for i, j in enumerate(part_outputs)}  # program output -> this part's output
        mine = {key: value for key, value in samples.items() if key[0] in local}
        want = {}
        for (j, _), (flat, _) in mine.items():
            k = cand.output_of[local[j]]
            want.setdefault(k, set()).update(_blocks_of(cand, k, _kernel_flat(cand, local[j], flat)[0])[2])
        wanted = {k: sorted(v) for k, v in want.items()}
        got, ran = _run_blocks(cand, wanted, lazy)
        steps += ran
        own = {(local[j], block): value for (j, block), value in mine.items()}
        if _integer_scratch(cand) or (_float_scratch(cand) and _nan_in_sample(cand, own, got)):
            # The scratch poisoned the other way (floats 0, integers the largest): an answer that
            # changes read state that the steps that were not run would have left (an SMEM counter
            # across output blocks, a scan). A NaN that does not change is the kernel's own (an
            # output it left unwritten) and is compared as it is.
            other, _ = _run_blocks(cand, wanted, lazy, poison=(0.0, (1 << 31) - 1))
            if any(not _same(got[key], other[key]) for key in got):
                raise NotSampled("the sampled answer depends on scratch state carried from grid steps that were not "
                                 "run")
        for (j, block), (flat, _) in mine.items():
            actual = _program_values(cand, local[j], flat, got)
            if isinstance(actual, tuple):
                return Verdict("disagree", f"at the full sizes, output '{full.outputs[j].name}' block {actual} is "
                                           f"written by no grid step", [], steps, oracle_steps, seconds)
            actuals[(j, block)] = actual
    seconds["candidate"], seconds["candidate_cpu"] = time.perf_counter() - t, time.process_time() - t_cpu
    compared = []
    for (j, block), (flat, expected) in samples.items():
        spec = full.outputs[j]
        actual = actuals[(j, block)]
        # Both are within the task's tolerance of the exact answer where they are right, so they
        # agree within twice it (the oracle is not the exact answer: it is the trusted starter).
        bad = _compare(expected, actual, 2 * spec.atol, 2 * spec.rtol)
        compared.append((spec.name, block))
        if bad:
            err = float(np.nanmax(np.abs(actual.astype(np.float64) - expected.astype(np.float64))))
            return Verdict("disagree", f"at the full sizes, output '{spec.name}' (the starter's block {block}): "
                                       f"{bad} of {expected.size} elements outside tolerance of the starter's, max "
                                       f"abs difference {err:.3g}", compared, steps, oracle_steps, seconds)
    return Verdict("agree", "", compared, steps, oracle_steps, seconds)


def check_task(task_dir, candidate_source: str, seed: int = 1, count: int = 2, layout: str = "kernelgym",
               suite: str = "") -> Verdict:
    """Standalone: traces the candidate and the task's starter at the full sizes and checks the
    candidate's program on a sample (the judge would use the programs it already holds)."""
    import pathlib
    import tempfile
    import jax
    import jax.numpy as jnp
    from . import task_spec
    task_dir = pathlib.Path(task_dir)
    task = task_spec.load_task(task_dir, layout, suite or task_dir.parent.name)
    args = [jax.ShapeDtypeStruct(tuple(s.shape), jnp.dtype(s.dtype)) for s in task.size_sets["full"].inputs]
    with tempfile.TemporaryDirectory() as folder:
        path = pathlib.Path(folder) / "candidate.py"
        path.write_text(candidate_source)
        kernel = task_spec.load_function(path, "kernel", "sampled_candidate")
        candidate = jax.make_jaxpr(kernel)(*args)
    starter = task_spec.load_function(task.starter_path, "kernel", "sampled_starter")
    oracle = jax.make_jaxpr(starter)(*args)
    return check_program(candidate, oracle, task, seed, count)
