#!/usr/bin/env python3
"""Checks Kubernetes manifests against the API schemas kept in tests/data/k8s/schemas.json.

  validate_manifests.py SCHEMAS FILE...            every FILE must pass (a manifest or a v1 List)
  validate_manifests.py SCHEMAS --bad DIR          every DIR/*.json must FAIL with the message its
                                                   DIR/expect.json entry names (the checker can fail)

What it checks, as the API server's decoding and OpenAPI validation would: apiVersion and kind name a
kind whose schema we keep; every field is declared (unknown fields rejected, as `kubectl apply
--validate=strict` and server-side field validation do), unless the schema says
x-kubernetes-preserve-unknown-fields or gives additionalProperties (maps); required fields; JSON types
(integer, number, string, boolean, array, object; int-or-string and quantity as their oneOf); enums.
What it does not: the server's semantic rules (name formats, CEL compilation, quota key syntax,
immutable fields), which need an API server (docs/market.md, "Kubernetes").
"""
import json
import os
import sys

REF = "#/components/schemas/"


class Checker:
    def __init__(self, doc):
        self.schemas = doc["components"]["schemas"]
        self.roots = doc["roots"]

    def resolve(self, schema):
        """The schema with allOf/$ref merged in (Kubernetes wraps each $ref in a one-element allOf)."""
        while True:
            if "$ref" in schema:
                merged = dict(self.schemas[schema["$ref"][len(REF):]])
                merged.update({k: v for k, v in schema.items() if k != "$ref"})
                schema = merged
                continue
            if "allOf" in schema:
                merged = {k: v for k, v in schema.items() if k != "allOf"}
                for part in schema["allOf"]:
                    for k, v in self.resolve(part).items():
                        merged.setdefault(k, v)
                schema = merged
                continue
            return schema

    def check(self, value, schema, path, errors):
        schema = self.resolve(schema)
        if "oneOf" in schema:
            if not any(not self.collect(value, s, path) for s in schema["oneOf"]):
                errors.append("%s: %s matches none of %s" % (path, json.dumps(value)[:60],
                                                             [s.get("type") for s in schema["oneOf"]]))
            return
        if schema.get("x-kubernetes-int-or-string"):
            if not (isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))):
                errors.append("%s: must be an integer or a string" % path)
            return
        t = schema.get("type")
        ok = {
            None: True,
            "string": isinstance(value, str),
            "boolean": isinstance(value, bool),
            "integer": isinstance(value, int) and not isinstance(value, bool),
            "number": isinstance(value, (int, float)) and not isinstance(value, bool),
            "array": isinstance(value, list),
            "object": isinstance(value, dict),
        }[t]
        if not ok:
            errors.append("%s: wrong type: %s is not %s" % (path, type(value).__name__, t))
            return
        if "enum" in schema and value not in schema["enum"]:
            errors.append("%s: %r is not one of %s" % (path, value, schema["enum"]))
        if isinstance(value, list):
            for i, item in enumerate(value):
                self.check(item, schema.get("items", {}), "%s[%d]" % (path, i), errors)
        if isinstance(value, dict):
            props = schema.get("properties")
            extra = schema.get("additionalProperties")
            for key in schema.get("required", []):
                if key not in value:
                    errors.append("%s: required field %s is missing" % (path, key))
            for key, v in value.items():
                sub = "%s.%s" % (path, key) if path else key
                if props is not None and key in props:
                    self.check(v, props[key], sub, errors)
                elif isinstance(extra, dict):
                    self.check(v, extra, sub, errors)
                elif schema.get("x-kubernetes-preserve-unknown-fields") or (props is None and t is None):
                    continue
                else:
                    errors.append("%s: unknown field %s" % (path or "<root>", key))

    def collect(self, value, schema, path):
        errors = []
        self.check(value, schema, path, errors)
        return errors

    def manifest(self, obj, where):
        if not isinstance(obj, dict):
            return ["%s: a manifest is a JSON object" % where]
        if obj.get("kind") == "List" and obj.get("apiVersion") == "v1":
            errors = []
            extra = set(obj) - {"apiVersion", "kind", "items", "metadata"}
            errors += ["%s: unknown field %s" % (where, k) for k in sorted(extra)]
            for i, item in enumerate(obj.get("items", [])):
                errors += self.manifest(item, "%s.items[%d]" % (where, i))
            return errors
        kind = obj.get("kind")
        if kind not in self.roots:
            return ["%s: kind %r has no schema here (known: %s)" % (where, kind, ", ".join(sorted(self.roots)))]
        root = self.roots[kind]
        if obj.get("apiVersion") != root["apiVersion"]:
            return ["%s: %s is apiVersion %s, not %r" % (where, kind, root["apiVersion"], obj.get("apiVersion"))]
        return [where + ": " + e for e in self.collect(obj, {"$ref": REF + root["schema"]}, "")]


def main(argv):
    checker = Checker(json.load(open(argv[1])))
    if len(argv) == 4 and argv[2] == "--bad":
        folder = argv[3]
        expect = json.load(open(os.path.join(folder, "expect.json")))
        failures = 0
        files = sorted(f for f in os.listdir(folder) if f.endswith(".json") and f != "expect.json")
        for name in files:
            errors = checker.manifest(json.load(open(os.path.join(folder, name))), name)
            want = expect.get(name)
            if want is None:
                print("FAIL %s: no entry in expect.json" % name)
                failures += 1
            elif not any(want in e for e in errors):
                print("FAIL %s: expected an error containing %r, got %s" % (name, want, errors or "none"))
                failures += 1
            else:
                print("ok   %s rejected: %s" % (name, next(e for e in errors if want in e)))
        print("%d passed, %d failed" % (len(files) - failures, failures))
        return 1 if failures or not files else 0
    failures = 0
    for name in argv[2:]:
        errors = checker.manifest(json.load(open(name)), os.path.basename(name))
        for e in errors:
            print("FAIL " + e)
        if errors:
            failures += 1
        else:
            print("ok   " + os.path.basename(name))
    print("%d passed, %d failed" % (len(argv) - 2 - failures, failures))
    return 1 if failures or len(argv) < 3 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
