"""check_task starts its judge and tracer each in a job folder of its own (as the runner does), not
in the package folder: the judge writes libtpu's schedule dump, which the estimate is read from,
under its working folder, and checks run side by side once shared one (`tpu_scratch`) and read each
other's dumps. No jax is started here: the processes are recorded, not run."""

import pathlib
import sys
import unittest
from unittest import mock

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from kernelgym_pallas import check_task  # noqa: E402

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


if __name__ == "__main__":
    unittest.main()
