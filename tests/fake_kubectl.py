#!/usr/bin/env python3
"""A fake kubectl for the Kubernetes hand-off tests (tests/unit/market_k8s_test.cc): no API server can run
on these machines, so this answers the few commands gpuplan's Kubernetes target runs the way kubectl
does (output, exit codes and the "(NotFound)" errors), keeping objects as files under $FAKE_KUBECTL_DIR:

  apply --server-side --field-manager=gpuplan -f - -o name   (a v1 List on stdin; prints KIND/NAME lines)
  get pod NAME -n NS -o jsonpath={.status.phase}             (the phase, no newline; NotFound: exit 1)
  delete pod[,resourceclaim] -l k=v,k=v -n NS --ignore-not-found --wait=false
  create token SA -n NS --duration=1h                        (a JWT-shaped string)
  config view --minify -o jsonpath={.clusters[0].cluster.server}

Every call is appended to $FAKE_KUBECTL_DIR/calls (one line, the arguments joined by spaces); every Pod
created (not re-applied) to $FAKE_KUBECTL_DIR/created. A new Pod's phase is the text of
$FAKE_KUBECTL_DIR/phase ("Running" without it). $FAKE_KUBECTL_DIR/fail makes every call exit 1 with its
text on stderr. --kubeconfig must name an existing file (kubectl fails otherwise too)."""
import json
import os
import sys

KINDS = {  # kind -> the resource name kubectl -o name prints
    "Namespace": "namespace", "ResourceQuota": "resourcequota", "ServiceAccount": "serviceaccount",
    "Role": "role.rbac.authorization.k8s.io", "RoleBinding": "rolebinding.rbac.authorization.k8s.io",
    "ResourceClaim": "resourceclaim.resource.k8s.io", "Pod": "pod",
}
PLURAL = {"pod": "Pod", "pods": "Pod", "resourceclaim": "ResourceClaim", "resourceclaims": "ResourceClaim"}


def fail(msg, code=1):
    sys.stderr.write(msg + "\n")
    sys.exit(code)


def main():
    root = os.environ.get("FAKE_KUBECTL_DIR")
    if not root:
        fail("fake kubectl: FAKE_KUBECTL_DIR is unset")
    os.makedirs(root, exist_ok=True)
    args = sys.argv[1:]
    with open(os.path.join(root, "calls"), "a") as f:
        f.write(" ".join(args) + "\n")
    if os.path.exists(os.path.join(root, "fail")):
        fail(open(os.path.join(root, "fail")).read().strip())
    opts, words = {}, []
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("--kubeconfig", "--context", "-n", "--namespace", "-o", "-l", "-f"):
            opts[a] = args[i + 1] if i + 1 < len(args) else ""
            i += 2
            continue
        if a.startswith("--"):
            k, _, v = a.partition("=")
            opts[k] = v
        else:
            words.append(a)
        i += 1
    kubeconfig = opts.get("--kubeconfig", "")
    if not kubeconfig or not os.path.isfile(kubeconfig):
        fail('error: stat %s: no such file or directory' % kubeconfig)
    ns = opts.get("-n", opts.get("--namespace", "default"))

    def path(kind, name, namespace):
        return os.path.join(root, "objects", namespace or "_", kind, name + ".json")

    if words[:1] == ["apply"]:
        doc = json.load(sys.stdin)
        items = doc["items"] if doc.get("kind") == "List" else [doc]
        for obj in items:
            kind, meta = obj["kind"], obj["metadata"]
            p = path(kind, meta["name"], meta.get("namespace", ""))
            os.makedirs(os.path.dirname(p), exist_ok=True)
            new = not os.path.exists(p)
            if kind == "Pod":
                if new:
                    phase_file = os.path.join(root, "phase")
                    phase = open(phase_file).read().strip() if os.path.exists(phase_file) else "Running"
                    obj["status"] = {"phase": phase}
                    with open(os.path.join(root, "created"), "a") as f:
                        f.write(meta["name"] + "\n")
                else:
                    obj["status"] = json.load(open(p)).get("status", {})
            with open(p, "w") as f:
                json.dump(obj, f)
            print("%s/%s" % (KINDS.get(kind, kind.lower()), meta["name"]))
        return
    if words[:2] == ["get", "pod"] and len(words) == 3:
        p = path("Pod", words[2], ns)
        if not os.path.exists(p):
            fail('Error from server (NotFound): pods "%s" not found' % words[2])
        if opts.get("-o") != "jsonpath={.status.phase}":
            fail("fake kubectl: only -o jsonpath={.status.phase}")
        sys.stdout.write(json.load(open(p)).get("status", {}).get("phase", ""))
        return
    if words[:1] == ["delete"] and len(words) == 2:
        want = dict(kv.split("=", 1) for kv in opts.get("-l", "").split(",") if kv)
        for t in words[1].split(","):
            kind = PLURAL.get(t)
            if kind is None:
                fail('error: the server doesn\'t have a resource type "%s"' % t)
            d = os.path.join(root, "objects", ns, kind)
            for fn in sorted(os.listdir(d)) if os.path.isdir(d) else []:
                labels = json.load(open(os.path.join(d, fn)))["metadata"].get("labels", {})
                if all(labels.get(k) == v for k, v in want.items()):
                    os.remove(os.path.join(d, fn))
                    print('%s "%s" deleted' % (t.rstrip("s"), fn[:-5]))
        return
    if words[:2] == ["create", "token"] and len(words) == 3:
        if not os.path.exists(path("ServiceAccount", words[2], ns)):
            fail('error: failed to create token: serviceaccounts "%s" not found' % words[2])
        print("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQifQ.c2lnbmF0dXJl")
        return
    if words[:2] == ["config", "view"]:
        sys.stdout.write("https://127.0.0.1:6443")
        return
    fail("fake kubectl: unknown command: " + " ".join(args))


if __name__ == "__main__":
    main()
