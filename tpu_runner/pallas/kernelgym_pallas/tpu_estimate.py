"""An estimated TPU device time from the TPU compiler's own figures, without a TPU.

A TPU core is statically scheduled: libtpu knows, when it compiles, how many cycles each op
takes. With `--xla_jf_dump_static_llo_profile_to=DIR` it writes, per compiled HLO op,
`<op>_static_llo_profile.textproto` holding `hlo_op_estimate { hlo_op_name, estimated_cycles }`
(a Mosaic kernel's figure includes its grid's trip count). XLA's cost model
(`compiled.cost_analysis()["optimal_seconds"]`) sees the XLA ops, loops included, and nothing
inside a Mosaic kernel. This module combines the two:

    seconds = sum over Mosaic kernels of max(cycles / CLOCK_HZ, operand+result bytes / HBM_BYTES_PER_S)
              + max(XLA's optimal_seconds, the XLA ops' static cycles / CLOCK_HZ)
    (the second line is the XLA ops around the kernels, and the reference's whole time)

Usage (the flags must be in the environment before jax/libtpu is imported):

    os.environ.update(bounded_log_environment(scratch))
    os.environ["LIBTPU_INIT_ARGS"] = libtpu_dump_args(dump_dir)
    import jax
    est = estimate(fn, specs, target, dump_dir)          # compiles; or compiled=... to reuse one
    est.seconds, est.trusted, est.reasons, est.kernels

What the static profile cannot see makes the estimate untrusted (`trusted=False`, with reasons),
and the reward then pays nothing for speed:
  * a loop inside a kernel with a trip count known only at run time (`while`): counted once;
  * a `cond`/`pl.when` inside a kernel whose predicate reads data: the profile counts the cheap
    path (measured: heavy work under a data-dependent `pl.when` added nothing);
  * work under grid-index `pl.when`s that is large against the unconditional work of a step,
    weighted by the share of grid steps that run it (the same blind spot, used on purpose);
  * a grid whose size is known only at run time;
  * a Mosaic kernel inside an XLA loop or branch (its cycles are counted once);
  * an XLA `while`/`cond` around the kernels (XLA's model cannot know the trip count or branch);
  * no static profile, or no XLA figure where XLA ops exist.

Clock and bandwidth: the conversions put the Mosaic kernels in XLA's model's units, so that a
kernel scheduled like XLA's own op gets the same time as XLA's figure for it (the reference is
valued by XLA's model). Each was measured here (jax 0.10.2, libtpu 0.0.42.1, deviceless):
  * CLOCK_HZ: XLA's own `jnp.dot` of two 2048x2048 bf16 matrices: v5e 138,056 cycles in the
    static profile, optimal_seconds 132.70 us -> 1.040e9 cycles/s; v6e 48,842 cycles, 39.20 us
    -> 1.246e9 cycles/s. (The chips' nominal clocks are higher: v5e 197e12 FLOP/s /
    (4 MXUs x 128 x 128 x 2) = 1.50 GHz (Cloud TPU v5e docs); v6e 918e12 / 524,288 FLOP a cycle =
    1.75 GHz, the FLOP a cycle being the smallest power of two the compiler's 48,288-cycle Pallas
    matmul allows. XLA's model is ~1.4x slower than the schedule at the nominal clock; using the
    nominal clock would pay a Pallas kernel 1.4x for matching XLA.)
  * HBM_BYTES_PER_S: XLA's model for `a + 1` on a 4096x4096 float32 array (134,217,728 bytes):
    v5e 181.95 us -> 737.7e9 B/s; v6e 81.94 us -> 1638e9 B/s. The static profile of the same op
    gives 116,341 / 49,508 cycles, about 0.6x the HBM time: it does not wait for memory, hence the
    floor.
"""
from __future__ import annotations

import dataclasses
import os
import pathlib
import re
import shutil

CLOCK_HZ = {"v5e": 1.040e9, "v6e": 1.246e9}
NOMINAL_CLOCK_HZ = {"v5e": 1.50e9, "v6e": 1.75e9}
HBM_BYTES_PER_S = {"v5e": 737.7e9, "v6e": 1638e9}

# Work under grid-index conditions, weighted by the share of grid steps that run it, beyond
# this fraction of the unconditional work makes the estimate untrusted.
CONDITIONAL_WORK_LIMIT = 0.25
# Grid points evaluated to find the share of steps a grid-index condition is true on.
GRID_POINTS_LIMIT = 1 << 17

METHOD = ("static LLO cycles of each Mosaic kernel / XLA-equivalent clock, floored by its operand and "
          "result bytes / HBM bandwidth, + max(XLA optimal_seconds, static LLO cycles / clock) for the XLA ops")

_PROFILE_SUFFIX = "_static_llo_profile.textproto"


def libtpu_dump_args(dump_dir) -> str:
    """LIBTPU_INIT_ARGS for the static profile: one small text file per compiled HLO op (a few
    hundred bytes each). Only this one dump: the per-pass LLO text costs ~130 MB a program."""
    return f"--xla_jf_dump_static_llo_profile_to={dump_dir}"


def bounded_log_environment(scratch) -> dict[str, str]:
    """TPU_* variables that keep libtpu's logs off the disk: errors only, to stderr (which the
    runner bounds), and the log folder in `scratch` rather than tpu_logs in the temp folder
    (a deviceless compile has written 74 GB there)."""
    logs = pathlib.Path(scratch) / "tpu_logs"
    logs.mkdir(parents=True, exist_ok=True)
    return {"TPU_STDERR_LOG_LEVEL": "3", "TPU_MIN_LOG_LEVEL": "3", "TPU_VMODULE": "", "TF_CPP_MIN_LOG_LEVEL": "3",
            "TPU_LOG_DIR": str(logs)}


def apply_environment(scratch, existing_args: str = "") -> pathlib.Path:
    """Sets the log bounds and the dump flag in os.environ (before jax is imported); returns the
    dump folder."""
    scratch = pathlib.Path(scratch)
    dump_dir = scratch / "llo_profile"
    dump_dir.mkdir(parents=True, exist_ok=True)
    for key, value in bounded_log_environment(scratch).items():
        os.environ.setdefault(key, value)
    args = os.environ.get("LIBTPU_INIT_ARGS", existing_args)
    os.environ["LIBTPU_INIT_ARGS"] = (args + " " + libtpu_dump_args(dump_dir)).strip()
    return dump_dir


def dump_enabled(dump_dir) -> bool:
    return libtpu_dump_args(dump_dir) in os.environ.get("LIBTPU_INIT_ARGS", "")


# ---- the profile files ------------------------------------------------------------------------

_ESTIMATE = re.compile(r'hlo_op_estimate\s*\{[^{}]*?hlo_op_name:\s*"([^"]*)"[^{}]*?estimated_cycles:\s*(\d+)', re.S)


def parse_profile(text: str) -> dict[str, int]:
    """{hlo_op_name: estimated_cycles} from one static LLO profile textproto."""
    out: dict[str, int] = {}
    for name, cycles in _ESTIMATE.findall(text):
        out[name] = out.get(name, 0) + int(cycles)
    return out


def read_profiles(dump_dir) -> dict[str, int]:
    out: dict[str, int] = {}
    for path in sorted(pathlib.Path(dump_dir).glob("*" + _PROFILE_SUFFIX)):
        for name, cycles in parse_profile(path.read_text(errors="replace")).items():
            out[name] = out.get(name, 0) + cycles
    return out


def clear_dump(dump_dir) -> None:
    """Empties the folder: libtpu names the files after the op only, so one compile's files
    overwrite another's (the judge compiles one program at a time)."""
    path = pathlib.Path(dump_dir)
    if path.exists():
        for child in path.iterdir():
            if child.is_dir():
                shutil.rmtree(child, ignore_errors=True)
            else:
                child.unlink(missing_ok=True)
    path.mkdir(parents=True, exist_ok=True)


# ---- the optimized HLO: which ops are Mosaic kernels, where they are, their bytes -------------

_DTYPE_BYTES = {"pred": 1, "s4": 0.5, "u4": 0.5, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2,
                "s32": 4, "u32": 4, "f32": 4, "s64": 8, "u64": 8, "f64": 8, "c64": 8, "c128": 16}
_ARRAY = re.compile(r"\b(pred|s4|u4|s8|u8|s16|u16|f16|bf16|s32|u32|f32|s64|u64|f64|c64|c128|f8\w*)\[([\d,]*)\]")
_INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*)$")
_COMPUTATION = re.compile(r"^\s*(ENTRY\s+)?%?([\w.\-]+)\s*\(.*\)\s*->\s*.*\{\s*$")


def shape_bytes(shape: str) -> float:
    total = 0.0
    for dtype, dims in _ARRAY.findall(shape):
        count = 1
        for d in filter(None, dims.split(",")):
            count *= int(d)
        total += count * _DTYPE_BYTES.get(dtype, 1)
    return total


def _shape_of(rest: str) -> str:
    """The result shape at the start of an instruction's right-hand side (a tuple in parentheses
    or one array type)."""
    if rest.startswith("("):
        depth = 0
        for i, ch in enumerate(rest):
            depth += ch == "("
            depth -= ch == ")"
            if depth == 0:
                return rest[:i + 1]
    return rest.split(" ", 1)[0]


@dataclasses.dataclass
class HloKernel:
    name: str           # the custom call's instruction name (the profile's hlo_op_name)
    computation: str    # the HLO computation it is in
    in_entry: bool
    bytes: float        # operands + results


def mosaic_kernels(hlo_text: str) -> tuple[list[HloKernel], list[str]]:
    """The Mosaic custom calls of an optimized HLO module, and the opcodes of control flow in it."""
    shapes: dict[str, str] = {}
    kernels: list[tuple[str, str, bool, str, str]] = []
    control: list[str] = []
    computation, in_entry = "", False
    for line in hlo_text.splitlines():
        head = _COMPUTATION.match(line)
        if head and " = " not in line.split("(", 1)[0]:
            computation, in_entry = head.group(2), bool(head.group(1))
            continue
        match = _INSTRUCTION.match(line)
        if not match:
            continue
        name, rest = match.groups()
        shape = _shape_of(rest)
        shapes[name] = shape
        after = rest[len(shape):].lstrip()
        opcode = after.split("(", 1)[0].strip()
        if opcode in ("while", "conditional"):
            control.append(opcode)
        if opcode == "custom-call" and 'custom_call_target="tpu_custom_call"' in rest:
            operands = after.split("(", 1)[1].split(")", 1)[0] if "(" in after else ""
            kernels.append((name, computation, in_entry, shape, operands))
    out = []
    for name, comp, entry, shape, operands in kernels:
        total = shape_bytes(shape)
        for operand in operands.split(","):
            operand = operand.strip().lstrip("%")
            if operand in shapes:
                total += shape_bytes(shapes[operand])
            else:
                total += shape_bytes(operand)  # older text: the operand's type written inline
        out.append(HloKernel(name, comp, entry, total))
    return out, control


# ---- the traced program: what the static profile cannot count ----------------------------------

_READS = {"get", "load", "swap", "masked_load", "masked_swap", "addupdate"}
_GRID_INDEX = {"program_id", "num_programs"}


def _sub(eqn):
    for value in eqn.params.values():
        for item in value if isinstance(value, (tuple, list)) else (value,):
            if hasattr(item, "jaxpr") and hasattr(item, "consts"):
                yield item.jaxpr
            elif hasattr(item, "eqns"):
                yield item


def _elements(var) -> int:
    count = 1
    for d in getattr(getattr(var, "aval", None), "shape", ()) or ():
        count *= int(d)
    return count


def _work(eqn) -> float:
    """A rough count of vector work: output elements, a matmul's scaled by its contraction/128."""
    if eqn.primitive.name in _READS or eqn.primitive.name in ("cond", "scan", "while"):
        return 0.0
    out = sum(_elements(v) for v in eqn.outvars)
    if eqn.primitive.name == "dot_general":
        (contract, _), _ = eqn.params["dimension_numbers"]
        k = 1
        for d in contract:
            k *= int(eqn.invars[0].aval.shape[d])
        return out * max(1.0, k / 128)
    return float(out)


def _jaxpr_work(jaxpr) -> float:
    total = 0.0
    for eqn in jaxpr.eqns:
        total += _work(eqn)
        subs = list(_sub(eqn))
        if eqn.primitive.name == "cond":
            total += max((_jaxpr_work(s) for s in subs), default=0.0)
        elif eqn.primitive.name == "scan":
            total += int(eqn.params.get("length", 1)) * sum(_jaxpr_work(s) for s in subs)
        else:
            total += sum(_jaxpr_work(s) for s in subs)
    return total


def _is_ref(var) -> bool:
    return "Ref" in type(getattr(var, "aval", None)).__name__


class _GridEval:
    """Evaluates scalar grid-index expressions over every grid point (numpy), for the share of
    grid steps on which a `pl.when` runs. Unknown primitives make the value unknown (None)."""

    def __init__(self, grid):
        import numpy as np
        self.np = np
        self.grid = [int(g) for g in grid]
        self.points = 1
        for g in self.grid:
            self.points *= g
        self.index = np.indices(self.grid).reshape(len(self.grid), -1) if self.grid else np.zeros((0, 1), int)

    def value(self, eqn, args):
        np = self.np
        name = eqn.primitive.name
        if name == "program_id":
            return self.index[int(eqn.params["axis"])]
        if name == "num_programs":
            return np.full(max(self.points, 1), self.grid[int(eqn.params["axis"])])
        ops = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
               "ge": np.greater_equal, "and": np.logical_and, "or": np.logical_or, "add": np.add,
               "sub": np.subtract, "mul": np.multiply, "max": np.maximum, "min": np.minimum,
               "rem": np.remainder, "div": np.floor_divide}
        if any(a is None for a in args):
            return None
        if name in ops and len(args) == 2:
            return ops[name](args[0], args[1])
        if name == "not":
            return np.logical_not(args[0])
        if name == "convert_element_type":
            return args[0].astype(np.int64) if np.asarray(args[0]).dtype != bool else args[0]
        if name == "select_n" and len(args) >= 2:
            return np.choose(np.asarray(args[0]).astype(int), args[1:])
        return None


class KernelFacts:
    """What the trust rules found in one kernel's jaxpr."""

    def __init__(self, name: str, grid):
        self.name = name
        self.grid = grid
        self.reasons: list[str] = []
        self.unconditional = 0.0
        self.missed = 0.0  # conditional work x the share of grid steps that run it


def _analyse_kernel(name, jaxpr, grid, facts: KernelFacts) -> None:
    import numpy as np
    static_grid = all(isinstance(g, int) for g in grid)
    evaluator = _GridEval(grid) if static_grid and _points(grid) <= GRID_POINTS_LIMIT else None
    tainted: set = set(v for v in jaxpr.invars)
    values: dict = {}

    def literal(v):
        return hasattr(v, "val") and not hasattr(v, "count")

    def is_tainted(v):
        return (not literal(v)) and v in tainted

    def val(v):
        if literal(v):
            return np.asarray(v.val)
        return values.get(v)

    def walk(jx, share: float, under_cond: bool):
        for eqn in jx.eqns:
            prim = eqn.primitive.name
            ins_tainted = any(is_tainted(v) for v in eqn.invars) or any(_is_ref(v) for v in eqn.invars)
            if prim == "while":
                facts.reasons.append(f"kernel {name}: a loop with a trip count known only at run time (while_loop or "
                                     f"fori_loop with traced bounds): the static profile counts its body once")
            if prim == "cond":
                predicate = eqn.invars[0]
                branches = list(_sub(eqn))
                work = max((_jaxpr_work(b) for b in branches), default=0.0)
                if is_tainted(predicate) or _is_ref(predicate):
                    facts.reasons.append(f"kernel {name}: a branch (lax.cond / pl.when) on data read at run time: the "
                                         f"static profile counts one path")
                else:
                    frac = 1.0
                    if evaluator is not None and val(predicate) is not None:
                        index = np.asarray(val(predicate)).astype(int)
                        if index.ndim == 0:
                            index = np.full(max(evaluator.points, 1), int(index))
                        frac = float(np.mean(index != 0)) if len(branches) == 2 else 1.0
                    facts.missed += share * frac * work
                for b in branches:
                    walk(b, share, True)
                for v in eqn.outvars:
                    tainted.add(v)
                continue
            if prim == "scan":
                length = int(eqn.params.get("length", 1))
                before = facts.unconditional
                for b in _sub(eqn):
                    tainted.update(b.invars)
                    walk(b, share * length, under_cond)
                for v in eqn.outvars:
                    tainted.add(v)
                del before
                continue
            subs = list(_sub(eqn))
            if subs:
                for b in subs:
                    tainted.update(b.invars)
                    walk(b, share, under_cond)
                tainted.update(eqn.outvars)
                continue
            if not under_cond:
                facts.unconditional += share * _work(eqn)
            if prim in _READS or ins_tainted:
                tainted.update(eqn.outvars)
            elif evaluator is not None:
                out = evaluator.value(eqn, [val(v) for v in eqn.invars])
                if out is not None and len(eqn.outvars) == 1:
                    values[eqn.outvars[0]] = out

    walk(jaxpr, 1.0, False)


def _points(grid) -> int:
    n = 1
    for g in grid:
        n *= int(g)
    return n


def analyse_program(closed_jaxpr) -> tuple[list[KernelFacts], list[str]]:
    """Per pallas_call the trust rules' findings, and the program-level reasons."""
    kernels: list[KernelFacts] = []
    reasons: list[str] = []

    def walk(jaxpr, enclosing: tuple):
        for eqn in jaxpr.eqns:
            prim = eqn.primitive.name
            if prim == "pallas_call":
                mapping = eqn.params.get("grid_mapping")
                grid = tuple(getattr(mapping, "grid", ()) or ())
                name = str(eqn.params.get("name") or getattr(eqn.params.get("name_and_src_info"), "name", "kernel"))
                facts = KernelFacts(name, grid)
                if not all(isinstance(g, int) for g in grid):
                    facts.reasons.append(f"kernel {name}: a grid whose size is known only at run time {grid}: the "
                                         f"static profile cannot count its steps")
                if enclosing:
                    facts.reasons.append(f"kernel {name}: a pallas_call inside {'/'.join(enclosing)} of the program: "
                                         f"the static profile counts the kernel once")
                kernel_jaxpr = eqn.params["jaxpr"]
                _analyse_kernel(name, getattr(kernel_jaxpr, "jaxpr", kernel_jaxpr),
                                grid if all(isinstance(g, int) for g in grid) else (), facts)
                steps = _points(grid) if all(isinstance(g, int) for g in grid) else 1
                if facts.missed > CONDITIONAL_WORK_LIMIT * max(facts.unconditional, 1.0):
                    facts.reasons.append(
                        f"kernel {name}: work under pl.when/lax.cond is {facts.missed / max(facts.unconditional, 1.0):.2f}x "
                        f"the unconditional work of a grid step (weighted by the steps that run it): the static "
                        f"profile does not count it")
                del steps
                kernels.append(facts)
                continue
            if prim in ("while", "cond"):
                reasons.append(f"an XLA {'while loop' if prim == 'while' else 'branch (lax.cond)'} in the program: its "
                               f"trip count or branch is known only at run time")
            inner = enclosing + ((prim,) if prim in ("while", "cond", "scan") else ())
            for sub in _sub(eqn):
                walk(sub, inner)

    walk(closed_jaxpr.jaxpr, ())
    return kernels, reasons


# ---- the estimate -------------------------------------------------------------------------------

@dataclasses.dataclass
class KernelProfile:
    kernel: str
    hlo_op: str
    grid_steps: int
    estimated_cycles: int
    bundles_per_step: float | None
    bytes: float
    seconds: float
    bound: str              # "cycles" or "hbm"
    unit_share: dict | None = None
    critical_path_cycles: int | None = None

    def as_json(self) -> dict:
        return {"kernel": self.kernel, "grid_steps": self.grid_steps, "bundles_per_step": self.bundles_per_step,
                "estimated_cycles": self.estimated_cycles, "unit_share": self.unit_share,
                "critical_path_cycles": self.critical_path_cycles, "hbm_bytes": self.bytes, "bound": self.bound}


@dataclasses.dataclass
class Estimate:
    seconds: float
    mosaic_cycles: int
    mosaic_seconds: float
    xla_seconds: float      # max(xla_model_seconds, xla_llo_cycles / clock)
    xla_model_seconds: float
    xla_llo_cycles: int
    method: str
    trusted: bool
    reasons: list[str]
    kernels: list[KernelProfile]

    @property
    def microseconds(self) -> float:
        return self.seconds * 1e6


def estimate(fn=None, specs=None, target=None, dump_dir=None, *, compiled=None, closed_jaxpr=None) -> Estimate:
    """The estimated device time of `fn` at `specs` on `target` (a tpu_target.Target).

    compiled: a tpu_target.Compiled of fn done with the dump on and nothing compiled since (its
    profile files must still be in dump_dir); without it fn is compiled here, after clearing the
    folder. closed_jaxpr: the traced program (for the trust rules); without it fn is traced."""
    from . import tpu_target
    name = target.name
    if compiled is None:
        clear_dump(dump_dir)
        compiled = tpu_target.compile_for(target, fn, specs)
    if closed_jaxpr is None and fn is not None:
        import jax
        closed_jaxpr = jax.make_jaxpr(fn)(*[jax.ShapeDtypeStruct(tuple(s.shape), s.dtype) for s in specs])
    reasons: list[str] = []
    cycles = read_profiles(dump_dir) if dump_dir is not None else {}
    if not dump_enabled(dump_dir):
        reasons.append("the static LLO profile dump is not enabled in LIBTPU_INIT_ARGS")
    hlo = compiled.executable.as_text() or ""
    hlo_kernels, _ = mosaic_kernels(hlo)
    facts, program_reasons = analyse_program(closed_jaxpr) if closed_jaxpr is not None else ([], [])
    if closed_jaxpr is None:
        reasons.append("no traced program to check the trust rules on")
    reasons.extend(program_reasons)
    for f in facts:
        reasons.extend(f.reasons)
    clock, bandwidth = CLOCK_HZ[name], HBM_BYTES_PER_S[name]
    profiles: list[KernelProfile] = []
    mosaic_cycles, mosaic_seconds = 0, 0.0
    for i, k in enumerate(hlo_kernels):
        if not k.in_entry:
            reasons.append(f"Mosaic kernel {k.name} sits in HLO computation {k.computation} (a loop or branch): "
                           f"the static profile counts it once")
        if k.name not in cycles:
            reasons.append(f"no static profile was written for Mosaic kernel {k.name}")
        c = int(cycles.get(k.name, 0))
        f = facts[i] if i < len(facts) and len(facts) == len(hlo_kernels) else None
        steps = _points(f.grid) if f is not None and all(isinstance(g, int) for g in f.grid) else 0
        s_cycles, s_bytes = c / clock, k.bytes / bandwidth
        profiles.append(KernelProfile(kernel=f.name if f else k.name, hlo_op=k.name, grid_steps=steps,
                                      estimated_cycles=c, bundles_per_step=(c / steps if steps else None),
                                      bytes=k.bytes, seconds=max(s_cycles, s_bytes),
                                      bound="cycles" if s_cycles >= s_bytes else "hbm"))
        mosaic_cycles += c
        mosaic_seconds += max(s_cycles, s_bytes)
    if facts and len(facts) != len(hlo_kernels):
        reasons.append(f"{len(facts)} pallas_calls traced, {len(hlo_kernels)} Mosaic kernels compiled: "
                       f"the kernels cannot be matched")
    kernel_names = {k.name for k in hlo_kernels}
    xla_llo = sum(c for op, c in cycles.items() if op not in kernel_names)
    xla_model = max(0.0, float(compiled.cost.get("optimal_seconds", 0.0) or 0.0))
    # Each source misses something: XLA's model prices transcendentals at nothing (exp(sin(x) x)
    # on 16M floats: the profile 432,950 cycles, the model the time of a copy), the profile
    # counts a loop's body once. Both are lower bounds: the larger is taken.
    xla_seconds = max(xla_model, xla_llo / clock)
    if xla_llo > 0 and xla_model == 0.0:
        reasons.append("XLA ops were compiled but XLA's cost model gave no time for them")
    if not hlo_kernels and xla_seconds == 0.0:
        reasons.append("neither a Mosaic kernel nor an XLA figure: nothing to estimate")
    seconds = mosaic_seconds + xla_seconds
    return Estimate(seconds=seconds, mosaic_cycles=mosaic_cycles, mosaic_seconds=mosaic_seconds,
                    xla_seconds=xla_seconds, xla_model_seconds=xla_model, xla_llo_cycles=xla_llo, method=METHOD, trusted=not reasons and seconds > 0,
                    reasons=reasons, kernels=profiles)
