"""The verifiers taskset id ``kernelgym-verifiers``: verifiers imports a taskset by id as a top-level
module and takes the ``Taskset`` and ``Env`` subclasses its ``__all__`` names. The code is
``kernelgym.adapters.verifiers``."""

from kernelgym.adapters.verifiers import KernelGymEnvironment, KernelGymTaskset, load_environment

__all__ = ["KernelGymTaskset", "KernelGymEnvironment", "load_environment"]
