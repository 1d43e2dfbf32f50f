#!/usr/bin/env bash
# The kustomize base as operators apply it (lint.k8s): its generated files up to date, rendered
# offline by kubectl's kustomize, every document checked against the Kubernetes and Prometheus
# Operator schemas (validate.mjs), and the scrape's port the container's.
# Usage: tests/k8s/check.sh WORK_DIR   (the schemas' npm packages are installed there)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
work=${1:?usage: check.sh WORK_DIR}
mkdir -p "$work"
python3 "$root/scripts/k8s_base.py" --check
command -v kubectl >/dev/null || { echo "lint.k8s: kubectl is not installed (scripts/install-deps.sh --dev)" >&2; exit 1; }
command -v node >/dev/null || { echo "lint.k8s: node is not installed (scripts/install-deps.sh --dev)" >&2; exit 1; }
cp "$root/tests/k8s/validate.mjs" "$work/"
# The pinned versions of package-lock.json, checked against its hashes, once: a later run finds
# them there. Not npm: 349 Debian packages on a fresh Debian 12 for these 29.
python3 "$root/tests/k8s/fetch_packages.py" "$root/tests/k8s/package-lock.json" "$work"
kubectl kustomize "$root/deploy/kubernetes/base" > "$work/rendered.yaml"
node "$work/validate.mjs" < "$work/rendered.yaml"
python3 - "$work/rendered.yaml" <<'PY'
import sys, yaml
docs = {d["kind"]: d for d in yaml.safe_load_all(open(sys.argv[1])) if d}
want = {"Namespace", "DaemonSet", "PodMonitor", "PrometheusRule", "ConfigMap"}
assert want <= docs.keys(), f"missing kinds: {want - docs.keys()}"
ds, pm = docs["DaemonSet"], docs["PodMonitor"]
ports = {p["name"]: p["containerPort"] for c in ds["spec"]["template"]["spec"]["containers"] for p in c.get("ports", [])}
endpoint = pm["spec"]["podMetricsEndpoints"][0]
assert endpoint["port"] in ports, f"the PodMonitor scrapes port {endpoint['port']!r}, the DaemonSet has {ports}"
assert ports[endpoint["port"]] == 9877, ports
labels = ds["spec"]["template"]["metadata"]["labels"]
assert all(labels.get(k) == v for k, v in pm["spec"]["selector"]["matchLabels"].items()), "the PodMonitor selects no agent"
assert endpoint.get("honorLabels") is True, "without honorLabels a job's pod labels become exported_pod"
args = ds["spec"]["template"]["spec"]["containers"][0]["args"]
assert args[args.index("--listen") + 1] == ":9877", args
groups = docs["PrometheusRule"]["spec"]["groups"]
print(f"lint.k8s: {len(docs)} kinds, {sum(len(g['rules']) for g in groups)} rules, port 9877 scraped with honorLabels")
PY
