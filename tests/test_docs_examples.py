"""README's example outputs are the binary's (issue 44): scripts/docs_examples.py regenerates
them from committed recordings; here it must find none stale, and it must find a stale one.

Usage: python3 -m unittest test_docs_examples   (STALLWATCH_BIN names the binary)"""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

BIN = os.environ.get("STALLWATCH_BIN", "../build/stallwatch")
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SCRIPT = os.path.join(ROOT, "scripts", "docs_examples.py")


def check(*files):
    return subprocess.run([sys.executable, SCRIPT, BIN, *files], capture_output=True, text=True, timeout=300)


class DocsExamples(unittest.TestCase):
    def test_readme_shows_what_the_binary_prints(self):
        r = check(os.path.join(ROOT, "README.md"))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertRegex(r.stdout, r"^[1-9]\d* examples, 0 stale")

    def test_a_stale_example_is_found(self):
        tmp = tempfile.mkdtemp(prefix="stallwatch-docs-")
        self.addCleanup(shutil.rmtree, tmp, True)
        with open(os.path.join(ROOT, "README.md")) as f:
            text = f.read()
        self.assertIn("  goodput     ", text)
        stale = os.path.join(tmp, "README.md")
        with open(stale, "w") as f:  # the headline as an older binary printed it
            f.write(text.replace("  goodput     ", "  goodput     92.76 % (lost: disk-slow 5.5 GPU-s) was ", 1))
        r = check(stale)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("1 stale", r.stdout)
        self.assertIn("-  goodput     92.76 %", r.stdout)


    def test_readme_names_every_table_of_the_schema(self):
        """README's schema table against a DB the binary makes now: a table added without a row
        there fails here (five were missing before issue 44)."""
        import sqlite3
        tmp = tempfile.mkdtemp(prefix="stallwatch-docs-")
        self.addCleanup(shutil.rmtree, tmp, True)
        db = os.path.join(tmp, "fresh.db")
        r = subprocess.run([BIN, "record", "--db", db, "--duration", "1s", "--no-collector.gpu",
                            "--socket", os.path.join(tmp, "s.sock")], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        with sqlite3.connect(db) as c:
            tables = [t for (t,) in c.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            version = c.execute("PRAGMA user_version").fetchone()[0]
        with open(os.path.join(ROOT, "README.md")) as f:
            readme = f.read()
        self.assertGreater(len(tables), 15)
        self.assertEqual([t for t in tables if f"`{t}`" not in readme.split("## Database schema")[1]], [])
        self.assertIn(f"version {version} now", readme)


if __name__ == "__main__":
    unittest.main()
