"""One answer to one question (issue 42): over every committed recording, `incidents`, `report`
(text and JSON), `jobs` and the live side replayed (its pages and its /metrics) give the same
incidents (count, class, device, GPU-seconds lost) and the same limiter for each job, and the
goodput headline is what it says was lost.

Usage: python3 -m unittest test_one_answer   (STALLWATCH_BIN names the binary)
       python3 test_one_answer.py --count BIN   (prints the disagreements, for a note)"""
import glob
import json
import swjson
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

BIN = os.environ.get("STALLWATCH_BIN", "../build/stallwatch")
RECORDINGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "recordings")


def recordings():
    """Every committed recording; with STALLWATCH_RECORDINGS_STRIDE=N every Nth (the sanitizer
    pass, where each costs several times more and the code paths repeat: scripts/sanitize.sh)."""
    every = sorted(glob.glob(os.path.join(RECORDINGS, "**", "*.db"), recursive=True))
    return every[::max(1, int(os.environ.get("STALLWATCH_RECORDINGS_STRIDE", "1")))]


def copied(db, tmp):
    """The recording copied with what its -wal holds (the commands may write to it)."""
    copy = os.path.join(tmp, "r.db")
    for f in glob.glob(copy + "*"):
        os.remove(f)
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(db + suffix):
            shutil.copy(db + suffix, copy + suffix)
    return copy


def metrics_page(text):
    """{(name, frozenset(labels)): value} of a Prometheus text page."""
    out = {}
    for line in text.splitlines():
        m = re.match(r'^([a-z_]+)(?:\{(.*)\})? (\S+)$', line)
        if m:
            labels = frozenset(re.findall(r'([a-z_]+)="([^"]*)"', m.group(2) or ""))
            out[(m.group(1), labels)] = float(m.group(3))
    return out


def disagreements(binary, db, tmp):
    """Where one question gets two answers on one recording: incidents (count, class, device,
    GPU-seconds lost) between `incidents`, `report` (JSON and text) and the live side replayed
    (its events and its /metrics page); the limiter between `jobs` and `report`; the goodput
    headline against what it says was lost."""
    copy = copied(db, tmp)

    def run(*args, json_out=True):
        r = subprocess.run([binary, "--log-level", "off", *args, "--db", copy] + (["--json"] if json_out else []),
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            return None
        return swjson.loads(r.stdout) if json_out else r.stdout

    report, incidents, jobs = run("report"), run("incidents"), run("jobs")
    text = run("report", json_out=False)
    page_file = os.path.join(tmp, "metrics.txt")
    replayed = run("replay", "--metrics-file", page_file, json_out=False)
    if None in (report, incidents, jobs, text, replayed):
        return ["unreadable"]
    key = lambda i: (i["class"], i["device"], round(i["gpu_seconds_lost"], 6))  # noqa: E731
    out = []
    for job in report:
        said = sorted(key(i) for i in job["incidents"])
        listed = sorted(key(i) for i in incidents if i["job_id"] == job["job_id"])
        if said != listed:
            out.append(f"job {job['job_id']}: report {said} against incidents {listed}")
        # The limiter `jobs` gives is the report's.
        listing = [j for j in jobs if j["job_id"] == job["job_id"]]
        if listing and listing[0]["limiter"] and job["limiter"]:
            a, b = listing[0]["limiter"], job["limiter"]
            if (a["limiter"], round(a["input_wait_share"], 6)) != (b["limiter"], round(b["input_wait_share"], 6)):
                out.append(f"job {job['job_id']}: jobs says {a['limiter']} {a['input_wait_share']:.3f}, "
                           f"report {b['limiter']} {b['input_wait_share']:.3f}")
        # The headline is what it says was lost, of the GPU time (or time) there was.
        if job["goodput"] is not None:
            lost = job["goodput_lost"]
            capacity = job["gpu_seconds_total"]
            if job["gpu_seconds_total"] > 0:
                want = 1 - (lost["stalls_gpu_seconds"] + lost["input_wait_gpu_seconds"]) / capacity
                if abs(max(0.0, want) - job["goodput"]) > 1e-9:
                    out.append(f"job {job['job_id']}: goodput {job['goodput']} is not 1 - lost ({want})")
            stalls = sum(i["gpu_seconds_lost"] for i in job["incidents"])
            if job["gpu_seconds_total"] > 0 and abs(stalls - lost["stalls_gpu_seconds"]) > 1e-6:
                out.append(f"job {job['job_id']}: stalls lost {lost['stalls_gpu_seconds']} against "
                           f"the incidents' {stalls}")
    # The text says what the JSON says.
    for job in report:
        block = text.split(f"job {job['job_id']}  ", 1)[-1]
        m = re.search(r"  incidents   (\d+)", block)
        if not m or int(m.group(1)) != len(job["incidents"]):
            out.append(f"job {job['job_id']}: text incidents {m and m.group(1)} against JSON {len(job['incidents'])}")
        g = re.search(r"  goodput     ([0-9.]+) %", block)
        if job["goodput"] is not None and (not g or g.group(1) != f"{job['goodput'] * 100:.2f}"):
            out.append(f"job {job['job_id']}: text goodput {g and g.group(1)} against JSON {job['goodput']}")
    # The live side: what was paged (its events, each incident as it closed) and what /metrics
    # counted. The same incidents, class and device; the GPU-seconds lost per second of the stall
    # (the live side cannot judge a stall before its baseline is warm: it may start later).
    events = [json.loads(line) for line in replayed.splitlines() if line.startswith("{")]
    final = {}
    for e in events:
        final[(e["job"]["key"], e["incident_id"])] = e
    live = sorted(final.values(), key=lambda e: (e["class"], e["device"] or "", e["start_ms"]))
    post = sorted((i for j in report for i in j["incidents"]),
                  key=lambda i: (i["class"], i["device"] or "", i["start_ms"]))
    if [(e["class"], e["device"] or "") for e in live] != [(i["class"], i["device"] or "") for i in post]:
        out.append(f"live {[(e['class'], e['device']) for e in live]} against "
                   f"post-mortem {[(i['class'], i['device']) for i in post]}")
    else:
        for e, i in zip(live, post):
            per_s = lambda x: x["gpu_seconds_lost"] / max(1.0, (x["end_ms"] - x["start_ms"]) / 1000)  # noqa: E731
            if abs(per_s(e) - per_s(i)) > max(0.05, 0.1 * per_s(i)):
                out.append(f"{i['class']} {i['device']}: live {e['gpu_seconds_lost']:.1f} GPU-s over "
                           f"{e['duration_seconds']:.0f} s against {i['gpu_seconds_lost']:.1f}")
    with open(page_file) as f:
        page = metrics_page(f.read())
    for cls in {i["class"] for i in post} | {"disk-slow", "not-storage"}:
        count = page.get(("stallwatch_incidents_total", frozenset({("class", cls)})))
        lost = page.get(("stallwatch_gpu_seconds_lost_total", frozenset({("class", cls)})))
        want = [e for e in live if e["class"] == cls]
        if count != len([i for i in post if i["class"] == cls]) or \
                abs(lost - sum(e["gpu_seconds_lost"] for e in want)) > 1e-6:
            out.append(f"/metrics {cls}: {count} incidents, {lost} GPU-s")
    return out


def run_disagreements(binary, folder, tmp):
    """A run across nodes (a folder of node recordings): the text's goodput says lost GPU-s by
    the same classes, and as many, as its stalls list (the JSON's incidents)."""
    copy = os.path.join(tmp, "run")
    shutil.rmtree(copy, True)
    shutil.copytree(folder, copy)
    text = subprocess.run([binary, "report", "--db", copy], capture_output=True, text=True)
    data = subprocess.run([binary, "report", "--db", copy, "--json"], capture_output=True, text=True)
    if text.returncode or data.returncode:
        return [f"exit {text.returncode}/{data.returncode}: {text.stderr[-300:]}"]
    out = []
    for run, block in zip(swjson.loads(data.stdout)["runs"], text.stdout.split("\nrun ")[0:]):
        want = {}
        for inc in run["incidents"]:
            want[inc["class"]] = want.get(inc["class"], 0) + inc["gpu_seconds_lost"]
        line = next((l for l in block.splitlines() if l.strip().startswith("goodput")), "")
        said = {c: float(v) for c, v in re.findall(r"([a-z-]+) ([0-9.]+) GPU-s", line.split(";")[0])}
        said.pop("stalls", None)
        if set(said) != {c for c, v in want.items() if round(v, 1) > 0} or \
                any(abs(said[c] - want[c]) > 0.06 for c in said):
            out.append(f"{run['run']}: goodput says {said}, the stalls {want}")
    return out


def runs_across_nodes():
    """The committed recordings of runs across nodes: folders of two or more node files."""
    return sorted(d for d in glob.glob(os.path.join(RECORDINGS, "*"))
                  if len(glob.glob(os.path.join(d, "node*.db"))) >= 2)


class OneAnswer(unittest.TestCase):
    def test_a_run_across_nodes_loses_gpu_seconds_to_the_class_its_stalls_say(self):
        tmp = tempfile.mkdtemp(prefix="stallwatch-one-answer-")
        self.addCleanup(shutil.rmtree, tmp, True)
        folders = runs_across_nodes()
        self.assertGreaterEqual(len(folders), 2)
        found = {os.path.relpath(f, RECORDINGS): d for f in folders
                 if (d := run_disagreements(BIN, f, tmp))}
        self.assertEqual(found, {})

    def test_every_command_agrees_on_every_committed_recording(self):
        tmp = tempfile.mkdtemp(prefix="stallwatch-one-answer-")
        self.addCleanup(shutil.rmtree, tmp, True)
        found = {}
        for db in recordings():
            d = disagreements(BIN, db, tmp)
            if d:
                found[os.path.relpath(db, RECORDINGS)] = d
        self.assertGreater(len(recordings()) * int(os.environ.get("STALLWATCH_RECORDINGS_STRIDE", "1")), 50)
        self.assertEqual(found, {})


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--count":
        tmp = tempfile.mkdtemp()
        bad = [db for db in recordings() if disagreements(sys.argv[2], db, tmp)]
        print(f"{len(bad)} of {len(recordings())} recordings disagree")
        for db in bad:
            print("  " + os.path.relpath(db, RECORDINGS))
        shutil.rmtree(tmp, True)
    else:
        unittest.main()
