#!/usr/bin/env bash
# Installs stallwatch's build, test and benchmark dependencies from Debian 12's packages.
# Idempotent: packages already present are left as they are. Needs root (or sudo).
set -euo pipefail

build_deps=(
  cmake g++ pkg-config make ccache clang libfuzzer-14-dev clang-format clang-tidy
  libudev-dev libspdlog-dev libfmt-dev libsqlite3-dev libsqlitecpp-dev libcli11-dev
  libatasmart-dev libnvme-dev nlohmann-json3-dev libcurl4-openssl-dev libncurses-dev
  libjson-c-dev  # libnvme.pc requires it
  libgtest-dev libgmock-dev libbenchmark-dev
  help2man  # the man page, from --help
  libbpf-dev bpftool  # the eBPF per-I/O latency collector (built with clang, CO-RE)
)
# Tools the tests and the comparison scripts drive: the sqlite3 shell, iostat, fio, and a
# real browser for the HTML report, and Prometheus (promtool, and a server scraping the agent);
# libfuse3 for the tests' slow FUSE filesystem (tests/fuse), e2fsprogs for the loop image under
# the overlay test, tmux to drive `stallwatch top` in a terminal, PyYAML to read the
# Kubernetes manifest.
test_deps=(sqlite3 sysstat fio python3 chromium fonts-dejavu-core prometheus libfuse3-dev fuse3
           e2fsprogs tmux python3-yaml)

want=("${build_deps[@]}" "${test_deps[@]}")
if [ "${1:-}" = "--bench" ]; then want+=(prometheus-node-exporter curl); fi

missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#want[@]} packages present"
  exit 0
fi

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
