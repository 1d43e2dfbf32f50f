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
else
  logger -t stallwatch-epilog "job $SLURM_JOB_ID: $(cat "$out.log")" 2>/dev/null
fi
exit 0
