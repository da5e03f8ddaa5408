"""The Kubernetes manifests in packaging/kubernetes/, parsed (python3-yaml),
for the tests that check them (tests/fuse/test_manifests.py,
tests/integration/test_packaging.py)."""

import os

from mountlib import ROOT

K8S = os.path.join(ROOT, "packaging", "kubernetes")


def k8s_docs():
    """[(file name, document)] of every *.yaml there"""
    import yaml
    docs = []
    for f in sorted(os.listdir(K8S)):
        if f.endswith((".yaml", ".yml")):
            with open(os.path.join(K8S, f)) as fh:
                docs += [(f, d) for d in yaml.safe_load_all(fh) if d]
    return docs


def pod_spec(doc):
    """the pod spec of a Pod or a workload's template; None for others"""
    if doc["kind"] == "Pod":
        return doc["spec"]
    if doc["kind"] in ("DaemonSet", "Deployment", "StatefulSet", "Job"):
        return doc["spec"]["template"]["spec"]
    return None


def all_containers(spec):
    return spec.get("initContainers", []) + spec["containers"]


def env_of(c):
    return {e["name"]: e.get("value") for e in c.get("env", [])}

