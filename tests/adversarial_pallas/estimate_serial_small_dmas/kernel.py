# A correct kernel that copies its operands itself, one 4 KiB chunk at a time, and waits for every
# copy before it starts the next: nothing overlaps, so each chunk pays the DMA's latency three
# times (two copies in, one out). A DMA wait is one bundle of the schedule; priced as a bundle,
# this kernel looked many times faster than the starter while it is several times slower on a
# chip. The estimate must price every copy by its bytes and latency.
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def kernel(a, b):
    n = a.shape[0]
    rows = n // 128
    chunk = 4096 // (128 * a.dtype.itemsize)  # rows of one 4 KiB copy

    def body(a_hbm, b_hbm, y_hbm, a_buf, b_buf, y_buf, sems):
        def step(i, carry):
            part = pl.ds(pl.multiple_of(i * chunk, chunk), chunk)
            copy_a = pltpu.make_async_copy(a_hbm.at[part], a_buf, sems.at[0])
            copy_b = pltpu.make_async_copy(b_hbm.at[part], b_buf, sems.at[1])
            copy_a.start()
            copy_a.wait()
            copy_b.start()
            copy_b.wait()
            x = a_buf[...]
            y_buf[...] = x / (1.0 + jnp.exp(-x)) * b_buf[...]
            copy_y = pltpu.make_async_copy(y_buf, y_hbm.at[part], sems.at[2])
            copy_y.start()
            copy_y.wait()
            return carry

        jax.lax.fori_loop(0, rows // chunk, step, 0)

    any_spec = pl.BlockSpec(memory_space=pl.ANY)
    y = pl.pallas_call(
        body, grid=(1,), in_specs=[any_spec, any_spec], out_specs=any_spec,
        out_shape=jax.ShapeDtypeStruct((rows, 128), a.dtype),
        scratch_shapes=[pltpu.VMEM((chunk, 128), a.dtype)] * 3 + [pltpu.SemaphoreType.DMA((3,))],
    )(a.reshape(rows, 128), b.reshape(rows, 128))
    return y.reshape(n)
