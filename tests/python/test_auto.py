"""The zero-code path (issue 41): a process started with stallwatch's bootstrap first on
PYTHONPATH and STALLWATCH_AUTO=1 reports every DataLoader's steps with no change to its script.

A small stand-in for torch (a package on disk with torch.utils.data.dataloader.DataLoader and
torch.is_grad_enabled/no_grad) is imported through the ordinary import system, so that the
finder, the patch and the train/eval rule run as they do on the real one; the real PyTorch
is checked on the GPU host (tests/gpu/lm_runs.sh: the `auto` run)."""

import os
import socket
import subprocess
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = os.path.normpath(os.path.join(HERE, "..", "..", "python"))
BOOTSTRAP = os.path.join(PACKAGE, "stallwatch", "_bootstrap")

FAKE_TORCH = {
    "torch/__init__.py": """
        import contextlib
        _grad = [True]
        def is_grad_enabled():
            return _grad[-1]
        @contextlib.contextmanager
        def no_grad():
            _grad.append(False)
            try:
                yield
            finally:
                _grad.pop()
    """,
    "torch/utils/__init__.py": "",
    "torch/utils/data/__init__.py": "from .dataloader import DataLoader\n",
    "torch/utils/data/dataloader.py": """
        import time
        class _Iter:
            def __init__(self, n, delay):
                self.n, self.delay, self._num_yielded = n, delay, 0
            def __iter__(self):
                return self
            def __len__(self):
                return self.n
            def __next__(self):
                if self._num_yielded >= self.n:
                    raise StopIteration
                time.sleep(self.delay)  # the wait for a batch
                self._num_yielded += 1
                return [0.0] * 8  # a batch of 8 samples
        class DataLoader:
            def __init__(self, n, delay=0.0):
                self.n, self.delay = n, delay
            def __iter__(self):
                return _Iter(self.n, self.delay)
            def __len__(self):
                return self.n
    """,
}

SCRIPT = """
    import sys, time
    import torch
    from torch.utils.data import DataLoader
    train, evaluation = DataLoader(20, 0.01), DataLoader(30, 0.0)
    it = iter(train)
    assert len(it) == 20 and it._num_yielded == 0  # the original iterator's own, through the wrapper
    for batch in it:
        time.sleep(0.005)  # the step
    with torch.no_grad():
        for batch in evaluation:
            pass
    print("done", type(it).__name__)
"""


class AutoInstrumentation(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        for path, text in FAKE_TORCH.items():
            full = os.path.join(self.tmp, "site", path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "w") as f:
                f.write(textwrap.dedent(text))
        self.sock_path = os.path.join(self.tmp, "agent.sock")
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.server.bind(self.sock_path)
        self.server.settimeout(0.5)

    def tearDown(self):
        self.server.close()

    def run_script(self, auto, script=SCRIPT):
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([BOOTSTRAP, os.path.join(self.tmp, "site")]),
                   STALLWATCH_SOCKET=self.sock_path, STALLWATCH_AUTO=auto)
        return subprocess.run([sys.executable, "-c", textwrap.dedent(script)], env=env, capture_output=True,
                              text=True, timeout=60)

    def received(self):
        totals = {}
        while True:
            try:
                datagram = self.server.recv(65536)
            except socket.timeout:
                return totals
            for line in datagram.decode().splitlines():
                name, rest = line.split(":", 1)
                totals[name] = totals.get(name, 0.0) + float(rest.split("|")[0])

    def test_every_training_batch_is_a_step_and_evaluation_is_not(self):
        out = self.run_script("1")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("done _Watched", out.stdout)
        got = self.received()
        # 20 training batches; the last one's step ends when the loop asks again (StopIteration).
        self.assertEqual(got.get("stallwatch.dataloader.steps"), 20)
        self.assertEqual(got.get("stallwatch.dataloader.samples"), 160)
        self.assertGreaterEqual(got["stallwatch.dataloader.wait"], 20 * 10 * 0.9)  # ms
        self.assertGreaterEqual(got["stallwatch.dataloader.step"], 20 * 5 * 0.9)

    def test_off_without_the_variable(self):
        out = self.run_script("0")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("done _Iter", out.stdout)
        self.assertEqual(self.received(), {})

    def test_a_process_without_torch_is_left_alone(self):
        out = self.run_script("1", "import json, sys\nprint('torch' in sys.modules, 'stallwatch' in sys.modules)")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.split(), ["False", "True"])
        self.assertEqual(out.stderr, "")

    def test_the_sites_own_sitecustomize_still_runs(self):
        with open(os.path.join(self.tmp, "site", "sitecustomize.py"), "w") as f:
            f.write("import builtins\nbuiltins.SITE_RAN = True\n")
        out = self.run_script("1", "import builtins\nprint(getattr(builtins, 'SITE_RAN', False))")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.strip(), "True")


if __name__ == "__main__":
    unittest.main()
