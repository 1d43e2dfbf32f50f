#!/usr/bin/env bash
# Makes a dataset on its own block device: an image file attached as a loop device with
# direct I/O, ext4 on it, mounted at MOUNT, filled with FILES files of raw image bytes.
# Prints the loop device. Usage: make_dataset.sh IMAGE MOUNT FILES   (root)
set -euo pipefail
image=${1:?}; mount_point=${2:?}; files=${3:?}
size_mb=$(( files * 40 / 1000 + 64 ))   # 37632 bytes per file, ext4 overhead
truncate -s "${size_mb}M" "$image"
loop=$(losetup -f --show --direct-io=on "$image")
mkfs.ext4 -q -F "$loop"
mkdir -p "$mount_point"
mount "$loop" "$mount_point"
mkdir -p "$mount_point/train"
python3 - "$mount_point/train" "$files" <<'PY'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
block = os.urandom(3 * 112 * 112)
for i in range(n):
    with open(os.path.join(root, f"{i:06d}.bin"), "wb") as f:
        f.write(block[i % 97:] + block[:i % 97])
PY
sync
echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true
echo "$loop"
