"""The runner<->judge protocol (kernelgym_pallas/protocol.py): every golden message in
tests/data/protocol decodes to its type and re-encodes to the same JSON (the C++ side,
tests/unit/judge_protocol_test.cc, reads the same files); and what is not a message of this
version is refused with an error that names what is wrong."""

import json
import os
import pathlib
import socket
import sys
import unittest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from kernelgym_pallas import forkserver, protocol  # noqa: E402

GOLDEN = pathlib.Path(__file__).resolve().parent / "data" / "protocol"


def golden() -> dict[str, dict]:
    return {f.stem: json.loads(f.read_text()) for f in sorted(GOLDEN.glob("*.json"))}


class GoldenMessages(unittest.TestCase):
    def test_every_kind_has_a_golden_message(self):
        kinds = {message["kind"] for message in golden().values()}
        self.assertEqual(kinds, set(protocol.MESSAGES))

    def test_each_decodes_to_its_type_and_encodes_back_to_the_same_json(self):
        for name, message in golden().items():
            with self.subTest(name):
                decoded = protocol.decode(json.dumps(message))
                self.assertIsInstance(decoded, protocol.MESSAGES[message["kind"]])
                self.assertEqual(json.loads(protocol.encode(decoded)), message)


class Refusals(unittest.TestCase):
    def setUp(self):
        self.ready = golden()["ready"]

    def refused(self, message, *words):
        with self.assertRaises(protocol.ProtocolError) as caught:
            protocol.decode(json.dumps(message))
        for word in words:
            self.assertIn(word, str(caught.exception))

    def test_another_version(self):
        self.refused(dict(self.ready, v=2), "version 2")

    def test_an_unknown_kind(self):
        self.refused(dict(self.ready, kind="estimates"), "unknown message kind 'estimates'")

    def test_an_unknown_field(self):
        self.refused(dict(self.ready, estimated_speedup=3.0), "unknown field", "estimated_speedup")

    def test_a_missing_field(self):
        message = dict(self.ready)
        del message["on_tpu"]
        self.refused(message, "missing field", "on_tpu")

    def test_a_field_of_another_type(self):
        self.refused(dict(self.ready, on_tpu=1), "ready.on_tpu", "boolean")
        self.refused(dict(self.ready, fork_server_job="3"), "ready.fork_server_job", "integer")

    def test_a_nested_field(self):
        reference = golden()["reference"]
        reference["trials"][0]["outputs"][0]["atol"] = "1e-5"
        self.refused(reference, "reference.trials[0].outputs[0].atol", "number")
        result = golden()["result_ok"]
        result["estimate"]["speedup"] = 9.0  # the judge does not say what the speed is worth
        self.refused(result, "result.estimate", "speedup")

    def test_the_sender_checks_too(self):
        bad = protocol.Progress(stage="trial", trial="0", repeat=0)
        with self.assertRaises(protocol.ProtocolError):
            protocol.encode(bad)
        with self.assertRaises(protocol.ProtocolError):
            protocol.encode({"kind": "ready"})

    def test_not_json(self):
        self.refused(None, "must be a JSON object")
        with self.assertRaises(protocol.ProtocolError):
            protocol.decode("{not json")


if __name__ == "__main__":
    unittest.main()


class ForkServerMessages(unittest.TestCase):
    """The fork server's side of its socket (forkserver.py), on a real socket pair: a ForkJob with
    its three descriptors is a job; the runner's old untyped byte, a message of another kind or a
    ForkJob without its descriptors is not, and no descriptor of it is kept. A job's end is a
    JobEnded that encodes as the golden message does."""

    def setUp(self):
        self.runner, self.server = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.addCleanup(self.runner.close)
        self.addCleanup(self.server.close)

    def send(self, data: bytes, count: int) -> list[int]:
        pipes = [os.pipe() for _ in range(count)]
        socket.send_fds(self.runner, [data], [r for r, _ in pipes])
        for r, w in pipes:
            os.close(r)
            self.addCleanup(os.close, w)
        return [w for _, w in pipes]

    def test_a_fork_job_brings_its_descriptors(self):
        writers = self.send((protocol.encode(protocol.ForkJob(descriptors=3)) + "\n").encode(), 3)
        fds = forkserver.receive_job(self.server)
        self.assertEqual(len(fds), 3)
        for fd, writer in zip(fds, writers):  # each is the reading end of its pipe
            os.write(writer, b"x")
            self.assertEqual(os.read(fd, 1), b"x")
            os.close(fd)

    def test_anything_else_is_no_job(self):
        for data, count in (((protocol.encode(protocol.Artifact(file="program.pkl")) + "\n").encode(), 3),
                            ((protocol.encode(protocol.ForkJob(descriptors=3)) + "\n").encode(), 2),
                            (b'{"v": 1, "kind": "fork_job"}\n', 3),
                            (b"F", 3)):  # last: it closes the runner's end
            with self.subTest(data=data, descriptors=count):
                self.send(data, count)
                if data == b"F":
                    self.runner.shutdown(socket.SHUT_WR)  # the old byte has no line end: the runner's end closes
                before = set(os.listdir("/proc/self/fd"))
                self.assertIsNone(forkserver.receive_job(self.server))
                self.assertLessEqual(set(os.listdir("/proc/self/fd")), before, "a refused job's descriptor was kept")
                if data == b"F":
                    return

    def test_a_jobs_end_is_typed(self):
        killed = forkserver.job_ended(3, 9, clean=True)  # waitpid's status for SIGKILL
        self.assertEqual(json.loads(protocol.encode(killed)), golden()["job_ended"])
        exited = forkserver.job_ended(4, 2 << 8, clean=False)
        self.assertEqual((exited.exit_code, exited.signal, exited.clean), (2, 0, False))
