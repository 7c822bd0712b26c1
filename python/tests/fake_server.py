"""A stand-in server for the transport tests: a raw ZeroMQ ROUTER on tcp://127.0.0.1:* that
answers (or not) as the test says, from a thread, and records what it received."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

import msgpack
import zmq

# (routing id of the client's connection, the decoded request) -> the messages to send back: each
# bytes, or a list of message parts, to that connection, or (routing id, bytes) to another one;
# None or [] for no answer.
Handler = Callable[[bytes, dict[str, Any]], "list[bytes | list[bytes] | tuple[bytes, bytes]] | None"]


def reply_bytes(request_id: int, result: dict[str, Any]) -> bytes:
    return msgpack.packb({"v": 1, "id": request_id, "ok": True, "result": result})


class FakeServer:
    """``with FakeServer(handler) as fake:`` binds, serves until the block ends. ``received`` gets
    (routing id, request) for every request, in arrival order."""

    def __init__(self, handler: Handler | None = None) -> None:
        self.handler = handler or (lambda routing_id, request: None)
        self.received: queue.Queue[tuple[bytes, dict[str, Any]]] = queue.Queue()
        self._context = zmq.Context()
        self._router = self._context.socket(zmq.ROUTER)
        self._router.setsockopt(zmq.LINGER, 0)
        self._router.bind("tcp://127.0.0.1:*")
        self.address: str = self._router.getsockopt_string(zmq.LAST_ENDPOINT)
        # The thread stops when the test's side of this pair says so (no polling on a flag).
        self._stop_send = self._context.socket(zmq.PAIR)
        self._stop_recv = self._context.socket(zmq.PAIR)
        self._stop_recv.bind(f"inproc://stop-{id(self)}")
        self._stop_send.connect(f"inproc://stop-{id(self)}")
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> FakeServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop_send.send(b"")
        self._thread.join(10)
        for socket in (self._router, self._stop_send, self._stop_recv):
            socket.close(linger=0)
        self._context.term()

    def next_request(self, timeout_s: float = 10.0) -> tuple[bytes, dict[str, Any]]:
        return self.received.get(timeout=timeout_s)

    def _serve(self) -> None:
        poller = zmq.Poller()
        poller.register(self._router, zmq.POLLIN)
        poller.register(self._stop_recv, zmq.POLLIN)
        while True:
            events = dict(poller.poll())
            if self._stop_recv in events:
                return
            routing_id, data = self._router.recv_multipart()
            request = msgpack.unpackb(data, raw=False)
            self.received.put((routing_id, request))
            for message in self.handler(routing_id, request) or []:
                if isinstance(message, tuple):
                    self._router.send_multipart(list(message))
                else:
                    parts = [message] if isinstance(message, bytes) else message
                    self._router.send_multipart([routing_id, *parts])
