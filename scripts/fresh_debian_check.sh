#!/usr/bin/env bash
# README's first command on a fresh Debian 12, as a user would run it: a clean clone of this
# repository's HEAD inside a debootstrap'd Debian 12 (minbase: no compiler, no cmake, nothing
# of ours), then `scripts/install-deps.sh && scripts/build.sh && build/stallwatch record` as
# root, the recording stopped with Ctrl-C (SIGINT) after a few seconds. Prints each phase's
# time, the packages installed and the build's feature summary; the log is kept in the root.
#   scripts/fresh_debian_check.sh ROOTFS    (made first with: debootstrap --variant=minbase
#                                            bookworm ROOTFS http://deb.debian.org/debian)
#   scripts/fresh_debian_check.sh ROOTFS --test   and then README's test command there too
#   scripts/fresh_debian_check.sh ROOTFS --ci     and then CI's whole run (.ci/run: the test
#                                                 command, then the sanitizers), every line
#                                                 stamped with the seconds since it began: CI's
#                                                 time on a machine with no compiler cache
#   scripts/fresh_debian_check.sh ROOTFS --ci-alone  CI's whole run and nothing before it, as a
#                                                 CI machine runs it (its own install included)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
rootfs=$(realpath "${1:?usage: fresh_debian_check.sh ROOTFS [--test|--ci|--ci-alone]}")
[ -x "$rootfs/usr/bin/apt-get" ] || { echo "$rootfs is not a Debian root (debootstrap it first)" >&2; exit 2; }
rm -rf "$rootfs/src"
git clone -q --no-hardlinks "$root" "$rootfs/src"
cp /etc/resolv.conf "$rootfs/etc/resolv.conf"
# This machine's CA bundle, for a TLS-inspecting proxy between it and the npm registry (the root
# trusts only Debian's CAs: lint.k8s failed with SELF_SIGNED_CERT_IN_CHAIN). Node.js reads
# NODE_EXTRA_CA_CERTS, Python (tests/k8s/fetch_packages.py) SSL_CERT_FILE.
cp /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/host-ca-certificates.crt"
# Recursive binds: the tests need what is mounted below /sys and /dev too (the cgroup v2 tree,
# /dev/pts, /dev/shm).
# The root a mount of its own, as / is on a machine: a process in it then finds its files under a
# mount point in /proc/self/mountinfo (the jobs collector maps files to devices so).
mountpoint -q "$rootfs" || mount --bind "$rootfs" "$rootfs"
for m in proc sys dev; do
  mountpoint -q "$rootfs/$m" || mount --rbind "/$m" "$rootfs/$m"
done
trap 'for m in dev sys proc; do umount -R -l "$rootfs/$m" 2>/dev/null || true; done; umount -l "$rootfs" 2>/dev/null || true' EXIT
# A root's shell with nothing of this machine's environment but the CA bundle.
in_root=(chroot "$rootfs" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TERM=dumb
         NODE_EXTRA_CA_CERTS=/etc/host-ca-certificates.crt SSL_CERT_FILE=/etc/host-ca-certificates.crt
         bash -c)
log=$rootfs/src/fresh-install.log
mode=${2:-}
: > "$log"
if [ "$mode" != --ci-alone ]; then
  "${in_root[@]}" '
    set -euo pipefail
    cd /src
    t0=$(date +%s)
    scripts/install-deps.sh
    t1=$(date +%s)
    scripts/build.sh
    t2=$(date +%s)
    # README: "Ctrl-C stops and flushes".
    build/stallwatch record --db /tmp/fresh.db & pid=$!
    sleep 5
    kill -INT $pid
    wait $pid
    echo "fresh: install-deps $((t1 - t0)) s, build $((t2 - t1)) s, record ran 5 s and stopped with SIGINT (exit 0)"
    echo "fresh: $(dpkg-query -W -f="\${Status}\n" | grep -c "install ok installed") packages installed in all"
    echo "fresh: intervals in the DB: $(build/stallwatch jobs --db /tmp/fresh.db --json >/dev/null && echo readable)"
  ' 2>&1 | tee -a "$log"
fi
if [ "$mode" = --ci ] || [ "$mode" = --ci-alone ]; then
  "${in_root[@]}" '
    cd /src && t0=$(date +%s)
    .ci/run 2>&1 | while IFS= read -r line; do printf "%5d %s\n" $(( $(date +%s) - t0 )) "$line"; done
    rc=${PIPESTATUS[0]}
    echo "fresh: CI (.ci/run) ended with $rc in $(( $(date +%s) - t0 )) s"' 2>&1 | tee -a "$log"
elif [ "$mode" = --test ]; then
  "${in_root[@]}" '
    cd /src && t0=$(date +%s) && scripts/test.sh && echo "fresh: the test command passed in $(( $(date +%s) - t0 )) s"' 2>&1 | tee -a "$log"
fi
