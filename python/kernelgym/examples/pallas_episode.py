"""One short episode on the pallas backend: a Pallas TPU kernel, compiled by the real TPU compiler
(deviceless, without a TPU) and checked in TPU interpret mode.

The episode starts from the task's naive Pallas starter, then sends a block shape Mosaic refuses
(a compile error on the pallas_call's line), then submits the starter again. Without a TPU nothing
is timed: the speed signal is the TPU compiler's static estimate, labelled "speed: estimated" in
every observation, with the kernel's static profile ("tpu kernel" lines).

    build/cli/kernelgym serve --local-runner-backends cpu,pallas &
    python -m kernelgym.examples.pallas_episode --task cpu/silu_mul
"""

from __future__ import annotations

import argparse
import sys

from kernelgym import protocol
from kernelgym.client import Client


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connect", "--address", dest="address", default="tcp://127.0.0.1:5555", help="the server's client endpoint")
    parser.add_argument("--task", default="cpu/silu_mul", help="a task with a Pallas version")
    args = parser.parse_args(argv)
    with Client(args.address) as client:
        starter = client.get_task(args.task)["versions"]["pallas"]["starter_source"]
        env = client.make(args.task, backend="pallas", max_steps=4)["env"]
        try:
            first = client.reset(env, seed=0)
            print("---- the Pallas starter ----")
            print(first["observation"]["text"])
            broken = starter.replace("pl.BlockSpec((8, 128)", "pl.BlockSpec((4, 100)", 1)
            step = client.step(env, protocol.replace(broken))
            print(f"---- a block shape Mosaic refuses (reward {step['reward']:+.3f}) ----")
            print(step["observation"]["text"])
            step = client.step(env, protocol.replace(starter))
            final = client.step(env, protocol.submit())
            print(f"---- submitted the starter again (reward {final['reward']:+.3f}) ----")
            print(final["observation"]["text"])
            return 0 if final["observation"]["status"] == "ok" else 1
        finally:
            client.close_env(env)


if __name__ == "__main__":
    sys.exit(main())
