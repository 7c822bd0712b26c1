"""kernelgym for the RL trainers people use. Each adapter imports nothing of its framework at
import time: they work against the call shapes the frameworks document.

- ``kernelgym.adapters.trl.KernelReward``: a reward function for TRL's ``GRPOTrainer``
  (``reward_funcs=[KernelReward(...)]``).
- ``kernelgym.adapters.verl``: ``compute_score`` / ``compute_score_batch`` for verl's
  ``custom_reward_function`` (naive and batch reward managers).
"""
