"""`stallwatch run -- COMMAND` end to end: the real binary starts a Python process whose
DataLoader (the stand-in torch of tests/python/test_auto.py, imported through the ordinary
import system) reports its steps to a socket, with no change to the script; the command's own
exit status comes back, and a command that cannot start is said with a shell's status."""

import os
import subprocess
import sys
import textwrap
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "python"))
from test_auto import SCRIPT, AutoInstrumentation  # noqa: E402

BIN = os.environ.get("STALLWATCH_BIN", "../build/stallwatch")


class RunE2E(AutoInstrumentation):
    def launch(self, *command):
        env = dict(os.environ, PYTHONPATH=os.path.join(self.tmp, "site"), STALLWATCH_SOCKET=self.sock_path)
        env.pop("STALLWATCH_AUTO", None)
        return subprocess.run([BIN, "run", "--", *command], env=env, capture_output=True, text=True, timeout=60)

    def test_the_scripts_dataloaders_report_with_no_change(self):
        out = self.launch(sys.executable, "-c", textwrap.dedent(SCRIPT))
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("done _Watched", out.stdout)
        self.assertEqual(self.received().get("stallwatch.dataloader.steps"), 20)

    def test_the_commands_exit_status_comes_back(self):
        self.assertEqual(self.launch(sys.executable, "-c", "import sys; sys.exit(3)").returncode, 3)
        missing = self.launch("/nonexistent/train")
        self.assertEqual(missing.returncode, 127)
        self.assertIn("cannot start /nonexistent/train", missing.stderr)


if __name__ == "__main__":
    unittest.main()
