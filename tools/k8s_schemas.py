#!/usr/bin/env python3
"""Extracts the Kubernetes API schemas of the kinds gpuplan renders (tests/data/k8s/README.md).

  tools/k8s_schemas.py CORE_V1_OPENAPI_JSON CLIENT_GO_INTERNAL_GO > tests/data/k8s/schemas.json

CLIENT_GO_INTERNAL_GO: client-go's applyconfigurations/internal/internal.go. Its schemaYAML is the
structured-merge-diff schema that kubernetes' code generator writes from the API's OpenAPI definitions,
for every group of the release client-go is cut from: the field names, scalar types, lists, maps and
references of every definition, converted here to OpenAPI form. It is the structure of every schema.
CORE_V1_OPENAPI_JSON: an OpenAPI v3 document of the core group (kubernetes api/openapi-spec/v3/
api__v1_openapi.json, or client-go's copy openapi/openapitest/testdata/api__v1_openapi.json). The merge
schema has no `required` lists and leaves quantities, int-or-string and times untyped: those come from
this document (its `required`, filtered to fields the merge schema still has, and its scalar
definitions), REQUIRED below covers the rbac and resource.k8s.io definitions (read from the `required`
arrays of api/openapi-spec/v3/apis__rbac.authorization.k8s.io__v1_openapi.json and
apis__resource.k8s.io__v1_openapi.json), and ENUMS the enumerations of the fields gpuplan writes.

Only the roots' $ref closure is kept, without descriptions, and each root's `status` is dropped (gpuplan
never writes status; the server ignores it on create). The output is sorted, so a re-run is a no-op.
"""
import json
import re
import sys

import yaml

ROOTS = {
    # kind: (apiVersion, schema name)
    "Namespace": ("v1", "io.k8s.api.core.v1.Namespace"),
    "ResourceQuota": ("v1", "io.k8s.api.core.v1.ResourceQuota"),
    "ServiceAccount": ("v1", "io.k8s.api.core.v1.ServiceAccount"),
    "Pod": ("v1", "io.k8s.api.core.v1.Pod"),
    "Role": ("rbac.authorization.k8s.io/v1", "io.k8s.api.rbac.v1.Role"),
    "RoleBinding": ("rbac.authorization.k8s.io/v1", "io.k8s.api.rbac.v1.RoleBinding"),
    "ResourceClaim": ("resource.k8s.io/v1", "io.k8s.api.resource.v1.ResourceClaim"),
}

# `required` of the definitions taken from the structured-merge-diff schema (see the docstring).
REQUIRED = {
    "io.k8s.api.rbac.v1.PolicyRule": ["verbs"],
    "io.k8s.api.rbac.v1.RoleBinding": ["roleRef"],
    "io.k8s.api.rbac.v1.RoleRef": ["apiGroup", "kind", "name"],
    "io.k8s.api.rbac.v1.Subject": ["kind", "name"],
    "io.k8s.api.resource.v1.ResourceClaim": ["spec"],
    "io.k8s.api.resource.v1.DeviceRequest": ["name"],
    "io.k8s.api.resource.v1.ExactDeviceRequest": ["deviceClassName"],
    "io.k8s.api.resource.v1.DeviceSubRequest": ["name", "deviceClassName"],
    "io.k8s.api.resource.v1.CELDeviceSelector": ["expression"],
    "io.k8s.api.resource.v1.DeviceConstraint": [],
    "io.k8s.api.resource.v1.DeviceClaimConfiguration": [],
    "io.k8s.api.resource.v1.OpaqueDeviceConfiguration": ["driver", "parameters"],
    "io.k8s.api.resource.v1.DeviceToleration": [],
}
# Enumerations (the `enum` of kubernetes' published OpenAPI documents, from the +enum markers of the Go
# types; client-go's test copy and the merge schema leave them out) of the fields gpuplan writes.
ENUMS = {
    ("io.k8s.api.core.v1.PodSpec", "restartPolicy"): ["Always", "Never", "OnFailure"],
    ("io.k8s.api.core.v1.Toleration", "operator"): ["Equal", "Exists"],
    ("io.k8s.api.core.v1.Toleration", "effect"): ["NoExecute", "NoSchedule", "PreferNoSchedule"],
    ("io.k8s.api.resource.v1.ExactDeviceRequest", "allocationMode"): ["All", "ExactCount"],
    ("io.k8s.api.resource.v1.DeviceSubRequest", "allocationMode"): ["All", "ExactCount"],
}
KEEP = {"type", "format", "properties", "items", "additionalProperties", "required", "enum", "allOf", "oneOf",
        "$ref", "x-kubernetes-int-or-string", "x-kubernetes-preserve-unknown-fields"}
REF = "#/components/schemas/"


def strip(node):
    if isinstance(node, dict):
        out = {}
        for k, v in node.items():
            if k not in KEEP:
                continue
            if k == "properties":
                out[k] = {name: strip(p) for name, p in v.items()}
            else:
                out[k] = strip(v)
        return out
    if isinstance(node, list):
        return [strip(x) for x in node]
    return node


def refs(node, found):
    if isinstance(node, dict):
        if "$ref" in node:
            found.add(node["$ref"][len(REF):])
        for v in node.values():
            refs(v, found)
    elif isinstance(node, list):
        for v in node:
            refs(v, found)


def smd_type(t):
    """A structured-merge-diff type as an OpenAPI schema."""
    if "namedType" in t:
        name = t["namedType"]
        if name == "__untyped_atomic_" or name == "__untyped_deduced_":
            return {"x-kubernetes-preserve-unknown-fields": True}
        return {"allOf": [{"$ref": REF + name}]}
    if "scalar" in t:
        return {"string": {"type": "string"}, "numeric": {"type": "number"}, "boolean": {"type": "boolean"},
                "untyped": {"x-kubernetes-preserve-unknown-fields": True}}[t["scalar"]]
    if "list" in t:
        return {"type": "array", "items": smd_type(t["list"]["elementType"])}
    if "map" in t:
        m = t["map"]
        if "fields" in m:
            return smd_object("", m)
        return {"type": "object", "additionalProperties": smd_type(m.get("elementType", {"scalar": "untyped"}))}
    raise ValueError("unknown structured-merge-diff type: %r" % t)


def smd_object(name, m):
    props = {}
    for f in m.get("fields", []):
        props[f["name"]] = smd_type(f["type"])
    out = {"type": "object", "properties": props}
    if m.get("elementType") is not None and not props:
        out["additionalProperties"] = smd_type(m["elementType"])
    if REQUIRED.get(name):
        out["required"] = REQUIRED[name]
    return out


def main():
    core = json.load(open(sys.argv[1]))["components"]["schemas"]
    go = open(sys.argv[2]).read()
    text = re.search(r"typed\.YAMLObject\(`(.*?)`\)", go, re.S).group(1)
    smd = {t["name"]: t for t in yaml.safe_load(text)["types"]}

    roots = [n for _, n in ROOTS.values()]
    schemas = {}
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in schemas:
            continue
        if name in smd and "map" in smd[name]:
            s = smd_object(name, smd[name]["map"])
            if name in core and name not in REQUIRED:
                have = set(s.get("properties", {}))
                req = [r for r in core[name].get("required", []) if r in have]
                if req:
                    s["required"] = req
        elif name in core:
            s = strip(core[name])  # quantities, int-or-string, times: their OpenAPI scalar forms
        elif name in smd and "scalar" in smd[name]:
            s = smd_type(smd[name])
        else:
            raise SystemExit("no schema for " + name)
        for (owner, field), values in ENUMS.items():
            if owner == name and field in s.get("properties", {}):
                s["properties"][field]["enum"] = values
        if name in roots:
            s.get("properties", {}).pop("status", None)
        schemas[name] = s
        found = set()
        refs(s, found)
        todo.extend(sorted(found - set(schemas)))
    doc = {"roots": {kind: {"apiVersion": v, "schema": n} for kind, (v, n) in sorted(ROOTS.items())},
           "components": {"schemas": dict(sorted(schemas.items()))}}
    json.dump(doc, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
