"""The fork server: a judge's or a tracer's start-up paid once per sandbox, and a fresh process
forked from it for every job.

Starting Python and importing jax, Pallas and the primitive table costs about 1.2 CPU-seconds; a
fork costs milliseconds. The server does that work once (`judge.prepare`, `tracer.warm_up`: no
backend, so no threads yet) and then waits. For each job the runner sends it the job's three
descriptors, and it forks a child that becomes the judge or tracer of that job alone: the child's
channels and stderr are the job's, it says `ready` and serves exactly as a process started for
the job would (judge.serve, tracer.serve), then exits.

Why a child holds nothing of an earlier job: every child is forked from the server, whose memory
no job ever touched (a child's writes stay in the child); the server forks the next child only
after the last one has ended; and what a child can leave behind in the sandbox is emptied before
the next: the runner starts the server with a read-only root, so /tmp and the job folder are the
only writable places; the server empties /tmp and the runner the job folder, and either refuses
to go on if something stays. Kernel objects that outlive a process (System V IPC, POSIX message
queues, keyrings) are calls the seccomp filter kills (confine.py). The runner uses a fork server
only inside bubblewrap's namespaces; without them each job gets a process of its own as before.

The messages are protocol.py's, one JSON line each, on the server's socket:

  runner -> server   ForkJob, sent with the job's control socket, report pipe and stderr pipe
                     attached (SCM_RIGHTS); the child gets them as descriptors 3, 4 and 2
  server -> runner   JobEnded (job, exit_code or signal, clean), once the child has ended and
                     /tmp is emptied; clean false: something stayed, and the server exits rather
                     than fork again
  server -> runner   Fatal, then it exits, if it cannot start
Anything else from the runner (not a ForkJob, or without its three descriptors) ends the server.
"""
from __future__ import annotations

import argparse
import os
import shutil
import socket
import sys
import time
import traceback

from . import protocol

CONTROL_FD, REPORT_FD = 3, 4
JOB_DESCRIPTORS = 3
SANDBOX_MARK = "KERNELGYM_FORK_SERVER_SANDBOX"  # the runner's word that /tmp is the sandbox's own


def _empty(folder: str, keep: str) -> bool:
    """Removes everything in `folder` but the job folder `keep` (a bind mount of the runner's, which
    the runner empties), the runner's other mounts (read-only binds: a checkout, a build folder or
    a virtualenv under /tmp) and the folders on the way to them; True when nothing else is left.
    The job folder lies under /tmp when the runner's cache does (KERNELGYM_CACHE=/tmp/...). A mount
    is the runner's, never the candidate's: the sandbox lets no job mount anything."""
    clean = True
    for entry in os.scandir(folder):
        if entry.path == keep or os.path.ismount(entry.path):
            continue
        holds_mount = entry.is_dir(follow_symlinks=False) and (keep.startswith(entry.path + "/") or _holds_mount(entry.path))
        if holds_mount:
            clean = _empty(entry.path, keep) and clean
            continue
        try:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
        except OSError:
            pass
        clean = clean and not os.path.lexists(entry.path)
    return clean


def _holds_mount(folder: str) -> bool:
    """Whether a mount point lies somewhere under `folder` (bwrap makes the folders on the way to
    a bind's target; those stay, emptied of anything else)."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return False
    return any(os.path.ismount(e.path) or (e.is_dir(follow_symlinks=False) and _holds_mount(e.path)) for e in entries)


def _become_job(server: socket.socket, fds: list[int], role: str, prepared, seccomp: bool, facts: dict) -> None:
    """In the child: the job's descriptors in place of the server's, then the role's own loop."""
    code = 70
    try:
        server.close()
        # Through high numbers first, so that no descriptor is overwritten before it is copied.
        high = [os.dup2(fd, 100 + i) for i, fd in enumerate(fds)]
        for fd in fds:
            os.close(fd)
        control, report, stderr = high
        os.dup2(stderr, 1)
        os.dup2(stderr, 2)
        os.dup2(control, CONTROL_FD)
        os.dup2(report, REPORT_FD)
        for fd in high:
            os.close(fd)
        if role == "judge":
            from . import judge
            code = judge.serve(prepared, CONTROL_FD, REPORT_FD, seccomp=seccomp, facts=facts)
        else:
            from . import tracer
            code = tracer.serve(CONTROL_FD, REPORT_FD, seccomp=seccomp, facts=facts)
    except BaseException:  # noqa: BLE001 — whatever it was, the runner reads it on stderr
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001
                pass
        os._exit(code)


def _send(server: socket.socket, message) -> bool:
    try:
        server.sendall((protocol.encode(message) + "\n").encode())
        return True
    except OSError:
        return False


def receive_job(server: socket.socket) -> list[int] | None:
    """The next ForkJob's descriptors, or None: the runner closed its end, or sent something that
    is not a ForkJob with its descriptors (then none of them is kept)."""
    data, fds = b"", []
    while not data.endswith(b"\n"):
        chunk, more, _, _ = socket.recv_fds(server, 4096, JOB_DESCRIPTORS)
        fds += more
        if not chunk or len(data) > 65536:
            break
        data += chunk
    try:
        message = protocol.decode(data.decode(errors="replace")) if data.endswith(b"\n") else None
    except protocol.ProtocolError:
        message = None
    if not isinstance(message, protocol.ForkJob) or message.descriptors != JOB_DESCRIPTORS or \
            len(fds) != JOB_DESCRIPTORS:
        for fd in fds:
            os.close(fd)
        return None
    return fds


def job_ended(job: int, status: int, clean: bool) -> protocol.JobEnded:
    """How the job's process ended (os.waitpid's status), as the runner reads it."""
    if os.WIFSIGNALED(status):
        return protocol.JobEnded(job=job, exit_code=-1, signal=os.WTERMSIG(status), clean=clean)
    return protocol.JobEnded(job=job, exit_code=os.WEXITSTATUS(status), signal=0, clean=clean)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--role", choices=("judge", "tracer"), required=True)
    parser.add_argument("--target", default="v5e", help="the TPU generation compiled for (v5e, v6e)")
    parser.add_argument("--server-fd", type=int, default=CONTROL_FD)
    parser.add_argument("--no-seccomp", action="store_true", help="for debugging only")
    args = parser.parse_args()
    server = socket.socket(fileno=args.server_fd)
    if os.environ.get(SANDBOX_MARK) != "1":
        _send(server, protocol.Fatal(message=f"the fork server empties /tmp between jobs: it runs only in "
                                             f"the runner's sandbox ({SANDBOX_MARK}=1)"))
        return 2
    started = time.perf_counter()
    try:
        if args.role == "judge":
            from . import judge
            prepared = judge.prepare(args.target)
        else:
            from . import tracer
            tracer.warm_up(args.target)
            prepared = None
    except BaseException as error:  # noqa: BLE001
        _send(server, protocol.Fatal(message=f"{args.role} start-up: {type(error).__name__}: {error}"[:500]))
        return 2
    start_seconds = time.perf_counter() - started
    job_folder = os.path.realpath(os.getcwd())  # the runner starts the server in it
    jobs = 0
    while True:
        try:
            fds = receive_job(server)
        except OSError:
            return 0
        if fds is None:  # the runner closed its end, or sent something else
            return 0
        jobs += 1
        facts = {"fork_server_job": jobs, "fork_server_start_seconds": start_seconds}
        pid = os.fork()
        if pid == 0:
            _become_job(server, fds, args.role, prepared, not args.no_seccomp, facts)
        for fd in fds:
            os.close(fd)
        _, status = os.waitpid(pid, 0)
        # Nothing forked after this child may see what it left; the runner empties the job folder.
        ended = job_ended(jobs, status, clean=_empty("/tmp", job_folder))
        if not _send(server, ended) or not ended.clean:
            return 0


if __name__ == "__main__":
    sys.exit(main())
