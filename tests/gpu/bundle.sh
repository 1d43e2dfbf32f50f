#!/usr/bin/env bash
# Builds what the GPU host runs: a stripped Release stallwatch and nvml_call_bench, with the
# shared libraries they need that the host's image lacks (it has no Debian packages), in DIR
# (default .carry, which git ignores). On the GPU host: DIR/sw (stallwatch with DIR/lib).
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:-.carry}
build=${BUILD_DIR:-build-gpu}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DSTALLWATCH_WERROR=OFF -DSTALLWATCH_TESTS=OFF -DSTALLWATCH_BENCH=ON >/dev/null
cmake --build "$build" -j"$(nproc)" --target stallwatch nvml_call_bench jobs_collector_bench
rm -rf "$dir"; mkdir -p "$dir/lib"
cp "$build/stallwatch" "$build/bench/nvml_call_bench" "$build/bench/jobs_collector_bench" "$dir/"
strip "$dir/stallwatch" "$dir/nvml_call_bench" "$dir/jobs_collector_bench"
# Every library but the C runtime itself, which the host has in a newer version.
for lib in $(ldd "$dir/stallwatch" "$dir/nvml_call_bench" "$dir/jobs_collector_bench" | awk '/=> \// {print $3}' | sort -u); do
  case $(basename "$lib") in
    libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|ld-linux*) ;;
    *) cp -L "$lib" "$dir/lib/" ;;
  esac
done
# swslowfs, the tests' slow FUSE filesystem, linked statically: the host has no libfuse3.
g++ -O2 -std=c++20 -static -o "$dir/swslowfs" tests/fuse/swslowfs.cpp $(pkg-config --cflags fuse3) \
  -lfuse3 -lpthread -ldl 2>/dev/null
strip "$dir/swslowfs"
du -sh "$dir"
# A wrapper that gives only stallwatch the carried libraries: PyTorch on the host needs its
# own, newer libstdc++.
cat > "$dir/sw" <<'SH'
#!/bin/sh
here=$(dirname "$(readlink -f "$0")")
LD_LIBRARY_PATH="$here/lib" exec "$here/stallwatch" "$@"
SH
chmod +x "$dir/sw"
