"""Runnable examples, shipped with the package: ``python -m kernelgym.examples.<name> --help``.

- ``random_knobs_agent``: random knob settings of a templated task.
- ``pallas_episode``: a short episode on the pallas backend.
- ``grpo_rollout``: a multi-turn rollout of an OpenAI-compatible model, shaped for GRPO trainers.
- ``ray_rollouts``: many rollouts from Ray actors over several servers.
"""
