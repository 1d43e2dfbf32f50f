#!/usr/bin/env python3
"""The live agent and the post-mortem must make the same claim about the same stall.

For every committed recording, the incidents the live correlator closes when the recording
is replayed (`stallwatch replay`, the agent's live path) are matched with those
`incidents --recompute` finds (the post-mortem path) by time overlap. Each matched pair must
agree on class, device, straggler rank and evidence: the same signals in the same order, the
same ones supporting the verdict, and the same values (to a relative 1e-9: the live incident
is judged on the tail it saw, the post-mortem on the whole recording, and both must come to
the same medians).

The live correlator opens an incident after 3 s of stall, the post-mortem reports from 5 s:
a live incident shorter than 5 s has no post-mortem twin and is skipped (counted); every
post-mortem incident must have a live twin.

Usage: live_vs_recompute.py STALLWATCH_BINARY
"""
import json
import pathlib
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
RECORDINGS = ROOT / "tests" / "fixtures" / "recordings"


def run(argv):
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, check=True).stdout


def live_incidents(binary, db):
    last = {}
    for line in run([binary, "--log-level", "off", "replay", "--db", str(db)]).splitlines():
        e = json.loads(line)
        last[e["incident_id"]] = e
    return [e for e in last.values() if e["event"] == "close"]


WORST = [0.0, ""]  # the largest relative difference seen, and where


def close(a, b, where=""):
    scale = max(abs(a), abs(b))
    if scale > 0.05 and abs(a - b) / scale > WORST[0]:
        WORST[:] = [abs(a - b) / scale, where]
    return abs(a - b) <= 1e-9 * max(1.0, scale)


def compare(live, post):
    problems = []
    for key in ("class", "device"):
        if (live.get(key) or None) != (post.get(key) or None):  # the hook payload says "" for none
            problems.append(f"{key}: live {live.get(key)!r}, post-mortem {post.get(key)!r}")
    live_rank = (live.get("straggler") or {}).get("rank")
    post_rank = (post.get("straggler") or {}).get("rank")
    if live_rank != post_rank:
        problems.append(f"straggler rank: live {live_rank}, post-mortem {post_rank}")
    ls = [(e["signal"], e["supports"]) for e in live["evidence"]]
    ps = [(e["signal"], e["supports"]) for e in post["evidence"]]
    if ls != ps:
        only_live = [x for x in ls if x not in ps]
        only_post = [x for x in ps if x not in ls]
        problems.append(f"evidence differs: only live {only_live}, only post-mortem {only_post}"
                        + ("" if only_live or only_post else f"; order: live {ls}, post-mortem {ps}"))
    else:
        for le, pe in zip(live["evidence"], post["evidence"]):
            for k in ("baseline", "during"):
                if not close(le[k], pe[k], f"{le['signal']} {k}"):
                    problems.append(f"{le['signal']} {k}: live {le[k]:.4g}, post-mortem {pe[k]:.4g}")
    return problems


def main():
    binary = sys.argv[1]
    failed, pairs, skipped = [], 0, 0
    with tempfile.TemporaryDirectory() as scratch:
        # The top-level recordings and the cgroup runs. The other folders hold runs whose live
        # side differs from the post-mortem by design (a job's idle end or hang held live, a
        # device found only once its files were seen: tests/fixtures/README.md).
        for db in sorted([*RECORDINGS.glob("*.db"), *(RECORDINGS / "h100-cgroup").glob("*.db")]):
            for extra in ("", "-wal", "-shm"):
                src = db.with_name(db.name + extra)
                if src.exists():
                    shutil.copy(src, pathlib.Path(scratch) / src.name)
            copy = pathlib.Path(scratch) / db.name
            live = live_incidents(binary, copy)
            post = json.loads(run([binary, "--log-level", "off", "incidents", "--recompute", "--json", "--db", str(copy)]))["incidents"]
            # The recording may hold the incidents its agent found live, too: the post-mortem's only.
            post = [p for p in post if p["source"] == "post-mortem"]
            for p in post:
                twins = [l for l in live if l["start_ms"] < p["end_ms"] and p["start_ms"] < l["end_ms"]]
                if not twins:
                    failed.append(f"{db.name}: post-mortem incident {p['start_ms']}..{p['end_ms']} {p['class']} "
                                  "has no live twin")
                    continue
                pairs += 1
                for problem in compare(twins[0], p):
                    failed.append(f"{db.name} incident at {p['start_ms']}: {problem}")
            for l in live:
                if not any(l["start_ms"] < p["end_ms"] and p["start_ms"] < l["end_ms"] for p in post):
                    if l["end_ms"] - l["start_ms"] < 5000:
                        skipped += 1
                    else:
                        failed.append(f"{db.name}: live incident {l['start_ms']}..{l['end_ms']} {l['class']} "
                                      "has no post-mortem twin")
    for f in failed:
        print("FAIL " + f, file=sys.stderr)
    print(f"{pairs} incidents compared, {skipped} live blips under 5 s skipped, {len(failed)} differences; "
          f"largest relative difference of an evidence value {WORST[0]:.1%} ({WORST[1] or '-'})")
    return 1 if failed or pairs == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
