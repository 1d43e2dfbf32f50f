#!/usr/bin/env bash
# Installs what building stallwatch needs from Debian 12's packages; with --dev, also what the
# test suite and CI drive (GoogleTest, clang-tidy, libFuzzer, a browser, Prometheus, fio...);
# with --bench, node_exporter and curl for the benchmarks. Idempotent: packages already present
# are left as they are. Needs root (or sudo).
#   scripts/install-deps.sh            the binary's build (README's first command)
#   scripts/install-deps.sh --dev      and the tests' (scripts/test.sh)
#   scripts/install-deps.sh --dev-build  what the tests and benchmarks need to configure and build,
#                                      the rest of --dev's can come while they build
set -euo pipefail

# The binary: compiler, CMake, and the libraries it links.
build_deps=(
  cmake ninja-build g++ pkg-config make ccache
  libudev-dev libspdlog-dev libfmt-dev libsqlite3-dev libsqlitecpp-dev libcli11-dev
  libatasmart-dev libnvme-dev nlohmann-json3-dev libcurl4-openssl-dev libncurses-dev
  libjson-c-dev libssl-dev  # libnvme.pc requires them (openssl: found by a fresh Debian 12 run)
  clang libbpf-dev bpftool  # the eBPF per-I/O latency collector (built with clang, CO-RE)
  help2man  # the man page, from --help
)
# The tests and CI: GoogleTest, the linters and fuzzer, and the tools the tests drive: the sqlite3
# shell, iostat, fio, a real browser for the HTML report, Prometheus (promtool, and a server
# scraping the agent), libfuse3 for the tests' slow FUSE filesystem (tests/fuse), e2fsprogs for
# the loop image under the overlay test, tmux to drive `stallwatch top` in a terminal, PyYAML to
# read the Kubernetes manifest, jsonschema to check every --json output against its schema, zsh
# to drive the completion it is given, setuptools, wheel and venv to build the Python wheel and
# install it where a job would, capsh (libcap2-bin) to run the agent within the systemd unit's
# capabilities (a fresh Debian 12 has none of it: the test failed there).
dev_build_deps=(libgtest-dev libgmock-dev libbenchmark-dev libfuse3-dev python3)
dev_deps=("${dev_build_deps[@]}" libfuzzer-14-dev libclang-rt-14-dev clang-format clang-tidy
          sqlite3 sysstat fio chromium fonts-dejavu-core prometheus fuse3
          e2fsprogs tmux python3-yaml python3-jsonschema zsh libcap2-bin
          python3-setuptools python3-wheel python3-venv)

want=("${build_deps[@]}")
tests_run=false
for arg in "$@"; do
  case "$arg" in
    --dev) want+=("${dev_deps[@]}"); tests_run=true ;;
    --dev-build) want+=("${dev_build_deps[@]}") ;;
    --bench) want+=("${dev_deps[@]}" prometheus-node-exporter curl); tests_run=true ;;
    *) echo "install-deps: unknown argument $arg (--dev, --dev-build, --bench)" >&2; exit 2 ;;
  esac
done

# The kustomize base's check (lint.k8s) renders with kubectl and validates with Node.js: Debian's
# packages when the machine has neither command from elsewhere (a newer kubectl, say).
if $tests_run; then
  command -v kubectl >/dev/null || want+=(kubernetes-client)
  command -v node >/dev/null || want+=(nodejs)  # not npm: tests/k8s/fetch_packages.py
fi

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
echo "install-deps: ${#missing[@]} of ${#want[@]} packages to install: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# Package lists this script fetched in the last hour are kept (scripts/test.sh installs in two
# steps). Its own stamp: the lists keep the server's times, and their folder's does not move
# where nothing changed on the server.
stamp=${XDG_CACHE_HOME:-$HOME/.cache}/stallwatch/apt-updated
if find "$stamp" -mmin -60 2>/dev/null | grep -q .; then
  echo "install-deps: package lists fetched within the hour"
else
  echo "install-deps: apt-get update"
  $sudo apt-get update -qq
  mkdir -p "$(dirname "$stamp")" && touch "$stamp" || true
fi
# One line per package as it is set up (with its dependencies), so that a long install shows
# where it is; apt's own messages go to the log.
log=$(mktemp /tmp/stallwatch-install-deps.XXXXXX.log)
n=0
$sudo apt-get install -y --no-install-recommends "${missing[@]}" 2>&1 | tee "$log" |
  while IFS= read -r line; do
    case "$line" in
      "Setting up "*) n=$((n + 1)); echo "install-deps: [$n] ${line#Setting up }" ;;
    esac
  done
status=${PIPESTATUS[0]}
if [ "$status" -ne 0 ]; then
  tail -20 "$log" >&2
  echo "install-deps: apt-get failed (the whole log: $log)" >&2
  exit "$status"
fi
rm -f "$log"
echo "install-deps: done"
