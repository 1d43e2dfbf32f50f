#!/usr/bin/env python3
"""Installs the packages pinned in package-lock.json into WORK_DIR/node_modules, as `npm ci`
would for this lock (no install scripts, no bins: validate.mjs only imports them), without npm:
Debian's npm is 349 packages a fresh Debian 12 would install for this one check.

Each tarball comes from the registry by its name and version and must match the lock's sha512
integrity before anything of it is written. A second run with the same lock does nothing.
Usage: fetch_packages.py LOCK_FILE WORK_DIR
"""
import base64
import concurrent.futures
import hashlib
import io
import json
import os
import shutil
import sys
import tarfile
import urllib.request

REGISTRY = os.environ.get("NPM_CONFIG_REGISTRY", "https://registry.npmjs.org").rstrip("/")
STAMP = ".package-lock.json.copy"


def tarball_url(name, version):
    base = name.rsplit("/", 1)[-1]  # @scope/pkg's tarball is named pkg-VERSION.tgz
    return f"{REGISTRY}/{name}/-/{base}-{version}.tgz"


def check_integrity(data, integrity, what):
    algo, _, want = integrity.partition("-")
    if algo not in ("sha512", "sha384", "sha256"):
        raise SystemExit(f"fetch_packages: {what}: unsupported integrity {algo!r}")
    got = base64.b64encode(hashlib.new(algo, data).digest()).decode()
    if got != want:
        raise SystemExit(f"fetch_packages: {what}: integrity mismatch (lock {integrity[:24]}..., got {algo}-{got[:16]}...)")


def extract(data, dest):
    """The tarball's files under dest, its first path component (npm's `package/`) dropped.
    Only regular files and folders; a member leaving dest fails the run."""
    root = os.path.realpath(dest)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        for member in tar.getmembers():
            parts = member.name.replace("\\", "/").split("/")[1:]
            if not parts or not (member.isfile() or member.isdir()):
                continue
            target = os.path.realpath(os.path.join(root, *parts))
            if os.path.commonpath([root, target]) != root:
                raise SystemExit(f"fetch_packages: {member.name!r} would land outside {dest}")
            if member.isdir():
                os.makedirs(target, exist_ok=True)
                continue
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with tar.extractfile(member) as src, open(target, "wb") as out:
                shutil.copyfileobj(src, out)


def fetch(path, entry):
    name = entry.get("name") or path.rsplit("node_modules/", 1)[-1]
    url = entry.get("resolved") or tarball_url(name, entry["version"])
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            data = response.read()
    except OSError as e:  # URLError, a timeout, a reset
        raise SystemExit(f"fetch_packages: {url}: {e}")
    check_integrity(data, entry["integrity"], f"{name}@{entry['version']}")
    return path, data


def main():
    if len(sys.argv) != 3:
        raise SystemExit("usage: fetch_packages.py LOCK_FILE WORK_DIR")
    lock_file, work = sys.argv[1], sys.argv[2]
    lock_bytes = open(lock_file, "rb").read()
    stamp = os.path.join(work, "node_modules", STAMP)
    if os.path.exists(stamp) and open(stamp, "rb").read() == lock_bytes:
        return
    packages = {p: e for p, e in json.loads(lock_bytes)["packages"].items()
                if p.startswith("node_modules/") and not e.get("link")}
    missing = [p for p, e in packages.items() if "integrity" not in e or "version" not in e]
    if missing:
        raise SystemExit(f"fetch_packages: no version or integrity in the lock for {missing}")
    shutil.rmtree(os.path.join(work, "node_modules"), ignore_errors=True)
    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        for path, data in pool.map(lambda item: fetch(*item), packages.items()):
            extract(data, os.path.join(work, path))
    with open(stamp, "wb") as out:
        out.write(lock_bytes)
    print(f"fetch_packages: {len(packages)} packages from {REGISTRY}")


if __name__ == "__main__":
    main()
