#!/usr/bin/env python3
"""How soon the live correlator pages, over every committed recording (issue 32).

Each recording under tests/fixtures/recordings/ with a .window (the injected fault's start and
end, epoch ms) is replayed through `stallwatch replay` (the live half, batch by batch, as the
agent ran it) with OPTIONS; for each, the first `open` event is compared with the injection and
with the stall's start as the recording shows it (the first interval the correlator called
stalled: the fault's effect). Recordings of healthy runs (nothing injected) must not page.

Usage: live_latency.py STALLWATCH_BINARY [REPLAY OPTIONS...]
Prints one line a recording, then the median and maximum latency from the effect, and how many
first pages already carried the class and device their incident ended with (issue 42: a page
naming no device, corrected a second later, is two alerts for one stall).
"""
import json
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
RECORDINGS = ROOT / "tests" / "fixtures" / "recordings"
# Runs in which nothing that should page was injected: a page there is a false one.
HEALTHY = ("healthy", "neighbourcpu", "eval", "linger")


def replay(binary, db, options):
    out = subprocess.run([binary, "--log-level", "off", "replay", "--db", str(db), *options],
                         capture_output=True, text=True, check=True, timeout=300).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def main():
    binary, options = sys.argv[1], sys.argv[2:]
    effects, rows, first_right = [], [], []
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="stallwatch-latency-"))
    try:
        for db in sorted(RECORDINGS.rglob("*.db")):
            name = str(db.relative_to(RECORDINGS))[:-3]
            window = db.with_suffix(".window")
            if not window.exists():
                continue
            healthy = any(h in db.stem for h in HEALTHY)
            t_in = int(window.read_text().split()[0])
            copy = tmp / db.name
            for suffix in ("", "-wal", "-shm"):  # the recording with what its -wal holds
                if pathlib.Path(str(db) + suffix).exists():
                    shutil.copy(str(db) + suffix, str(copy) + suffix)
            events = replay(binary, copy, options)
            opens = [e for e in events if e["event"] == "open"]
            if healthy:
                rows.append(f"{name:42s} healthy: {len(opens)} page(s)"
                            + "".join(f" [{e['class']} {e['device'] or '-'}]" for e in opens))
                continue
            if not opens:
                rows.append(f"{name:42s} no page")
                continue
            e = opens[0]
            last = [x for x in events if x.get("incident_id") == e.get("incident_id")][-1]
            right = (e["class"], e["device"]) == (last["class"], last["device"])
            first_right.append(right)
            from_in = (e["ts_ms"] - t_in) / 1000
            from_effect = (e["ts_ms"] - e["start_ms"]) / 1000
            # Only storage faults are held to the 2 s (issue 32); the rest are listed.
            storage = e["class"] in ("disk-slow", "io-throttled")
            if storage:
                effects.append(from_effect)
            rows.append(f"{name:42s} {e['class']:12s} {e['device'] or '-':8s} "
                        f"page {from_in:+6.2f} s after injection, {from_effect:+5.2f} s after the "
                        f"stall began{'' if storage else '  (not a storage class)'}"
                        + ("" if right else f"; ended as {last['class']} {last['device'] or '-'}"))
    finally:
        shutil.rmtree(tmp, True)
    print("\n".join(rows))
    if effects:
        print(f"storage stalls: {len(effects)}, latency from the stall's start median "
              f"{statistics.median(effects):.2f} s, max {max(effects):.2f} s")
    print(f"first pages with their incident's final class and device: {sum(first_right)} of "
          f"{len(first_right)}")


if __name__ == "__main__":
    main()
