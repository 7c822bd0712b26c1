"""check_task starts its judge and tracer each in a job folder of its own (as the runner does), not
in the package folder: the judge writes libtpu's schedule dump, which the estimate is read from,
under its working folder, and checks run side by side once shared one (`tpu_scratch`) and read each
other's dumps. No jax is started here: the processes are recorded, not run."""

import io
import pathlib
import sys
import unittest
from unittest import mock

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from kernelgym_pallas import check_task, protocol  # noqa: E402

PACKAGE_PARENT = pathlib.Path(check_task.__file__).resolve().parent.parent


class _Started(Exception):
    pass


class JobFolders(unittest.TestCase):
    def test_judge_and_tracer_work_in_their_own_job_folders(self):
        started = []

        def popen(args, **kwargs):
            started.append((args, kwargs, pathlib.Path(kwargs["cwd"]).is_dir()))
            if len(started) == 2:
                raise _Started  # both processes asked for: stop before any protocol
            return mock.MagicMock()

        with mock.patch.object(check_task.subprocess, "Popen", popen), self.assertRaises(_Started):
            check_task.check(pathlib.Path("unused-task"), "def kernel(x):\n    return x\n")
        (judge_args, judge, judge_existed), (tracer_args, tracer, tracer_existed) = started
        self.assertIn("kernelgym_pallas.judge", judge_args)
        self.assertIn("kernelgym_pallas.tracer", tracer_args)
        folders = {pathlib.Path(judge["cwd"]).resolve(), pathlib.Path(tracer["cwd"]).resolve()}
        self.assertEqual(len(folders), 2, "one folder each")
        self.assertNotIn(PACKAGE_PARENT, folders)
        self.assertTrue(judge_existed and tracer_existed)
        for kwargs in (judge, tracer):
            self.assertIn(str(PACKAGE_PARENT), kwargs["env"]["PYTHONPATH"].split(":"))
        self.assertEqual(tracer["env"]["JAX_PLATFORMS"], "cpu")


class CompileCache(unittest.TestCase):
    def test_a_compile_key_is_answered_and_the_result_returned(self):
        # The judge asks the runner for an earlier compile of its program's key (CompileKey) and
        # waits for the answer; after compiling it reports the facts to keep (CompileFacts). A
        # check keeps no cache: it must answer "none" and read on to the Result (before, it took
        # the CompileKey for the judge's last message and failed on its missing `status`).
        result = protocol.failure("compile_error", "compile", "no kernel")
        judge = mock.MagicMock()
        judge.stdout = io.StringIO("".join(protocol.encode(m) + "\n" for m in (
            protocol.Progress(stage="traced", trial=-1, repeat=0),
            protocol.CompileKey(program="ab" * 32),
            protocol.CompileFacts(tpu_compile=None, estimate=None),
            result)))
        judge.stdin = io.StringIO()
        self.assertEqual(check_task._read(judge, "judge"), result)
        answers = [protocol.decode(line) for line in judge.stdin.getvalue().splitlines()]
        self.assertEqual(answers, [protocol.CompileFacts(tpu_compile=None, estimate=None)])


if __name__ == "__main__":
    unittest.main()
