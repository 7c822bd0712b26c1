"""kernelgym for the RL trainers people use. The TRL and verl adapters import nothing of their
framework: they work against the call shapes the frameworks make. The verifiers and OpenEnv ones
subclass their framework's classes, so importing them imports it.

- ``kernelgym.adapters.trl.KernelReward``: a reward function for TRL's ``GRPOTrainer``
  (``reward_funcs=[KernelReward(...)]``); ``KernelRollout``, a ``rollout_func`` for it.
- ``kernelgym.adapters.verl``: ``compute_score`` / ``compute_score_batch`` for verl's
  ``custom_reward_function`` (naive and batch reward managers).
- ``kernelgym.adapters.verifiers``: a verifiers 0.4 taskset and environment (taskset id
  ``kernelgym-verifiers``), one kernelgym episode per rollout; imports ``verifiers.v1``.
- ``kernelgym.adapters.openenv``: an OpenEnv environment; imports ``openenv-core``.
"""
