"""End-to-end tests of `stallwatch incidents` and `stallwatch report` on synthetic recordings,
and of the HTML report in a real browser (Debian's headless Chromium, no network)."""

import json
import swjson
import os
import re
import shutil
import sqlite3
import subprocess
import tempfile
import time
import unittest

import synthetic_db

BIN = os.environ.get("STALLWATCH_BIN", "../build/stallwatch")
SCREENSHOT = os.environ.get("STALLWATCH_SCREENSHOT")  # where to keep the page's picture
STALL_AT, STALL_FOR = 300, 30
T0_S = synthetic_db.T0_MS // 1000


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    return None


def headless_flags(tmp):
    """Debian's Chromium headless, with no network of its own and a profile under TMP."""
    return ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            f"--user-data-dir={os.path.join(tmp, 'profile')}"]


class ReportE2E(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="stallwatch-report-")
        self.db = os.path.join(self.tmp, "sw.db")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def sw(self, *args):
        r = subprocess.run([BIN, *args], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout

    def incidents(self, stall):
        synthetic_db.build(self.db, BIN, stall=stall, stall_at=STALL_AT, stall_for=STALL_FOR)
        return swjson.loads(self.sw("incidents", "--db", self.db, "--recompute", "--json"))

    def assert_window(self, incident):
        # Injected: intervals 300..329, i.e. from T0+299 s to T0+329 s. Within 2 s at each end.
        self.assertLessEqual(abs(incident["start_ms"] / 1000 - (T0_S + STALL_AT - 1)), 2)
        self.assertLessEqual(abs(incident["end_ms"] / 1000 - (T0_S + STALL_AT + STALL_FOR - 1)), 2)

    def test_disk_slow(self):
        found = self.incidents("disk-slow")
        self.assertEqual(len(found), 1, found)
        self.assertEqual(found[0]["class"], "disk-slow")
        self.assertEqual(found[0]["device"], "loop1")
        self.assertEqual(found[0]["physical_device"], "vda")
        self.assert_window(found[0])
        report = swjson.loads(self.sw("report", "--db", self.db, "--json"))
        self.assertEqual(len(report), 1)
        self.assertLess(report[0]["goodput"], 0.99)
        self.assertGreater(report[0]["gpu_seconds_lost_by_class"]["disk-slow"], 15)
        loop1 = next(d for d in report[0]["devices"] if d["device"] == "loop1")
        self.assertLess(loop1["r_await_p50_ms"], 1.0)
        self.assertGreater(loop1["r_await_p99_ms"], 15.0)
        # Recomputing again replaces, never duplicates.
        again = swjson.loads(self.sw("incidents", "--db", self.db, "--recompute", "--json"))
        self.assertEqual(len(again), 1)

    def test_disk_slow_names_the_neighbour(self):
        # The same slow loop1, while a backup service's cgroup read it at 180 MB/s (2 MB/s before):
        # the verdict stays disk-slow loop1, and says who else it was serving.
        found = self.incidents("disk-slow-neighbour")
        self.assertEqual([(f["class"], f["device"]) for f in found], [("disk-slow", "loop1")])
        ev = {e["signal"]: e for e in found[0]["evidence"]}
        n = ev["neighbour_bytes_per_s loop1 /system.slice/backup.service"]
        self.assertEqual((n["baseline"], n["during"], n["supports"]), (2e6, 180e6, True))
        text = self.sw("report", "--db", self.db)
        self.assertIn("loop1 was also serving /system.slice/backup.service at 180.0 MB/s (before: 2.0 MB/s)", text)
        # Without a neighbour recorded, nothing is said of one.
        os.remove(self.db)
        found = self.incidents("disk-slow")
        self.assertFalse([e for e in found[0]["evidence"] if e["signal"].startswith("neighbour")])
        self.assertNotIn("was also serving", self.sw("report", "--db", self.db))

    def test_io_throttled(self):
        found = self.incidents("io-throttled")
        self.assertEqual([i["class"] for i in found], ["io-throttled"])
        self.assertIsNone(found[0]["device"])
        self.assert_window(found[0])

    def test_not_storage(self):
        found = self.incidents("not-storage")
        self.assertEqual([i["class"] for i in found], ["not-storage"])
        self.assertIsNone(found[0]["device"])

    def test_healthy(self):
        self.assertEqual(self.incidents(None), [])
        text = self.sw("report", "--db", self.db)
        # Nothing lost to stalls: what the headline leaves out is the loop's standing wait for its
        # batches (10 % of each step in synthetic_db), said as such.
        self.assertRegex(text, r"goodput     (8\d|9\d)\.\d\d % \(lost: waiting for input outside incidents")

    def test_real_healthy_recording(self):
        """A real ResNet-18 run on an H200 (tests/gpu/job_check.sh, schema 2): no incident."""
        fixture = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "recordings",
                               "h200-resnet18-healthy.db")
        shutil.copy(fixture, self.db)
        report = swjson.loads(self.sw("report", "--db", self.db, "--json"))
        self.assertEqual(len(report), 1)
        # The job reported its steps through stallwatch.watch(): they are its progress.
        self.assertEqual(report[0]["progress_signal"], "steps")
        self.assertEqual(report[0]["incidents"], [])
        self.assertEqual([(d["device"], d["via"]) for d in report[0]["devices"]],
                         [("loop0", ""), ("vda", "loop0")])
        # --recompute migrates the old file to the current schema and finds nothing either.
        self.assertEqual(swjson.loads(self.sw("incidents", "--db", self.db, "--recompute", "--json")), [])

    def test_gaps_are_reported(self):
        """Intervals that never reached the DB (the agent stopped, or dropped what it could not
        write) are said in the report, not taken for healthy time."""
        synthetic_db.build(self.db, BIN, stall=None, stall_at=STALL_AT, stall_for=STALL_FOR)
        db = sqlite3.connect(self.db)
        t0 = db.execute("SELECT min(ts_ms) FROM job_samples").fetchone()[0]
        db.execute("DELETE FROM job_samples WHERE ts_ms > ? AND ts_ms < ?", (t0 + 100_000, t0 + 140_000))
        db.commit()
        db.close()
        report = swjson.loads(self.sw("report", "--db", self.db, "--json"))[0]
        self.assertEqual(report["gaps"], [{"start_ms": t0 + 100_000, "end_ms": t0 + 140_000, "missing_intervals": 39}])
        self.assertIn("40 s): 39 intervals missing", self.sw("report", "--db", self.db))

    def test_readers_survive_values_out_of_range(self):
        """A DB that an older agent filled from a hostile datagram (steps of INT64_MAX): jobs,
        report and incidents still read it instead of failing with 'integer overflow'."""
        fixture = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "recordings",
                               "h200-stall-disk.db")
        shutil.copy(fixture, self.db)
        db = sqlite3.connect(self.db)
        db.execute("UPDATE job_samples SET steps = 9223372036854775807 "
                   "WHERE rowid IN (SELECT rowid FROM job_samples LIMIT 2)")
        db.commit()
        db.close()
        for command in (["jobs"], ["report"], ["incidents", "--recompute"]):
            r = subprocess.run([BIN, *command, "--db", self.db], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, f"{command}: {r.stderr}")

    def test_bad_arguments(self):
        r = subprocess.run([BIN, "report", "--db", self.db, "--since", "yesterday-ish"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn("--since", r.stderr)
        r = subprocess.run([BIN, "report", "--db", os.path.join(self.tmp, "missing.db")],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 1)
        self.assertIn("cannot read", r.stderr)

    def test_idle_at_exit_is_not_a_stall(self):
        # The last 40 s: GPUs idle, every process doing nothing, then the job exited (its
        # DataLoader workers shutting down): said as such, not an incident, not lost time.
        synthetic_db.build(self.db, BIN, stall="idle-exit", stall_at=560, stall_for=40)
        report = swjson.loads(self.sw("report", "--db", self.db, "--json"))[0]
        self.assertEqual(report["incidents"], [])
        self.assertEqual(report["goodput_lost"]["stalls_gpu_seconds"], 0)  # the idle exit costs nothing
        idle = report["idle_at_exit"]
        self.assertIsNotNone(idle)
        self.assertAlmostEqual(idle["seconds"], 40, delta=2)
        self.assertIn("idle at exit 40 s", self.sw("report", "--db", self.db))
        self.assertEqual(swjson.loads(self.sw("incidents", "--db", self.db, "--recompute", "--json")), [])

    def test_a_stall_at_the_end_with_busy_processes_stays_a_stall(self):
        # The same span at the end, but the processes keep reading: not the job winding down.
        synthetic_db.build(self.db, BIN, stall="not-storage", stall_at=560, stall_for=40)
        report = swjson.loads(self.sw("report", "--db", self.db, "--json"))[0]
        self.assertEqual(len(report["incidents"]), 1)
        self.assertIsNone(report["idle_at_exit"])

    def test_html_in_chromium(self):
        browser = chromium()
        if not browser:
            if os.environ.get("CI"):
                self.fail("chromium is not installed (scripts/install-deps.sh installs it)")
            self.skipTest("no chromium")
        synthetic_db.build(self.db, BIN, stall="disk-slow", stall_at=STALL_AT, stall_for=STALL_FOR)
        page = os.path.join(self.tmp, "report.html")
        self.sw("report", "--db", self.db, "--html", page)
        with open(page) as f:
            html = f.read()
        self.assertNotRegex(html, r"(src|href)=\"https?:", "the page must not need the network")
        flags = headless_flags(self.tmp)
        dom = subprocess.run([browser, *flags, "--dump-dom", "file://" + page],
                             capture_output=True, text=True, timeout=120)
        self.assertEqual(dom.returncode, 0, dom.stderr[-2000:])
        out = dom.stdout
        self.assertIn('data-rendered="1 timelines"', out, "the page's script did not run")
        for series in ("series-progress", "series-latency", "series-io-pressure", "series-data-wait"):
            m = re.search(rf'<path id="{series}-0"[^>]* d="([^"]*)"', out)
            self.assertIsNotNone(m, series)
            self.assertGreater(m.group(1).count("L"), 100, f"{series} has too few points")
        self.assertEqual(len(re.findall(r'<rect class="incident" data-class="disk-slow"', out)), 1)
        self.assertIn("disk-slow loop1", out)
        # Axes with gridlines and units, a page that fits the window, evidence in words (the
        # signal's own name as the tooltip).
        self.assertGreater(out.count('class="grid"'), 20)
        self.assertIn(">100 %</text>", out)
        self.assertIn('width="100%"', out)
        self.assertIn('title="await_ms loop1">loop1: await (ms):', out)
        self.assertIn("<h3>Devices the job read</h3>", out)
        # Hover and zoom: the page opened at #from=..&to=.. (a minute either side of the stall)
        # &at=.. (10 s into it), as a drag and a pointer would leave it.
        start, end = (int(x) for x in re.search(
            r'<rect class="incident" data-class="disk-slow" data-start="(\d+)" data-end="(\d+)"',
            out).groups())
        zoomed = subprocess.run(
            [browser, *flags, "--dump-dom",
             f"file://{page}#from={start - 60000}&to={end + 60000}&at={start + 10000}"],
            capture_output=True, text=True, timeout=120)
        self.assertEqual(zoomed.returncode, 0, zoomed.stderr[-2000:])
        z = zoomed.stdout
        self.assertIn(f'data-view="{start - 60000},{end + 60000}"', z)
        self.assertIn(f'data-at="{start + 10000}"', z)
        hover = re.search(r'<div class="hover">([^<]*)</div>', z).group(1)
        await_ms = float(re.search(r"await of loop1: ([0-9.]+) ms", hover).group(1))
        # The stall's latency, where the pointer is: synthetic_db draws it from 20-49 ms.
        self.assertGreaterEqual(await_ms, 20, hover)
        # Redrawn over the 150 s shown: fewer points than the 600 s page, all in the plot.
        d = re.search(r'<path id="series-latency-0"[^>]* d="([^"]*)"', z).group(1)
        xs = [float(p.split(",")[0][1:]) for p in d.split()]
        self.assertTrue(100 < len(xs) < 200, len(xs))
        self.assertGreaterEqual(min(xs), 70)
        self.assertLessEqual(max(xs), 1080.1)
        shot = SCREENSHOT or os.path.join(self.tmp, "report.png")
        r = subprocess.run([browser, *flags, f"--screenshot={shot}", "--window-size=1200,1150",
                            "file://" + page], capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        self.assertGreater(os.path.getsize(shot), 10_000)

    def test_devices_only_recording_in_chromium(self):
        """A recording without a job (the recorder on a captured tree whose loop1 the test keeps
        reading at 3 ms a read): the report tells what the devices did, in text and in HTML."""
        browser = chromium()
        if not browser:
            if os.environ.get("CI"):
                self.fail("chromium is not installed (scripts/install-deps.sh installs it)")
            self.skipTest("no chromium")
        root = os.path.join(self.tmp, "root")
        shutil.copytree(os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures",
                                     "host-6.18-loop-stack"), root)
        stats = os.path.join(root, "proc", "diskstats")
        with open(stats) as f:
            original = f.read()
        recorder = subprocess.Popen([BIN, "record", "--root", root, "--db", self.db, "--interval",
                                     "200ms", "--duration", "3s", "--no-collector.gpu"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        step = 0
        while recorder.poll() is None:  # loop1: 10 reads costing 30 ms per step
            step += 1
            lines = []
            for line in original.splitlines():
                f = line.split()
                if f[2] == "loop1":
                    f[3], f[6] = str(int(f[3]) + 10 * step), str(int(f[6]) + 30 * step)
                lines.append(" ".join(f))
            with open(stats + ".new", "w") as out:
                out.write("\n".join(lines) + "\n")
            os.rename(stats + ".new", stats)
            time.sleep(0.02)
        self.assertEqual(recorder.returncode, 0, recorder.stderr.read())
        text = self.sw("report", "--db", self.db)
        self.assertIn("no job with samples in the range", text)
        self.assertRegex(text, r"loop1 +read 3\.00 / 3\.00 ms")
        page = os.path.join(self.tmp, "devices.html")
        self.sw("report", "--db", self.db, "--html", page)
        dom = subprocess.run([browser, *headless_flags(self.tmp), "--dump-dom", "file://" + page],
                             capture_output=True, text=True, timeout=120)
        self.assertEqual(dom.returncode, 0, dom.stderr[-2000:])
        out = dom.stdout
        self.assertIn('data-rendered="1 timelines"', out, "the page's script did not run")
        self.assertIn("<h2>The host's devices</h2>", out)
        self.assertIn(">await of loop1</text>", out)
        m = re.search(r'>await of loop1</text>.*?<path id="series-device-\d+-0"[^>]* d="([^"]*)"',
                      out, re.DOTALL)
        self.assertIsNotNone(m)
        self.assertGreater(m.group(1).count("L"), 5, "loop1's await has too few points")
        self.assertRegex(out, r"<td>loop1</td><td>3\.00 ms</td><td>3\.00 ms</td>")
        shot = (os.path.join(os.path.dirname(SCREENSHOT), "report-devices-only.png") if SCREENSHOT
                else os.path.join(self.tmp, "devices.png"))
        r = subprocess.run([browser, *headless_flags(self.tmp), f"--screenshot={shot}",
                            "--window-size=1200,900", "file://" + page],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        self.assertGreater(os.path.getsize(shot), 10_000)


if __name__ == "__main__":
    unittest.main()
