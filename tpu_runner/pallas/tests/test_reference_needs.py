"""Which input positions a reference's answer in one output block needs
(kernelgym_pallas/reference_needs.py): real references, their gradients and a far move."""

import pathlib
import sys
import unittest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from kernelgym_pallas import reference_needs  # noqa: E402

S, D = 384, 16


def _attention(visible):
    def reference(q, k, v):
        i = jnp.arange(S)[:, None]
        j = jnp.arange(S)[None, :]
        scores = jnp.where(visible(i, j), q @ k.T / D ** 0.5, -jnp.inf)
        return jnp.exp(scores - scores.max(1, keepdims=True)) / jnp.exp(
            scores - scores.max(1, keepdims=True)).sum(1, keepdims=True) @ v
    return reference


def _inputs():
    rng = np.random.default_rng(1)
    return [rng.standard_normal((S, D)).astype(np.float32) for _ in range(3)]


def _needs_prefix_of_last_block(reference, inputs=None, i=1):
    # the last 128-row block of the output, and the key positions before it: [0, 256)
    return reference_needs.needs_all(reference, inputs or _inputs(), i, 0, 0, [256, 0], [128, D], 0, 256)


class ReferenceNeeds(unittest.TestCase):
    def test_a_causal_mask_needs_every_earlier_key(self):
        self.assertTrue(_needs_prefix_of_last_block(_attention(lambda i, j: j <= i)))

    def test_a_sink_and_a_window_leave_keys_unneeded(self):
        # StreamingLLM: 4 sink keys and a window of 128: rows 256-383 see keys 0-3 and 129-383.
        self.assertFalse(_needs_prefix_of_last_block(_attention(lambda i, j: (j <= i) & ((j < 4) | (i - j < 128)))))

    def test_a_maximums_zero_gradient_is_not_taken_for_unneeded(self):
        # A running maximum's gradient reaches only its argument; moving the rest far moves it.
        def running_max(x):
            return jnp.broadcast_to(jnp.maximum.accumulate(x[:, 0])[:, None], (S, D))
        inputs = [np.random.default_rng(2).standard_normal((S, D)).astype(np.float32)]
        self.assertTrue(_needs_prefix_of_last_block(running_max, inputs, i=0))

    def test_integer_inputs_are_not_differentiated(self):
        inputs = [np.arange(S * D, dtype=np.int32).reshape(S, D)]
        self.assertTrue(_needs_prefix_of_last_block(lambda x: x * 0, inputs, i=0))


if __name__ == "__main__":
    unittest.main()
