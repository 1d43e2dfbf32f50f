#!/usr/bin/env bash
# Builds the Debian package, installs it on this machine with apt-get, checks what it put
# where, starts the agent as the installed unit would (with systemd, the package's postinst
# starts the service; without it, the unit's ExecStart is run as systemd would), and removes
# the package again (purge). Root. Usage: scripts/package_test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
deb=$(scripts/package.sh)
echo "== built $deb ($(du -h "$deb" | cut -f1))"
dpkg-deb --field "$deb" Package Version Architecture Depends Recommends Installed-Size
dpkg-deb --contents "$deb" | awk '{print $6}' | grep -v '/$'
echo "== apt-get install ./$(basename "$deb")"
apt-get install -y -qq "$deb" 2>&1 | tail -3
stallwatch --version
man -w stallwatch
/usr/bin/python3 -c "import stallwatch; print('python package at', stallwatch.__file__)"  # Debian's python3
systemd-analyze verify /usr/lib/systemd/system/stallwatch.service 2>&1 | head -5 || true
unit=/usr/lib/systemd/system/stallwatch.service
exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
echo "== the unit's ExecStart: $exec_start"
if [ -d /run/systemd/system ]; then
  systemctl is-active stallwatch.service
  sleep 5
  systemctl status --no-pager stallwatch.service | head -5
else
  echo "(systemd is not running here: ExecStart run as systemd would, with /etc/default/stallwatch)"
  mkdir -p /var/lib/stallwatch /run/stallwatch
  ( set -a; . /etc/default/stallwatch; set +a; eval "exec $exec_start --duration 5s" ) 2>&1 | tail -4
fi
stallwatch jobs --db /var/lib/stallwatch/stallwatch.db >/dev/null && echo "recorded: $(sqlite3 /var/lib/stallwatch/stallwatch.db 'SELECT count(*) FROM disk_samples') disk samples in /var/lib/stallwatch/stallwatch.db"
echo "== apt-get purge stallwatch"
apt-get purge -y -qq stallwatch 2>&1 | tail -3
for f in /usr/bin/stallwatch /usr/lib/systemd/system/stallwatch.service /etc/stallwatch /etc/default/stallwatch \
         /usr/lib/python3/dist-packages/stallwatch; do
  if [ -e "$f" ]; then echo "LEFT BEHIND: $f"; exit 1; fi
done
echo "removed cleanly (recordings kept in /var/lib/stallwatch, as the package says)"
