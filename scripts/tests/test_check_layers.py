"""The layer check (scripts/check_layers.py) fails on planted violations: a file outside a
backend's folder that names the backend, in C++ or Python; and not on what is allowed (the
backend's own folder, a comment, the default backend, the listed exceptions).

Run: python3 scripts/tests/test_check_layers.py      (ctest: layers.FailsOnAPlantedViolation)
"""
import pathlib
import shutil
import subprocess
import sys
import tempfile
import unittest

SCRIPTS = pathlib.Path(__file__).resolve().parents[1]
REPO = SCRIPTS.parent
sys.path.insert(0, str(SCRIPTS))

import check_layers  # noqa: E402


class PlantedViolations(unittest.TestCase):
    def setUp(self):
        self.repo = pathlib.Path(tempfile.mkdtemp(prefix="kernelgym-layers-"))
        for descriptor in REPO.glob("tpu_runner/*/descriptor.json"):
            target = self.repo / descriptor.relative_to(REPO)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(descriptor, target)
        self.plant("env/server/clean.cc", 'const BackendInfo& info = BackendInfoOr(backend);\n'
                                          'std::string fallback = "cpu";  // the default may be named\n'
                                          '// the "pallas" backend is described in its folder: a comment\n')
        self.plant("tpu_runner/pallas/own.cc", 'std::string name() const { return "pallas"; }\n')

    def tearDown(self):
        shutil.rmtree(self.repo)

    def plant(self, rel: str, text: str) -> None:
        path = self.repo / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    def run_check(self) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(SCRIPTS / "check_layers.py"), str(self.repo)],
                              capture_output=True, text=True)

    def test_a_clean_tree_passes(self):
        self.assertEqual(check_layers.check_backend_names(self.repo), [])
        result = self.run_check()
        self.assertEqual(result.returncode, 0, result.stdout)

    def test_a_cpp_file_naming_a_backend_outside_its_folder_fails(self):
        self.plant("datasets/variants.cc", 'const auto dir = task.dir / "pallas";\n')
        problems = check_layers.check_backend_names(self.repo)
        self.assertEqual(len(problems), 1, problems)
        self.assertIn("datasets/variants.cc:1: names the pallas backend outside tpu_runner/pallas/", problems[0])
        result = self.run_check()
        self.assertEqual(result.returncode, 1, result.stdout)
        self.assertIn("datasets/variants.cc:1", result.stdout)

    def test_a_python_file_naming_a_backend_fails_too(self):
        self.plant("python/kernelgym/prompts.py", "if backend == 'pallas':\n    pass\n")
        problems = check_layers.check_backend_names(self.repo)
        self.assertTrue(any("python/kernelgym/prompts.py:1" in p for p in problems), problems)

    def test_every_described_backend_is_guarded_but_the_default(self):
        self.plant("rewards/reward.cc", 'bool gpu = r.backend == "cuda";\nbool host = r.backend == "cpu";\n')
        problems = check_layers.check_backend_names(self.repo)
        self.assertEqual(len(problems), 1, problems)
        self.assertIn("rewards/reward.cc:1: names the cuda backend", problems[0])

    def test_the_real_tree_passes(self):
        self.assertEqual(check_layers.check_backend_names(REPO), [])


if __name__ == "__main__":
    unittest.main()
