"""The manifests of packaging/kubernetes/ made playable by `podman kube play`
(podman 4.3, no Kubernetes): what tests/integration/test_containers.py runs
and docs/kubernetes.md describes ("Run with podman").

derive(doc, ...) returns a Pod that keeps the manifest's containers, their
security contexts, volume mounts and mount propagation, and changes only
what podman 4.3 or a machine without a cluster lacks (each change is named
in the returned list of gaps):

* a DaemonSet is its pod template, played as a Pod (kube play knows Pod
  and Deployment);
* a native sidecar (an init container with restartPolicy: Always,
  Kubernetes >= 1.29) becomes an ordinary container: podman runs init
  containers to completion first, so a sidecar there would block the pod;
  the trainer waits for the mount itself;
* hostNetwork: true: the containers reach the storage cluster on the
  host's loopback;
* images: the manifest's registry names replaced by local images;
* env valueFrom.secretKeyRef: the value from the given Secret (podman 4.3
  resolves secretKeyRef only against podman secrets); the derived file is
  written 0600;
* volumes podman cannot make (emptyDir made rshared as the kubelet does,
  configMap, projected, csi) become hostPath directories the caller
  prepared (configmap_dir() writes a ConfigMap's items to one);
* ports are dropped: podman 4.3 refuses port mappings on the host network
  (where the container's port is the host's anyway);
* probes are dropped (podman 4.3 turns liveness into a systemd-timer
  healthcheck, ignores startup and readiness); probe_commands() returns
  them for the caller to run with `podman exec`;
* env and command overrides given by the caller (the cluster's address,
  small cache sizes, the test's trainer).

Usable as a script:
  python3 tests/containers/kube.py MANIFEST [--pod NAME] [--image OLD=NEW]
      [--hostpath VOLUME=DIR] [--env CONTAINER:NAME=VALUE] [--secrets FILE] > pod.yaml
"""

import copy
import os
import sys

import yaml

PROBES = ("startupProbe", "readinessProbe", "livenessProbe")


def load(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def find(docs, kind, name=None):
    for d in docs:
        if d["kind"] == kind and (name is None or d["metadata"]["name"] == name):
            return d
    raise KeyError(f"no {kind} {name or ''}")


def configmap_dir(cm, items, path):
    """write @items ([{key, path}]) of the ConfigMap @cm under @path"""
    os.makedirs(path, exist_ok=True)
    for it in items:
        dst = os.path.join(path, it["path"])
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        with open(dst, "w") as f:
            f.write(cm["data"][it["key"]])
        os.chmod(dst, it.get("mode", 0o644))
    return path


def probe_commands(doc):
    """{container: {probe: argv}} of the exec probes in @doc's pod spec"""
    out = {}
    for c in _containers(_spec(doc)):
        for p in PROBES:
            if p in c and "exec" in c[p]:
                out.setdefault(c["name"], {})[p] = c[p]["exec"]["command"]
    return out


def _spec(doc):
    if doc["kind"] == "Pod":
        return doc["spec"]
    return doc["spec"]["template"]["spec"]


def _containers(spec):
    return spec.get("initContainers", []) + spec.get("containers", [])


def derive(doc, name=None, images=None, hostpaths=None, env=None, command=None,
           secret=None):
    """(pod, gaps): @doc (Pod or DaemonSet) as a Pod podman 4.3 plays.
    @images {manifest image: local image}; @hostpaths {volume: host dir};
    @env {container: {NAME: value}} set or replaced; @command {container:
    argv}; @secret a Secret document for secretKeyRef."""
    gaps = []
    spec = copy.deepcopy(_spec(doc))
    if doc["kind"] != "Pod":
        gaps.append(f"{doc['kind']}: its pod template played as a Pod")
    meta = {"name": name or doc["metadata"]["name"]}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}

    inits, plain = [], []
    for c in spec.pop("initContainers", []):
        if c.get("restartPolicy") == "Always":
            del c["restartPolicy"]
            plain.append(c)
            gaps.append(f"{c['name']}: native sidecar run as an ordinary container")
        else:
            inits.append(c)
    spec["containers"] = plain + spec["containers"]
    if inits:
        spec["initContainers"] = inits
    if not spec.get("hostNetwork"):
        spec["hostNetwork"] = True
        gaps.append("hostNetwork: true (the cluster is on the host's loopback)")

    for c in _containers(spec):
        if images and c["image"] in images:
            c["image"] = images[c["image"]]
        if c.pop("ports", None) is not None:
            gaps.append(f"{c['name']}: ports dropped (podman 4.3 maps none on the host network)")
        for p in PROBES:
            if c.pop(p, None) is not None:
                gaps.append(f"{c['name']}: {p} run with podman exec, not by podman")
        for e in c.get("env", []):
            ref = e.get("valueFrom", {}).get("secretKeyRef")
            if ref:
                if secret is None or ref["name"] != secret["metadata"]["name"]:
                    raise KeyError(f"secret {ref['name']} not given")
                e.pop("valueFrom")
                e["value"] = secret["stringData"][ref["key"]]
                gaps.append(f"{c['name']}: {e['name']} from the Secret, as a value")
        for k, v in ((env or {}).get(c["name"]) or {}).items():
            for e in c.setdefault("env", []):
                if e["name"] == k:
                    e["value"] = v
                    e.pop("valueFrom", None)
                    break
            else:
                c["env"].append({"name": k, "value": v})
        if command and c["name"] in command:
            c["command"] = command[c["name"]]
            c.pop("args", None)

    for v in spec.get("volumes", []):
        if hostpaths and v["name"] in hostpaths:
            kind = next(k for k in v if k != "name")
            if kind != "hostPath":
                gaps.append(f"volume {v['name']}: {kind} as a hostPath")
            for k in list(v):
                if k != "name":
                    del v[k]
            v["hostPath"] = {"path": hostpaths[v["name"]], "type": "Directory"}
        elif "hostPath" not in v:
            raise ValueError(f"volume {v['name']}: podman 4.3 cannot make "
                             f"{next(k for k in v if k != 'name')}; give a hostPath")
    return pod, gaps


class _Dumper(yaml.SafeDumper):
    """multi-line strings (scripts) as literal blocks: podman's YAML parser
    misreads PyYAML's folded double-quoted ones"""


_Dumper.add_representer(str, lambda d, s: d.represent_scalar(
    "tag:yaml.org,2002:str", s, style="|" if "\n" in s and not s[:1].isspace() else None))


def dump(pod, f):
    yaml.dump(pod, f, Dumper=_Dumper, sort_keys=False, width=1 << 20)


def write(pod, path):
    """the derived Pod in @path, 0600 (it may hold the Secret's values)"""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        dump(pod, f)
    return path


def run_args(c, hostpaths, skip_volumes=()):
    """`podman run` options for the container @c of a manifest, for what
    kube play cannot do (pass a file descriptor): user, capabilities,
    privilege escalation, privileged, its volume mounts (@hostpaths
    {volume: host dir}; HostToContainer as rslave, Bidirectional as
    rshared), and its environment as bare `-e NAME`: podman takes the
    values from its own environment, so none is on a command line"""
    sc = c.get("securityContext", {})
    args = []
    if "runAsUser" in sc:
        args += ["--user", f"{sc['runAsUser']}:{sc.get('runAsGroup', sc['runAsUser'])}"]
    caps = sc.get("capabilities", {})
    for cap in caps.get("drop", []):
        args += ["--cap-drop", cap]
    for cap in caps.get("add", []):
        args += ["--cap-add", cap]
    if sc.get("allowPrivilegeEscalation") is False:
        args += ["--security-opt", "no-new-privileges"]
    if sc.get("privileged"):
        args += ["--privileged"]
    prop = {"HostToContainer": "rslave", "Bidirectional": "rshared"}
    for m in c.get("volumeMounts", []):
        if m["name"] in skip_volumes:
            continue
        opts = ["ro" if m.get("readOnly") else "rw"]
        if m.get("mountPropagation") in prop:
            opts.append(prop[m["mountPropagation"]])
        args += ["-v", f"{hostpaths[m['name']]}:{m['mountPath']}:{','.join(opts)}"]
    for e in c.get("env", []):
        args += ["-e", e["name"]]
    return args


def main(argv):
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("manifest")
    ap.add_argument("--kind", default="Pod")
    ap.add_argument("--name")
    ap.add_argument("--pod")
    ap.add_argument("--image", action="append", default=[])
    ap.add_argument("--hostpath", action="append", default=[])
    ap.add_argument("--env", action="append", default=[])
    ap.add_argument("--secrets", help="a YAML file with the Secret for secretKeyRef")
    a = ap.parse_args(argv)
    doc = find(load(a.manifest), a.kind, a.name)
    env = {}
    for s in a.env:
        c, kv = s.split(":", 1)
        k, v = kv.split("=", 1)
        env.setdefault(c, {})[k] = v
    pod, gaps = derive(doc, name=a.pod,
                       images=dict(s.split("=", 1) for s in a.image),
                       hostpaths=dict(s.split("=", 1) for s in a.hostpath), env=env,
                       secret=find(load(a.secrets), "Secret") if a.secrets else None)
    for g in gaps:
        print("kube.py:", g, file=sys.stderr)
    dump(pod, sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1:])
