#!/bin/sh
# Slurm epilog: keeps this node's slice of the job that just ended (`stallwatch export`), so
# that one post-mortem can read every node's (docs/OPERATIONS.md, "A job across nodes").
#
# slurm.conf:  Epilog=/etc/slurm/epilog.d/*   (install this file there, mode 0755, owner root)
# It runs as root (SlurmdUser) on every node of the job, after the job, and must never fail
# the node: every error is logged and the epilog exits 0.
#
# STALLWATCH_EXPORT_DIR  where the slices go, one folder per job; a filesystem every node
#                        can write (default /var/lib/stallwatch/exports, on this node)
# STALLWATCH_DB          the agent's DB (default: the recorder's default for root)
# STALLWATCH_BIN         the stallwatch binary (default: the one on PATH)
#
# It also leaves the job's owner a summary of this node's share (goodput, what limited the job and
# what it would gain, each stall with its
# cause, the devices' latency: `stallwatch report` of the slice) as
# stallwatch-JOBID-HOST.txt in the job's directory: STALLWATCH_SUMMARY_DIR if set, else
# SLURM_JOB_WORK_DIR where slurmd passes it, else the directory of the job's StdOut as
# `scontrol show job` gives it. The file is written as the job's user (runuser), never as root
# into a directory the user controls; without SLURM_JOB_USER there is no summary.
set -u
[ -n "${SLURM_JOB_ID:-}" ] || exit 0
dir="${STALLWATCH_EXPORT_DIR:-/var/lib/stallwatch/exports}/${SLURM_JOB_ID}"
out="$dir/$(hostname -s).db"
if ! mkdir -p "$dir" 2>/dev/null; then
  logger -t stallwatch-epilog "cannot create $dir" 2>/dev/null
  exit 0
fi
chmod 0755 "$dir" 2>/dev/null
# The slice holds the job's command line and the node's disk figures: readable by root and
# the job's owner only.
if "${STALLWATCH_BIN:-stallwatch}" export ${STALLWATCH_DB:+--db "$STALLWATCH_DB"} \
    --run-id "$SLURM_JOB_ID" -o "$out" 2>"$out.log"; then
  [ -n "${SLURM_JOB_USER:-}" ] && chown "$SLURM_JOB_USER" "$out" 2>/dev/null
  rm -f "$out.log"
  summary_dir=${STALLWATCH_SUMMARY_DIR:-${SLURM_JOB_WORK_DIR:-}}
  if [ -z "$summary_dir" ] && command -v scontrol >/dev/null 2>&1; then
    stdout=$(scontrol show job "$SLURM_JOB_ID" 2>/dev/null | sed -n 's/^ *StdOut=//p' | head -1)
    [ -n "$stdout" ] && summary_dir=$(dirname "$stdout")
  fi
  if [ -n "$summary_dir" ] && [ -n "${SLURM_JOB_USER:-}" ]; then
    summary="$summary_dir/stallwatch-$SLURM_JOB_ID-$(hostname -s).txt"
    if ! "${STALLWATCH_BIN:-stallwatch}" report --db "$out" 2>&1 |
        runuser -u "$SLURM_JOB_USER" -- sh -c 'cat > "$1"' sh "$summary" 2>/dev/null; then
      logger -t stallwatch-epilog "job $SLURM_JOB_ID: cannot write $summary" 2>/dev/null
    fi
  fi
else
  logger -t stallwatch-epilog "job $SLURM_JOB_ID: $(cat "$out.log")" 2>/dev/null
fi
exit 0
