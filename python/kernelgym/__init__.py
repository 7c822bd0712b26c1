"""kernelgym's Python client: kernel optimization as a reinforcement-learning environment, served by
``kernelgym serve`` over ZeroMQ + msgpack (docs/protocol.md in the repository).

``make`` returns a ``gymnasium.Env`` (kernelgym.env), ``make_vec`` a vector env that steps many
episodes through one connection (kernelgym.vector); ``Client`` / ``AsyncClient`` speak the protocol
(kernelgym.client); ``Router`` places envs on several servers and routes each env's calls to its
own (kernelgym.router); ``kernelgym.protocol`` holds the wire format and the action constructors;
``kernelgym.text`` turns observations into chat messages and model replies into actions;
``kernelgym.errors`` is what is raised; ``KernelGymEnv.score`` / ``score_groups`` score a GRPO group of
candidate actions from one state in one call (kernelgym.group). Importing the package registers ``kernelgym/KernelGym-v0``
with Gymnasium (``gymnasium.make`` / ``gymnasium.make_vec``).
"""

from kernelgym import text
from kernelgym.client import AsyncClient, Client
from kernelgym.env import ENV_ID, KernelGymEnv, make
from kernelgym.errors import (
    ERRORS_BY_CODE,
    AuthError,
    KernelGymError,
    ProtocolError,
    ServerError,
    TransportError,
)
from kernelgym.group import Scored, group_relative_advantages, score_groups
from kernelgym.protocol import Reply
from kernelgym.router import Router
from kernelgym.vector import KernelGymVectorEnv, make_vec

__version__ = "0.1.0"

__all__ = [
    "ENV_ID",
    "ERRORS_BY_CODE",
    "AsyncClient",
    "AuthError",
    "Client",
    "KernelGymEnv",
    "KernelGymVectorEnv",
    "KernelGymError",
    "ProtocolError",
    "Reply",
    "Router",
    "Scored",
    "ServerError",
    "TransportError",
    "__version__",
    "group_relative_advantages",
    "make",
    "make_vec",
    "score_groups",
    "text",
]
