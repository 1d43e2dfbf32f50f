// Checks Kubernetes manifests (YAML on stdin, as `kubectl kustomize` prints them) against the
// schemas of the Kubernetes API (kubernetes-models, made from its OpenAPI definitions) and of
// the Prometheus Operator's resources. Every document must be of a known kind and valid: a
// wrong type, a value outside an enum or a missing required field fails with the path to it.
// Not caught: a field the schema does not know (the Kubernetes schemas leave objects open, as
// kubectl's client-side check does without a server).
// Usage: kubectl kustomize deploy/kubernetes/base | node tests/k8s/validate.mjs
import { readFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";

// The package that holds an apiVersion's models: the core group is "v1".
function modulesOf(apiVersion) {
  if (apiVersion === "monitoring.coreos.com/v1")
    return "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1";
  return `kubernetes-models/${apiVersion}`;
}

const text = readFileSync(0, "utf8");
const docs = parseAllDocuments(text).map((d) => d.toJS()).filter((d) => d);
let failures = 0;
const kinds = [];
for (const doc of docs) {
  const name = `${doc.kind}/${doc.metadata?.name}`;
  let Model;
  try {
    Model = (await import(modulesOf(doc.apiVersion)))[doc.kind];
  } catch (e) {
    Model = undefined;
  }
  if (!Model) {
    console.error(`${name}: no schema for ${doc.apiVersion} ${doc.kind}`);
    failures++;
    continue;
  }
  try {
    new Model(doc).validate();
  } catch (e) {
    console.error(`${name}: ${e.message}`);
    failures++;
    continue;
  }
  kinds.push(`${doc.apiVersion} ${name}`);
}
if (docs.length === 0) {
  console.error("no documents on stdin");
  process.exit(2);
}
for (const k of kinds) console.log(`valid: ${k}`);
process.exit(failures ? 1 : 0);
