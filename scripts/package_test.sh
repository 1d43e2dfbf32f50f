#!/usr/bin/env bash
# Builds the Debian package, installs it on this machine with apt-get, checks what it put
# where, starts the agent as the installed unit would (with systemd, the package's postinst
# starts the service; without it, the unit's ExecStart is run as systemd would), and removes
# the package again (purge). Root. Usage: scripts/package_test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
deb=$(scripts/package.sh | grep '\.deb$')
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
  ( set -a; . /etc/default/stallwatch; set +a; eval "exec $exec_start --duration 40s" ) > /tmp/stallwatch-package-agent.log 2>&1 &
  agent=$!
  # A real Prometheus scraping the packaged agent as installed: no listen override, port 9877.
  if command -v prometheus >/dev/null; then
    prom=$(mktemp -d)
    printf 'global: {scrape_interval: 2s}\nscrape_configs:\n  - job_name: stallwatch\n    static_configs: [{targets: ["%s:9877"]}]\n' \
      "$(hostname -I | awk '{print $1}')" > "$prom/prometheus.yml"
    prometheus --config.file="$prom/prometheus.yml" --storage.tsdb.path="$prom/data" \
      --web.listen-address=127.0.0.1:19090 > "$prom/log" 2>&1 &
    pid_prom=$!
    up=""
    for _ in $(seq 30); do
      sleep 1
      up=$(curl -s 'http://127.0.0.1:19090/api/v1/query?query=up' | python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "")' 2>/dev/null || true)
      [ "$up" = 1 ] && break
    done
    echo "== Prometheus scraping the packaged agent on $(hostname -I | awk '{print $1}'):9877 (not loopback): up=$up"
    for q in stallwatch_build_info process_cpu_seconds_total process_resident_memory_bytes process_open_fds process_start_time_seconds; do
      echo "  $q: $(curl -s "http://127.0.0.1:19090/api/v1/query?query=$q" | python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(", ".join(str(x["metric"].get("revision", x["value"][1])) for x in r) or "absent")')"
    done
    kill "$pid_prom"; wait "$pid_prom" 2>/dev/null || true
    rm -rf "$prom"
    [ "$up" = 1 ] || { echo "Prometheus could not scrape the agent"; exit 1; }
  fi
  if command -v promtool >/dev/null; then
    curl -s http://127.0.0.1:9877/metrics | promtool check metrics && echo "== promtool check metrics: clean"
  fi
  # The job's owner reads the node's recording without root: a member of the stallwatch group
  # can, anyone else is told which group to join.
  id sw-member >/dev/null 2>&1 || useradd --no-create-home --groups stallwatch sw-member
  id sw-other >/dev/null 2>&1 || useradd --no-create-home sw-other
  sleep 3
  for cmd in "jobs" "report" "top --once"; do
    runuser -u sw-member -- stallwatch $cmd >/dev/null && echo "== as sw-member (group stallwatch): stallwatch $cmd works"
  done
  { runuser -u sw-other -- stallwatch jobs 2>&1 || true; } | tail -1 | sed 's/^/== as sw-other: /'
  userdel sw-member; userdel sw-other
  wait "$agent" || true
  tail -3 /tmp/stallwatch-package-agent.log
fi
stallwatch jobs --db /var/lib/stallwatch/stallwatch.db >/dev/null && echo "recorded: $(sqlite3 /var/lib/stallwatch/stallwatch.db 'SELECT count(*) FROM disk_samples') disk samples in /var/lib/stallwatch/stallwatch.db"
echo "== apt-get purge stallwatch"
apt-get purge -y -qq stallwatch 2>&1 | tail -3
for f in /usr/bin/stallwatch /usr/lib/systemd/system/stallwatch.service /etc/stallwatch /etc/default/stallwatch \
         /usr/lib/python3/dist-packages/stallwatch; do
  if [ -e "$f" ]; then echo "LEFT BEHIND: $f"; exit 1; fi
done
echo "removed cleanly (recordings kept in /var/lib/stallwatch, as the package says)"
