#!/bin/sh
# Slurm TaskProlog: every task of every job reports its DataLoaders' waits and steps to the
# node's stallwatch agent with no change to the training script (docs/DATALOADER.md, "No code
# change"), as `stallwatch run --` does for one command. slurmd reads the lines this prints that
# begin with "export" into the task's environment.
#
# slurm.conf:  TaskProlog=/usr/share/stallwatch/slurm/task-prolog.sh
# A job opts out with STALLWATCH_AUTO=0 in its own environment (sbatch --export=...,STALLWATCH_AUTO=0).
# STALLWATCH_BOOTSTRAP: the package's stallwatch/_bootstrap folder (default: where the .deb puts it).
bootstrap=${STALLWATCH_BOOTSTRAP:-/usr/lib/python3/dist-packages/stallwatch/_bootstrap}
[ "${STALLWATCH_AUTO:-1}" = 0 ] && exit 0
[ -f "$bootstrap/sitecustomize.py" ] || exit 0
echo "export STALLWATCH_AUTO=1"
echo "export PYTHONPATH=$bootstrap${PYTHONPATH:+:$PYTHONPATH}"
exit 0
