#!/usr/bin/env python3
"""Makes the two files of the kustomize base (deploy/kubernetes/base) that repeat others:
prometheusrule.yaml, the alerting and fleet rules of deploy/prometheus as a PrometheusRule, and
stallwatch-dashboard.json, deploy/grafana's dashboard (kustomize reads files only below the
kustomization). The rules files stay the source: promtool tests them.

Usage: scripts/k8s_base.py          write them
       scripts/k8s_base.py --check  fail if they differ from what would be written (CI)
"""
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
BASE = ROOT / "deploy" / "kubernetes" / "base"
RULES = [ROOT / "deploy" / "prometheus" / n for n in ("stallwatch.rules.yml", "stallwatch-fleet.rules.yml")]
DASHBOARD = ROOT / "deploy" / "grafana" / "stallwatch-dashboard.json"


def prometheus_rule() -> str:
    groups = []
    for f in RULES:
        groups += yaml.safe_load(f.read_text())["groups"]
    rule = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": "stallwatch", "labels": {"app.kubernetes.io/name": "stallwatch"}},
        "spec": {"groups": groups},
    }
    header = ("# Made by scripts/k8s_base.py from " + ", ".join(str(f.relative_to(ROOT)) for f in RULES)
              + ": edit those and run it.\n# kube-prometheus-stack selects rules by its release label "
              "unless ruleSelectorNilUsesHelmValues is false:\n# add `release: <your release>` in an overlay.\n")
    return header + yaml.safe_dump(rule, sort_keys=False, width=100, allow_unicode=True)


def wanted() -> dict:
    return {BASE / "prometheusrule.yaml": prometheus_rule(), BASE / "stallwatch-dashboard.json": DASHBOARD.read_text()}


def main() -> int:
    check = "--check" in sys.argv[1:]
    stale = []
    for path, text in wanted().items():
        if check:
            if not path.exists() or path.read_text() != text:
                stale.append(str(path.relative_to(ROOT)))
        else:
            path.write_text(text)
    if stale:
        print("out of date (run scripts/k8s_base.py): " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
