"""Every command's --json output against docs/stallwatch-json.schema.json (issue 42): over every
committed recording `report`, `jobs`, `incidents` (the post-mortem's and the live history),
`health --db`; a run across two nodes' recordings; `devices` on this host. And the schema can
fail: an output with a key renamed, or of another format version, is refused.

Usage: python3 -m unittest test_json_schema   (STALLWATCH_BIN names the binary)"""
import copy
import json
import os
import shutil
import subprocess
import tempfile
import unittest

import jsonschema

from test_one_answer import copied, recordings  # the recording copied with its -wal

BIN = os.environ.get("STALLWATCH_BIN", "../build/stallwatch")
HERE = os.path.dirname(os.path.abspath(__file__))
RECORDINGS = os.path.join(HERE, "fixtures", "recordings")
SCHEMA = os.path.join(HERE, "..", "docs", "stallwatch-json.schema.json")


class JsonSchema(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with open(SCHEMA) as f:
            schema = json.load(f)
        jsonschema.Draft202012Validator.check_schema(schema)
        cls.validator = jsonschema.Draft202012Validator(schema)

    def output(self, *args):
        r = subprocess.run([BIN, "--log-level", "off", *args, "--json"], capture_output=True, text=True,
                           timeout=120)
        if r.returncode == 1 and not r.stdout:  # an older recording without the table: said why
            self.assertIn("older stallwatch", r.stderr)
            return None
        self.assertIn(r.returncode, (0, 8, 16, 32), r.stderr)  # health's status bits
        return json.loads(r.stdout)

    def check(self, out, what):
        errors = sorted(self.validator.iter_errors(out), key=lambda e: list(e.path))
        self.assertEqual([], [f"{what}: {'/'.join(map(str, e.path))}: {e.message[:200]}" for e in errors[:5]])

    def test_every_commands_output_on_every_committed_recording(self):
        tmp = tempfile.mkdtemp(prefix="stallwatch-schema-")
        self.addCleanup(shutil.rmtree, tmp, True)
        dbs = recordings()
        self.assertGreater(len(dbs) * int(os.environ.get("STALLWATCH_RECORDINGS_STRIDE", "1")), 50)
        checked = 0
        for db in dbs:
            name = os.path.relpath(db, RECORDINGS)
            path = copied(db, tmp)
            for args in (["report"], ["jobs"], ["incidents"], ["incidents", "--live"], ["health"]):
                out = self.output(*args, "--db", path)
                if out is None:
                    continue
                self.assertEqual(out["command"], args[0])
                self.check(out, f"{name} {' '.join(args)}")
                checked += 1
        two = os.path.join(RECORDINGS, "h200x2-two-node-node1-disk")
        self.check(self.output("report", "--db", os.path.join(two, "node0.db"), "--db",
                               os.path.join(two, "node1.db")), "two nodes")
        self.check(self.output("devices"), "devices")
        self.assertGreater(checked * int(os.environ.get("STALLWATCH_RECORDINGS_STRIDE", "1")), 250)

    def test_the_schema_refuses_a_renamed_key_and_another_format(self):
        db = copied(os.path.join(RECORDINGS, "h200-stall-disk.db"), tempfile.mkdtemp(prefix="stallwatch-schema-"))
        good = self.output("report", "--db", db)
        self.check(good, "as printed")
        renamed = copy.deepcopy(good)
        renamed["jobs"][0]["starts_ms"] = renamed["jobs"][0].pop("start_ms")
        other = copy.deepcopy(good)
        other["json_format_version"] = [2, 0]
        jobs = self.output("jobs", "--db", db)
        jobs["jobs"][0]["started_ms"] = jobs["jobs"][0].pop("start_ms")  # the name before version 1
        for bad in (renamed, other, jobs):
            self.assertFalse(self.validator.is_valid(bad))
        shutil.rmtree(os.path.dirname(db), True)


if __name__ == "__main__":
    unittest.main()
