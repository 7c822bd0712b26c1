"""Which values a kernel computes from its data do not depend on the data: a data probe.

decision_coverage.py follows what a program computes from its sizes and grid positions, and
treats what it computes from the operands' data as a choice made at run time, which no size can
steer. A value computed from data by an identity (`(x == x)`, `(x + 3) - x` on integers,
`max(x, x) - min(x, x)`, a bit trick, an identity over several operations through a ref or a
loop's carry) is data only in name: it is the same whatever the data, the compiler may fold it,
and a number of the sizes combined with it (`keep = (z + M/256 - 3) ...`, a `pl.when` on
`one * K/256 < 20`) is then a number of the sizes in disguise, which no check covers at the
full size. Listing the identities a compiler folds does not close the class; measuring does.

So the judge runs each kernel's index maps and body, at the checked size with the most grid steps,
with FILLINGS
independent random fillings of every operand's block (and of every scratch buffer), at the first
and the last grid step, and records every value the kernel computes. A value that is bit-for-bit
the same under every filling at both steps does not depend on the data (a grid position is a
run-time value: the compiler folds only what is constant at every step), and in a loop the compiler
unrolls, a value the same at some trip is a constant there; decision_coverage then treats data
that is such a value as a constant in disguise (`_Data.constant`), whatever the identity that
made it. The fillings are random normals (reals) and random bits (integers, truth values). An
identity is never missed at the steps run; the error is the other way: a value that depends on
only a bit or two of the data can come out the same under every filling (probability
2^-(FILLINGS-1) for one bit) and is then taken for a constant, which fails closed. An operation
the probe cannot run is named to the judge, which then does not trust the estimate (fail closed):
copies between memories and their semaphores run by jax's own discharge rules (an identity
laundered through a DMA is seen), and one that has none (a copy that adds into its destination)
is named like any other. Loops run at most MAX_TRIPS trips. The fillings are
seeded: a kernel gets the same verdict every time.

The same runs read which way a decision went (`decided_by_data`), on the full-size program: a
decision between data and a number of the sizes is made at run time, so no compiler folds it, if
its outcome (not its value: `x*1e-3 + D < 4096` is data and decides nothing) differs between
fillings at the first or the last grid step.

Only values that need it are measured (decision_coverage asks for data that met a number that is
not the same at every size set, or holds one; `evident` drops loads of operand blocks), and only
what they are computed from is compiled: the kernel is traced once under `jax.jit` (the fillings
run by `lax.map` in one program) and compiled for the host's CPU at XLA's lowest optimization
level.
"""
from __future__ import annotations

import itertools

import numpy as np

# Random fillings of the data: a value that depends on one bit of it comes out the same under all
# of them with probability 2^-(FILLINGS-1), and is then taken for a constant (fail closed).
FILLINGS = 4
# Trips of a while loop (or a scan) the probe runs: a count read from random data (a ragged kernel's
# lengths) would otherwise run for billions. Past it the loop stops where it is: its results are still
# computed from the data, so they stay data.
MAX_TRIPS = 16
# Bytes the fillings of one kernel's refs may hold (all FILLINGS of them): a full-size kernel whose
# operands stay in HBM (memory_space=ANY: a paged KV cache) has refs of the whole arrays, gigabytes.
# Past it the kernel is not run, which leaves what was wanted unmeasured (fail closed).
MAX_FILLING_BYTES = 256 << 20
# Work one run of a full-size kernel may take for `decided_by_data` (tpu_estimate's proxy: output
# elements, a matmul's scaled by its depth/128; about 2 GFLOP at this bound). Past it the kernel is
# not run and its decisions stay unexcused: a rolled loop of 16 full-size-block matmuls made the
# probe spend the compile stage's 30 s of CPU (red team, round 11).
MAX_OUTCOME_WORK = 8 << 20


def _sub_jaxprs(eqn):
    """The bodies of an equation, in a fixed order (a pallas_call: its index maps, then its body)."""
    bodies = []
    if eqn.primitive.name == "pallas_call":
        mapping = eqn.params.get("grid_mapping")
        for block in getattr(mapping, "block_mappings", ()) or ():
            index_map = getattr(block, "index_map_jaxpr", None)
            if index_map is not None:
                bodies.append(index_map.jaxpr)
        body = eqn.params["jaxpr"]
        bodies.append(getattr(body, "jaxpr", body))
        return bodies
    for key in sorted(eqn.params):
        param = eqn.params[key]
        for body in param if isinstance(param, (tuple, list)) else (param,):
            inner = getattr(body, "jaxpr", body)
            if hasattr(inner, "eqns") and hasattr(inner, "invars"):
                bodies.append(inner)
    return bodies


def variables(jaxpr) -> list:
    """Every variable an equation of `jaxpr` (or of a body inside it) defines, in a fixed order:
    two programs of one template list their variables alike, so a position in this list names the
    same variable in each."""
    out = []

    def visit(j):
        for eqn in j.eqns:
            out.extend(eqn.outvars)
            for inner in _sub_jaxprs(eqn):
                visit(inner)

    visit(jaxpr)
    return out


def _is_ref(var) -> bool:
    return type(getattr(var, "aval", None)).__name__ == "AbstractRef"


def _filling(aval, rng):
    """FILLINGS random contents for a ref or value of `aval` (stacked), drawn on the host: normals
    for reals, random bits for integers and truth values (random numbers are not drawn inside the
    probe's program: XLA compiles a random generator slowly)."""
    import numpy as np
    import jax.numpy as jnp
    inner = getattr(aval, "inner_aval", aval)
    shape = (FILLINGS, *tuple(getattr(inner, "shape", ())))
    try:
        dtype = jnp.dtype(getattr(inner, "dtype", None))
    except TypeError:
        return np.zeros(shape, np.int32)  # a semaphore or another non-array type
    if jnp.issubdtype(dtype, jnp.floating):
        return rng.standard_normal(shape, dtype=np.float32).astype(dtype)
    if dtype == jnp.bool_:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    bits = rng.integers(0, 1 << 32, size=shape, dtype=np.uint64).astype(np.uint32)
    try:
        return bits.view(np.int32).astype(dtype) if jnp.issubdtype(dtype, jnp.signedinteger) else bits.astype(dtype)
    except (TypeError, ValueError):
        return np.zeros(shape, np.int32)


def _bytes(aval) -> int:
    """The bytes one value of `aval` (or of a ref's inner type) holds; 0 for a semaphore and the like
    (tpu_estimate._aval_bytes fails on a semaphore's type)."""
    inner = getattr(aval, "inner_aval", aval)
    try:
        return int(np.prod(tuple(getattr(inner, "shape", ())), dtype=np.int64)) * np.dtype(inner.dtype).itemsize
    except (TypeError, AttributeError):
        return 0


class _Run:
    """One run of a kernel: an interpreter of its jaxpr over jax values (traced under jit), refs
    held as arrays and updated by jax's own state-discharge rules, that records every value."""

    def __init__(self, filling, positions, grid: tuple, decisions: frozenset = frozenset()):
        import jax
        self.jax = jax
        self.filling = filling  # which filling this run is (a traced integer under vmap)
        self.counter = itertools.count(1)
        self.positions = positions
        self.grid = grid
        self.recorded = {}  # id(var) -> its values (one per trip of an unrolled loop around it)
        # ids of decisions' results whose outcome (which way they went, not their value) is
        # recorded instead, under the same id
        self.decisions = decisions
        self.failed = []  # the operations it could not run

    def fresh(self, aval):
        """A value of `aval`'s shape and type that differs between fillings (an operation the probe
        cannot run, a scoped buffer): not random, but never the same in two fillings, so what is
        computed from it stays data."""
        jnp = self.jax.numpy
        inner = getattr(aval, "inner_aval", aval)
        shape, dtype = tuple(getattr(inner, "shape", ())), getattr(inner, "dtype", None)
        try:
            dtype = jnp.dtype(dtype)
        except TypeError:
            return jnp.zeros(shape, jnp.int32)  # a semaphore or another non-array type
        pattern = (self.filling + 1) * 7919 + next(self.counter) * 104729
        if shape:
            pattern = pattern + self.jax.lax.broadcasted_iota(jnp.int32, shape, len(shape) - 1)
        value = jnp.broadcast_to(pattern, shape)
        return (value & 1).astype(jnp.bool_) if dtype == jnp.bool_ else value.astype(dtype)

    def run(self, jaxpr, consts, args) -> dict:
        """Runs `jaxpr` on `consts` and `args`; returns its environment (id(var) -> value), which
        holds the final contents of every ref it was given."""
        env = {}
        for var, value in (*zip(jaxpr.constvars, consts), *zip(jaxpr.invars, args)):
            env[id(var)] = value

        def read(var):
            if type(var).__name__ == "Literal":
                return var.val
            return env[id(var)] if id(var) in env else self.fresh(var.aval)

        for eqn in jaxpr.eqns:
            invals = [read(v) for v in eqn.invars]
            try:
                outs = self.equation(eqn, invals, env)
            except Exception:  # an operation the probe cannot run: named (the probe fails closed)
                self.failed.append(eqn.primitive.name)
                outs = [self.fresh(v.aval) for v in eqn.outvars]
            for var, value in zip(eqn.outvars, outs):
                env[id(var)] = value
                if id(var) in self.decisions:
                    value = _outcome(self.jax, eqn, invals, value)
                    if value is None:
                        continue  # a decision whose outcome the probe does not read: not measured
                if not _is_ref(var) and hasattr(var.aval, "shape"):
                    self.recorded.setdefault(id(var), []).append(value)  # one per unrolled trip
        env["outs"] = [read(v) for v in jaxpr.outvars]
        return env

    def equation(self, eqn, invals: list, env: dict) -> list:
        from jax._src.state import discharge
        jnp = self.jax.numpy
        name, params = eqn.primitive.name, eqn.params
        if name == "program_id":
            axis = int(params["axis"])
            return [self.positions[axis] if axis < len(self.grid) else jnp.int32(0)]
        if name == "num_programs":
            axis = int(params["axis"])
            return [jnp.int32(self.grid[axis] if axis < len(self.grid) else 1)]
        refs = [k for k, v in enumerate(eqn.invars) if _is_ref(v)]
        if name == "cond":
            return self.cond(eqn, invals, env, refs)
        if name == "run_scoped":
            return self.run_scoped(eqn, invals, env)
        body = _called(eqn)
        if body is not None:  # a call (jit, custom_jvp, remat): run inside, so its values are recorded
            result = self.run(getattr(body, "jaxpr", body), list(getattr(body, "consts", ())), invals)
            for k in refs:
                env[id(eqn.invars[k])] = result[id(getattr(body, "jaxpr", body).invars[k])]
            return list(result["outs"])
        if name == "scan" and _unrolled(params):
            return self.unrolled_scan(eqn, invals, env, refs)  # every trip is recorded
        if name in ("while", "scan"):
            self.one_trip(eqn, invals)
        if name == "while":
            return self.bounded_while(eqn, invals, env, refs)
        if name == "scan":
            return self.bounded_scan(eqn, invals, env, refs)
        if refs:
            in_avals = [v.aval for v in eqn.invars]
            out_avals = [v.aval for v in eqn.outvars]
            if eqn.primitive in discharge._discharge_rules:
                new, outs = discharge._discharge_rules[eqn.primitive](in_avals, out_avals, *invals, **params)
            else:
                rule = discharge._partial_discharge_rules[eqn.primitive]
                should = [_is_ref(v) for v in eqn.invars]
                new, outs = rule(should, in_avals, out_avals, *invals, **params)
            for k, value in enumerate(new):
                if value is not None and k in refs:
                    env[id(eqn.invars[k])] = value
            return list(outs) if isinstance(outs, (tuple, list)) else [outs]
        with eqn.ctx.manager:
            outs = eqn.primitive.bind(*invals, **eqn.primitive.get_bind_params(params))
        return list(outs) if eqn.primitive.multiple_results else [outs]

    def cond(self, eqn, invals, env, refs) -> list:
        """Every branch is run (its values recorded); the results and the refs are the taken one's."""
        jnp = self.jax.numpy
        index, operands = invals[0], invals[1:]
        branches = eqn.params["branches"]
        index = jnp.clip(jnp.asarray(index).astype(jnp.int32), 0, len(branches) - 1)
        runs = [self.run(b.jaxpr, b.consts, operands) for b in branches]

        def pick(values):
            chosen = values[0]
            for b, value in enumerate(values[1:], start=1):
                chosen = jnp.where(index == b, value, chosen)
            return chosen

        for k in refs:
            inner = [r[id(branches[b].jaxpr.invars[k - 1])] for b, r in enumerate(runs)]
            env[id(eqn.invars[k])] = pick(inner)
        return [pick([r["outs"][j] for r in runs]) for j in range(len(eqn.outvars))]

    def run_scoped(self, eqn, invals, env) -> list:
        """The body closes over the operands (its constvars) and gets new buffers, filled at random."""
        body = eqn.params["jaxpr"]
        scoped = [self.fresh(v.aval) for v in body.invars]
        result = self.run(body, invals, scoped)
        for var, outer in zip(body.constvars, eqn.invars):
            if _is_ref(outer):
                env[id(outer)] = result[id(var)]
        return list(result["outs"])

    def quiet(self, jaxpr, consts, args) -> dict:
        """`run`, keeping none of its values (they are a loop's trace, not the kernel's)."""
        recorded, self.recorded = self.recorded, {}
        try:
            return self.run(jaxpr, consts, args)
        finally:
            self.recorded = recorded

    def unrolled_scan(self, eqn, invals, env, refs) -> list:
        """A scan the compiler unrolls: each trip is code of its own, where the trip's number is a
        constant the compiler folds, so every trip's values are recorded (a value that is data at
        trip 0 and `where(t == 0, x, 7) - 7` = 0 at trip 1 is a constant there)."""
        jnp = self.jax.numpy
        params = eqn.params
        nc, nk, length = params["num_consts"], params["num_carry"], int(params["length"])
        body = params["jaxpr"]
        consts, carry, xs = list(invals[:nc]), list(invals[nc:nc + nk]), list(invals[nc + nk:])
        ys = []
        order = range(length - 1, -1, -1) if params.get("reverse", False) else range(length)
        for t in order:
            result = self.run(body.jaxpr, body.consts, consts + carry + [x[t] for x in xs])
            for k in refs:
                if k < nc:
                    consts[k] = result[id(body.jaxpr.invars[k])]
            outs = result["outs"]
            carry = [jnp.asarray(o, dtype=jnp.asarray(v).dtype) for o, v in zip(outs[:nk], carry)]
            ys.append(outs[nk:])
        if params.get("reverse", False):
            ys = ys[::-1]
        for k in refs:
            if k < nc:
                env[id(eqn.invars[k])] = consts[k]
        stacked = [jnp.stack([y[j] for y in ys]) if ys else self.fresh(v.aval)
                   for j, v in enumerate(eqn.outvars[nk:])]
        return carry + stacked

    def bounded_scan(self, eqn, invals, env, refs) -> list:
        """A scan run as jax would, but for at most MAX_TRIPS trips (the stacked results past them
        keep a filling that differs between runs: data); refs among its consts are carried."""
        jax, jnp = self.jax, self.jax.numpy
        params = eqn.params
        nc, nk, length = params["num_consts"], params["num_carry"], int(params["length"])
        body = params["jaxpr"]
        held = [k for k in refs if k < nc]
        xs = list(invals[nc + nk:])

        def step(i, state):
            values, ref_values, ys = state
            at = length - 1 - i if params.get("reverse", False) else i
            consts = list(invals[:nc])
            for k, value in zip(held, ref_values):
                consts[k] = value
            slices = [jax.lax.dynamic_index_in_dim(x, at, 0, keepdims=False) for x in xs]
            result = self.quiet(body.jaxpr, body.consts, consts + list(values) + slices)
            new_refs = [result.get(id(body.jaxpr.invars[k]), old) for k, old in zip(held, ref_values)]
            outs = result["outs"]
            values = [jnp.asarray(o, dtype=jnp.asarray(v).dtype) for o, v in zip(outs[:nk], values)]
            ys = [jax.lax.dynamic_update_index_in_dim(y, jnp.asarray(o, dtype=y.dtype), at, 0)
                  for y, o in zip(ys, outs[nk:])]
            return values, new_refs, ys

        start = ([jnp.asarray(v) for v in invals[nc:nc + nk]], [invals[k] for k in held],
                 [self.fresh(v.aval) for v in eqn.outvars[nk:]])
        values, ref_values, ys = jax.lax.fori_loop(0, min(length, MAX_TRIPS), step, start)
        for k, value in zip(held, ref_values):
            env[id(eqn.invars[k])] = value
        return list(values) + list(ys)

    def bounded_while(self, eqn, invals, env, refs) -> list:
        """A while loop run as jax would, but for at most MAX_TRIPS trips; the refs it is given are
        carried through the trips (their contents are the loop's state too)."""
        jax, jnp = self.jax, self.jax.numpy
        params = eqn.params
        cn, bn = params["cond_nconsts"], params["body_nconsts"]
        cond, body = params["cond_jaxpr"], params["body_jaxpr"]
        held = [k for k in refs if k < cn + bn]  # refs among the consts: loop state
        carry = list(invals[cn + bn:])

        def consts_with(ref_values):
            values = list(invals[:cn + bn])
            for k, value in zip(held, ref_values):
                values[k] = value
            return values

        def keep_going(state):
            trips, values, ref_values = state
            consts = consts_with(ref_values)
            return (trips < MAX_TRIPS) & jnp.asarray(self.quiet(cond.jaxpr, cond.consts, consts[:cn] + list(values))["outs"][0])

        def step(state):
            trips, values, ref_values = state
            consts = consts_with(ref_values)
            result = self.quiet(body.jaxpr, body.consts, consts[cn:cn + bn] + list(values))
            new_refs = []
            for k, old in zip(held, ref_values):
                var = cond.jaxpr.invars[k] if k < cn else body.jaxpr.invars[k - cn]
                new_refs.append(result.get(id(var), old) if k >= cn else old)
            outs = [jnp.asarray(o, dtype=jnp.asarray(v).dtype) for o, v in zip(result["outs"], values)]
            return trips + 1, outs, new_refs

        start = (jnp.int32(0), [jnp.asarray(v) for v in carry], [invals[k] for k in held])
        _, values, ref_values = jax.lax.while_loop(keep_going, step, start)
        for k, value in zip(held, ref_values):
            env[id(eqn.invars[k])] = value
        return list(values)

    def one_trip(self, eqn, invals) -> None:
        """A loop's body (and a while loop's condition), run for its values only: a while loop's on
        its first carry, a scan's at its first two trips (a value the same under every filling at
        both is recorded as one); what the loop computes is left to jax's own rules."""
        params = eqn.params
        if eqn.primitive.name == "while":
            cn, bn = params["cond_nconsts"], params["body_nconsts"]
            carry = invals[cn + bn:]
            self.run(params["cond_jaxpr"].jaxpr, params["cond_jaxpr"].consts, invals[:cn] + carry)
            self.run(params["body_jaxpr"].jaxpr, params["body_jaxpr"].consts, invals[cn:cn + bn] + carry)
            return
        length = int(params.get("length", 0))
        if length < 1:
            return
        nc, nk = params["num_consts"], params["num_carry"]
        fixed = nc + nk
        body = params["jaxpr"]
        jnp = self.jax.numpy
        marks = {k: len(v) for k, v in self.recorded.items()}
        first = self.run(body.jaxpr, body.consts, invals[:fixed] + [x[0] for x in invals[fixed:]])
        if length < 2:
            return
        # And the second trip, on what the first left (its carries, its refs): a value the same under
        # every filling at the first trip only (a scratch accumulator just zeroed before the loop) is
        # data at the second; one is a constant only if it is the same at both (round 11's honest K
        # loop accumulating into a scratch ref was refused).
        consts = [first.get(id(v), old) if _is_ref(v) else old for v, old in zip(body.jaxpr.invars[:nc], invals[:nc])]
        carry = [jnp.asarray(o, dtype=jnp.asarray(v).dtype) for o, v in zip(first["outs"][:nk], invals[nc:fixed])]
        self.run(body.jaxpr, body.consts, consts + carry + [x[1] for x in invals[fixed:]])
        for key, values in self.recorded.items():
            start = marks.get(key, 0)
            if len(values) == start + 2 and jnp.shape(values[-1]) == jnp.shape(values[-2]):
                values[start:] = [jnp.stack([jnp.asarray(values[-2]), jnp.asarray(values[-1])])]


def _unrolled(params) -> bool:
    """Whether a scan is unrolled whole by the compiler (each trip its own code), and short enough
    for the probe to record every trip."""
    unroll, length = params.get("unroll", 1), int(params["length"])
    return (unroll is True or isinstance(unroll, int) and unroll >= length) and length <= MAX_TRIPS


def _called(eqn):
    """The body of a call-like equation (pjit, closed_call, custom_jvp/vjp, remat) that takes the
    equation's operands as they are, or None."""
    for key in ("jaxpr", "call_jaxpr", "fun_jaxpr"):
        body = eqn.params.get(key)
        inner = getattr(body, "jaxpr", body)
        if body is not None and hasattr(inner, "eqns") and len(inner.invars) == len(eqn.invars) and \
                eqn.primitive.name not in ("scan", "while", "cond", "run_scoped", "pallas_call"):
            return body
    return None


def _outcome(jax, eqn, invals, result):
    """Which way a decision went, element by element, as decision_coverage counts its outcomes (a
    comparison's truth, the order of a max's operands, a select's case, a quotient's sign); None
    for an operation that decides nothing the probe reads."""
    jnp = jax.numpy
    name = eqn.primitive.name

    def order(a, b):
        return (a > b).astype(jnp.int8) - (a < b).astype(jnp.int8)

    if name == "select_n":
        return jnp.asarray(invals[0]).astype(jnp.int32)
    if jnp.asarray(result).dtype == jnp.bool_:
        return result  # a comparison, a logical operation, a conversion to truth
    if name in ("max", "min"):
        return order(*invals)
    if name == "clamp":
        low, x, high = invals
        return order(x, low) + order(x, high)
    if name in ("rem", "div"):
        a, b = invals
        quotient = jax.lax.div(a, jnp.where(b == 0, 1, b)) if jnp.issubdtype(a.dtype, jnp.integer) else \
            jnp.trunc(a / b)
        return order(quotient, jnp.zeros_like(quotient))
    if name in ("sign", "abs"):
        return order(invals[0], jnp.zeros_like(invals[0]))
    if name in ("floor", "ceil", "round", "shift_left", "shift_right_arithmetic", "shift_right_logical",
                "and", "or", "xor", "not"):
        return order(result, jnp.zeros_like(result))
    return None


def _kernel_runs(eqn, decisions: frozenset = frozenset()):
    """A function of (the kernel operands' fillings, which filling, grid step) that runs one
    pallas_call's index maps and body and returns {id(var): value} of what they computed (for the
    ids in `decisions`, which way they decided); the kernel's grid; and its ref variables (what
    the fillings fill)."""
    mapping = eqn.params.get("grid_mapping")
    grid = tuple(int(g) for g in getattr(mapping, "grid", ()) or ())
    body = eqn.params["jaxpr"]
    inner = getattr(body, "jaxpr", body)
    prefetch = int(getattr(mapping, "num_index_operands", 0) or 0)
    failed = []  # operations the runs could not run

    def one(refs, filling, positions):
        run = _Run(filling, positions, grid, decisions)
        refs = list(refs)
        for block in getattr(mapping, "block_mappings", ()) or ():
            index_map = getattr(block, "index_map_jaxpr", None)
            if index_map is None:
                continue
            args = [positions[a] for a in range(min(len(grid), len(index_map.jaxpr.invars)))]
            args += refs[:prefetch][:len(index_map.jaxpr.invars) - len(args)]
            args += [run.fresh(v.aval) for v in index_map.jaxpr.invars[len(args):]]
            run.run(index_map.jaxpr, index_map.consts, args)
        run.run(inner, list(getattr(body, "consts", ())), refs)
        failed.extend(run.failed)
        return run.recorded

    return one, grid, inner.invars, failed


def grid_steps(closed_jaxpr) -> int:
    """The grid steps of every kernel of the program, in all."""
    import math
    total = 0
    for eqn in _pallas_calls(closed_jaxpr.jaxpr):
        grid = getattr(eqn.params.get("grid_mapping"), "grid", ()) or ()
        total += math.prod(int(g) for g in grid if isinstance(g, (int, np.integer))) if grid else 1
    return total


def positions(closed_jaxpr, by_id: dict) -> dict:
    """`by_id` (id(var) -> anything) keyed by the variables' positions in `variables(...)`."""
    return {k: by_id[id(v)] for k, v in enumerate(variables(closed_jaxpr.jaxpr)) if id(v) in by_id}


def invariant(closed_jaxpr, wanted: set[int]) -> tuple[set[int], list[str]]:
    """Of the variables at positions `wanted` (in `variables(closed_jaxpr.jaxpr)`), those some
    kernel of the program computes the same under every random filling of its data at its first and
    last grid steps; and what the probe could not run (where it names anything, what it measured
    is not to be relied on: the judge fails closed). Only what the wanted values are computed from
    is compiled (the rest is dead code to XLA)."""
    same, _, failures = _under_fillings(closed_jaxpr, wanted, outcomes=False)
    return same, failures


def decided_by_data(closed_jaxpr, wanted: set[int]) -> set[int]:
    """Of the decisions whose results are at positions `wanted`, those whose outcome the data
    changes: at the first or the last grid step, some element goes one way under one random filling
    and another way under another. Such a decision is made at run time wherever the program runs,
    since the compiler folds a decision only where it goes one way at every step and for every
    data. A decision the probe could not run, or whose outcome it does not read, is not among them."""
    from . import tpu_estimate
    for eqn in _pallas_calls(closed_jaxpr.jaxpr):
        body = eqn.params["jaxpr"]
        if _probe_work(getattr(body, "jaxpr", body)) > MAX_OUTCOME_WORK:
            return set()
    same, measured, failures = _under_fillings(closed_jaxpr, wanted, outcomes=True)
    return set() if failures else measured - same


def _probe_work(jaxpr) -> float:
    """The work of one run of a kernel as the probe runs it (tpu_estimate's proxy): a loop's body
    times the trips the probe takes, a scan's length or MAX_TRIPS, whichever is fewer, and a while
    loop's MAX_TRIPS (its count is not known). Pricing the scan's whole length refused an honest
    flash kernel whose 32-trip key loop the probe runs for 16 (8.1M units at the full size against
    4.8M run); pricing a while loop's body once let 16 trips of it run past the bound."""
    from . import tpu_estimate
    total = 0.0
    for eqn in jaxpr.eqns:
        total += tpu_estimate._work(eqn)
        inner = sum(_probe_work(sub) for sub in tpu_estimate._sub(eqn))
        name = eqn.primitive.name
        if name == "scan":
            inner *= min(int(eqn.params.get("length", 1)), MAX_TRIPS)
        elif name == "while":
            inner *= MAX_TRIPS
        total += inner
    return total


def _under_fillings(closed_jaxpr, wanted: set[int], outcomes: bool) -> tuple[set[int], set[int], list[str]]:
    """(the positions in `wanted` whose values, or with `outcomes` whose decisions' outcomes, are
    the same under every filling at both probed steps; those measured at all; what could not run)."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    jaxpr = closed_jaxpr.jaxpr
    position = {id(v): k for k, v in enumerate(variables(jaxpr)) if k in wanted}
    same, measured, failures = set(), set(), []
    rng = np.random.default_rng(20261206)  # seeded: a kernel gets the same verdict every time
    for eqn in _pallas_calls(jaxpr):
        one, grid, refs, failed = _kernel_runs(eqn, frozenset(position) if outcomes else frozenset())
        order = []

        def compare(fillings, step):
            # The fillings one after another in one program (lax.map: the kernel traced once, and no
            # operation needs a batching rule, which some Pallas ones lack); the grid step is a
            # number, so the kernel's indexing stays slices.
            runs = jax.lax.map(lambda args: one(args[0], args[1], step),
                               (fillings, jnp.arange(FILLINGS, dtype=jnp.int32)))
            order[:] = [k for k in runs if k in position]
            def same(values):  # the same under every filling (NaN is NaN)
                return jnp.all((values == values[:1]) | ((values != values) & (values[:1] != values[:1])))

            # A value is a constant where some trip of an unrolled loop gives it the same under every
            # filling: that trip is code of its own, which the compiler folds.
            flags = [jnp.any(jnp.stack([same(v) for v in runs[k]])) for k in order]
            return jnp.stack(flags) if flags else jnp.zeros((0,), jnp.bool_)

        steps = [np.zeros((len(grid),), np.int32), np.asarray([max(g - 1, 0) for g in grid], np.int32)]
        held = FILLINGS * sum(_bytes(v.aval) for v in refs)
        if held > MAX_FILLING_BYTES:
            failures.append(f"the kernel (its refs' {FILLINGS} fillings would hold {held >> 20} MiB, more than "
                            f"{MAX_FILLING_BYTES >> 20})")
            continue
        try:
            fillings = [_filling(v.aval, rng) for v in refs]
            lowered = jax.jit(compare).lower(fillings, steps[0])
            if not order:
                continue  # nothing wanted in this kernel
            try:  # the probe runs once: a quick compile beats a fast program
                compiled = lowered.compile(compiler_options={"xla_backend_optimization_level": 0})
            except Exception:
                compiled = lowered.compile()
            # The same under every filling at both steps. A grid position is a run-time value, so the
            # compiler folds only what is constant at every step; a value constant at one step only
            # (an accumulator just initialized, at the first) is data.
            flags = np.asarray(compiled(fillings, steps[0])) & np.asarray(compiled(fillings, steps[1]))
        except Exception as error:  # the kernel could not be run
            failures.append(f"the kernel ({type(error).__name__}: {str(error)[:120]})")
            continue
        if failed:
            failures.append(", ".join(sorted(set(failed))))
        same |= {position[k] for k, flag in zip(order, flags) if bool(flag)}
        measured |= {position[k] for k in order}
    return same, measured, failures


# Operations whose result holds the same random values as their operand (or a part of them): a
# load of a random block moved by one of them needs no probe to be data.
_MOVES = {"broadcast_in_dim", "reshape", "squeeze", "expand_dims", "transpose", "copy", "copy_p", "slice",
          "dynamic_slice", "bitcast_convert_type", "neg", "rev"}


def _widening(eqn) -> bool:
    """A conversion that keeps every value apart (a float to a float at least as wide, an integer
    to an integer at least as wide)."""
    import numpy as np
    source, target = eqn.invars[0].aval.dtype, eqn.outvars[0].aval.dtype
    try:
        a, b = np.dtype(source), np.dtype(target)
    except TypeError:
        return False
    floats = a.kind == "f" and b.kind == "f" or str(a) == "bfloat16" and b.kind == "f"
    integers = a.kind in "iu" and b.kind in "iu" and (a.kind == b.kind or b.itemsize > a.itemsize)
    return (floats or integers) and b.itemsize >= a.itemsize


def evident(closed_jaxpr) -> set[int]:
    """Positions (in `variables(...)`) of the values that are evidently data, so the probe need not
    run for them: a load of a kernel operand's block that nothing in the kernel writes (random under
    the probe's fillings), moved or widened. Anything else that reaches a ref is written (fail
    closed)."""
    found = set()

    def kernel(eqn):
        mapping = eqn.params.get("grid_mapping")
        body = eqn.params["jaxpr"]
        inner = getattr(body, "jaxpr", body)
        inputs = int(getattr(mapping, "num_index_operands", 0) or 0) + int(getattr(mapping, "num_inputs", 0) or 0)
        written = set()
        _writes(inner, {id(v): id(v) for v in inner.invars}, written)
        readable = {id(v) for v in inner.invars[:inputs] if id(v) not in written}
        _loads(inner, {id(v): id(v) for v in inner.invars}, readable, found)

    for eqn in _pallas_calls(closed_jaxpr.jaxpr):
        kernel(eqn)
    return {k for k, v in enumerate(variables(closed_jaxpr.jaxpr)) if id(v) in found}


def _inner_refs(eqn, names: dict):
    """(body, {id(body var): the outer ref it is}) for each body an equation passes refs into; a
    body whose refs cannot be matched to the equation's operands gets None (its refs: unknown)."""
    name, params = eqn.primitive.name, eqn.params
    outer = [names.get(id(v)) if _is_ref(v) else None for v in eqn.invars]
    if name == "cond":
        return [(b.jaxpr, dict(zip(map(id, b.jaxpr.invars), outer[1:]))) for b in params["branches"]]
    if name == "run_scoped":
        return [(params["jaxpr"], dict(zip(map(id, params["jaxpr"].constvars), outer)))]
    if name == "while":
        cn, bn = params["cond_nconsts"], params["body_nconsts"]
        return [(params["cond_jaxpr"].jaxpr, dict(zip(map(id, params["cond_jaxpr"].jaxpr.invars), outer[:cn]))),
                (params["body_jaxpr"].jaxpr, dict(zip(map(id, params["body_jaxpr"].jaxpr.invars), outer[cn:cn + bn])))]
    if name == "scan":
        return [(params["jaxpr"].jaxpr, dict(zip(map(id, params["jaxpr"].jaxpr.invars), outer)))]
    bodies = []
    for inner in _sub_jaxprs(eqn):
        same = len(inner.invars) == len(eqn.invars)
        bodies.append((inner, dict(zip(map(id, inner.invars), outer)) if same else None))
    return bodies


def _writes(jaxpr, names: dict, written: set) -> None:
    """Adds to `written` every outer ref some equation may write (all but a plain load)."""
    for eqn in jaxpr.eqns:
        refs = [names.get(id(v), "unknown") for v in eqn.invars if _is_ref(v)]
        bodies = _inner_refs(eqn, names) if refs else []
        if not bodies:
            if eqn.primitive.name != "get":
                written.update(refs)
            continue
        for inner, inner_names in bodies:
            if inner_names is None:
                written.update(refs)
            else:
                _writes(inner, inner_names, written)


def _loads(jaxpr, names: dict, readable: set, found: set) -> None:
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name == "get" and names.get(id(eqn.invars[0])) in readable:
            found.update(id(v) for v in eqn.outvars)
        elif eqn.invars and type(eqn.invars[0]).__name__ != "Literal" and id(eqn.invars[0]) in found and \
                (name in _MOVES or name == "convert_element_type" and _widening(eqn)):
            found.update(id(v) for v in eqn.outvars)
        for inner, inner_names in (_inner_refs(eqn, names) if any(_is_ref(v) for v in eqn.invars) else []):
            if inner_names is not None:
                _loads(inner, inner_names, readable, found)


def _pallas_calls(jaxpr):
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "pallas_call":
            yield eqn
        else:
            for inner in _sub_jaxprs(eqn):
                yield from _pallas_calls(inner)


def ids(closed_jaxpr, positions: set[int]) -> set[int]:
    """The ids of the variables at `positions` of `variables(...)` in another program of the template."""
    listed = variables(closed_jaxpr.jaxpr)
    return {id(listed[k]) for k in positions if k < len(listed)}
