"""kernelgym's Python client: kernel optimization as a reinforcement-learning environment, served by
``kernelgym serve`` over ZeroMQ + msgpack (docs/protocol.md in the repository).

``Client`` / ``AsyncClient`` speak the protocol (kernelgym.client); ``kernelgym.protocol`` holds the
wire format and the action constructors; ``kernelgym.errors`` what is raised.
"""

from kernelgym.client import AsyncClient, Client
from kernelgym.errors import (
    ERRORS_BY_CODE,
    KernelGymError,
    ProtocolError,
    ServerError,
    TransportError,
)
from kernelgym.protocol import Reply

__version__ = "0.1.0"

__all__ = [
    "ERRORS_BY_CODE",
    "AsyncClient",
    "Client",
    "KernelGymError",
    "ProtocolError",
    "Reply",
    "ServerError",
    "TransportError",
    "__version__",
]
