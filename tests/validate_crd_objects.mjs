// Holds Kubernetes objects of prometheus-operator's kinds to its schemas, by the validators of
// the npm package @kubernetes-models/prometheus-operator (installed by
// scripts/testsvc/crd_validators.py; tests/integration/test_deploy_kubernetes.py runs this).
//
// Usage: node tests/validate_crd_objects.mjs FOLDER < objects.json
//   FOLDER: where npm installed the package (its node_modules/ inside);
//   stdin: a JSON array of objects (apiVersion monitoring.coreos.com/...).
// Prints a JSON array, one entry an object in their order: {kind, name, errors}, each error
// "<where in the object>: <what is wrong>". Exits 0 when every object holds, 1 when one does
// not, 2 when it cannot check one (no model for its kind, bad input, a fault of its own).

import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const PACKAGE = join("node_modules", "@kubernetes-models", "prometheus-operator");

function cannot(why) {
  process.stderr.write(`validate_crd_objects: ${why}\n`);
  process.exit(2);
}

async function model(folder, apiVersion, kind) {
  const [group, version] = String(apiVersion).split("/");
  const file = join(folder, PACKAGE, group, version ?? "", `${kind}.js`);
  if (!version || !existsSync(file)) cannot(`no model of ${apiVersion} ${kind} in ${folder}`);
  const found = (await import(pathToFileURL(file).href))[kind];
  if (typeof found !== "function") cannot(`${file} exports no ${kind}`);
  return found;
}

async function main() {
  const folder = process.argv[2];
  if (!folder) cannot("usage: validate_crd_objects.mjs FOLDER < objects.json");
  let docs;
  try {
    docs = JSON.parse(readFileSync(0, "utf8"));
  } catch (err) {
    cannot(`stdin is not JSON: ${err.message}`);
  }
  if (!Array.isArray(docs)) cannot("stdin is not a JSON array of objects");
  const results = [];
  for (const doc of docs) {
    const Model = await model(folder, doc.apiVersion, doc.kind);
    let errors = [];
    try {
      new Model(doc).validate();
    } catch (err) {
      // The package's ValidationError carries the validator's errors; anything else is a fault.
      if (!Array.isArray(err.errors)) throw err;
      errors = err.errors.map((e) => `${e.instancePath || "/"}: ${e.message}`);
    }
    results.push({ kind: doc.kind, name: doc.metadata?.name ?? null, errors });
  }
  process.stdout.write(JSON.stringify(results) + "\n");
  process.exitCode = results.every((r) => r.errors.length === 0) ? 0 : 1;
}

main().catch((err) => cannot(err?.stack ?? String(err)));
