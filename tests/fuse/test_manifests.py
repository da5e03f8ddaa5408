"""The Kubernetes manifests (packaging/kubernetes/*.yaml) and the container
entrypoint they run, without a cluster and without Ceph.

Debian 12 has no schema-aware Kubernetes validator (kubeconform and
kubeval are not packaged), so the fields that matter are checked here by
parsing (python3-yaml): the DaemonSet's update strategy, resources,
priority class (defined), GPU-taint tolerations, readiness on `fusefs
status --json`; PID 1 of the single-container pod; the fd-passing pod's
CSI wiring and its lack of privilege.  test_packaging.py (integration)
checks options, secrets and paths against the program and the image.

The entrypoint's `run` mode (the single-container pod) runs for real
under tini over a file:// source: SIGTERM reaches the trainer, and when
the trainer exits the mount goes and its exit status is the pod's."""

import os
import re
import shutil
import signal
import subprocess
import sys

import pytest

from k8slib import K8S, all_containers as containers, env_of, k8s_docs, pod_spec
from mountlib import FUSEFS, ROOT, wait_for
ENTRYPOINT = os.path.join(ROOT, "packaging", "container", "entrypoint.sh")
KUBERNETES_MD = os.path.join(ROOT, "docs", "kubernetes.md")
CSI_DRIVER = "meta-fuse-csi-plugin.csi.storage.pfn.io"
CSI_VERSION = "v0.2.2"

API_VERSIONS = {"Pod": "v1", "Secret": "v1", "ConfigMap": "v1", "DaemonSet": "apps/v1",
                "PriorityClass": "scheduling.k8s.io/v1"}
QUANTITY = re.compile(r"^\d+(\.\d+)?(m|Ki|Mi|Gi|Ti|k|M|G|T)?$")


def docs():
    pytest.importorskip("yaml", reason="apt-get install python3-yaml")
    return k8s_docs()


def runs_fusefs(c):
    """the container runs the fusefs daemon (image entrypoint or command)"""
    argv = c.get("command", []) + c.get("args", [])
    return (c["image"].rsplit("/", 1)[-1].split(":")[0].startswith("fusefs")
            or "fusefs" in argv or "fusefs-entrypoint" in argv)


def mountpoint_of(c):
    """where that container's fusefs mount is seen"""
    argv = c.get("command", []) + c.get("args", [])
    if "/dev/fd/3" in argv:                  # fd passing: the CSI volume
        return next(m["mountPath"] for m in c["volumeMounts"]
                    if m.get("mountPropagation") == "HostToContainer")
    return env_of(c)["FUSEFS_MOUNTPOINT"]


def by_file(name):
    return [d for f, d in docs() if f == name]


def test_every_document_is_well_formed():
    seen = set()
    for f, d in docs():
        where = f"{f}: {d.get('kind')} {d.get('metadata', {}).get('name')}"
        assert d.get("kind") in API_VERSIONS, where
        assert d.get("apiVersion") == API_VERSIONS[d["kind"]], where
        assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", d["metadata"]["name"]), where
        key = (d["kind"], d["metadata"]["name"])
        assert key not in seen, f"{where} is defined twice"
        seen.add(key)
        spec = pod_spec(d)
        if not spec:
            continue
        names = [c["name"] for c in containers(spec)]
        assert len(names) == len(set(names)), where
        vols = [v["name"] for v in spec.get("volumes", [])]
        assert len(vols) == len(set(vols)), where
        for c in containers(spec):
            for kind in ("requests", "limits"):
                for res, q in c.get("resources", {}).get(kind, {}).items():
                    assert QUANTITY.match(str(q)), f"{where}: {c['name']} {res}={q}"


def test_daemonset_strategy_resources_priority_tolerations_readiness():
    all_docs = docs()
    classes = {d["metadata"]["name"]: d for _, d in all_docs if d["kind"] == "PriorityClass"}
    dsets = [d for _, d in all_docs if d["kind"] == "DaemonSet"]
    assert dsets, "no DaemonSet in packaging/kubernetes"
    for ds in dsets:
        name = ds["metadata"]["name"]
        assert ds["spec"]["updateStrategy"] == {"type": "OnDelete"}, name
        spec = pod_spec(ds)
        pc = spec.get("priorityClassName")
        assert pc in classes, f"{name}: priorityClassName {pc!r} is not defined"
        assert classes[pc]["value"] >= 1000 and classes[pc].get("globalDefault") is False
        tol = spec.get("tolerations", [])
        gpu = [t for t in tol if t.get("key") == "nvidia.com/gpu"]
        assert gpu, f"{name}: no toleration for the nvidia.com/gpu taint"
        for t in gpu:
            assert t["operator"] == "Exists" and "value" not in t, t
        assert {t.get("effect") for t in gpu} >= {"NoSchedule"}, gpu
        for c in spec["containers"]:
            if not runs_fusefs(c):
                continue
            res = c["resources"]
            assert {"cpu", "memory"} <= set(res["requests"]), f"{name}: {res}"
            assert "memory" in res["limits"], f"{name}: no memory limit"


def test_every_fusefs_container_is_ready_on_status_json_and_bounded():
    checked = 0
    for f, d in docs():
        spec = pod_spec(d)
        if not spec:
            continue
        for c in containers(spec):
            if not runs_fusefs(c) or c.get("command", [None])[0] == "tini":
                continue                      # the single-container pod: below
            mnt = mountpoint_of(c)
            probe = c["readinessProbe"]["exec"]["command"]
            assert probe == ["fusefs", "status", mnt, "--json"], f"{f}: {probe}"
            assert "memory" in c["resources"]["limits"], f"{f}: {c['name']}"
            checked += 1
    assert checked >= 3


def test_fusefs_status_json_is_a_probe(mounter, src):
    """the probe's command: exit 0 with JSON while mounted, non-zero after"""
    import json
    m = mounter()
    r = subprocess.run([FUSEFS, "status", m.mnt, "--json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["mount"] == m.mnt
    m.umount()
    r = subprocess.run([FUSEFS, "status", m.mnt, "--json"], capture_output=True, text=True)
    assert r.returncode != 0


def test_single_container_pod_has_an_init_for_pid_1():
    (pod,) = [d for d in by_file("single-container-pod.yaml") if d["kind"] == "Pod"]
    (c,) = pod["spec"]["containers"]
    argv = c["command"]
    # tini (Debian package "tini") as PID 1, then the entrypoint's run mode
    assert argv[:4] == ["tini", "--", "fusefs-entrypoint", "run"], argv
    assert len(argv) > 4
    sc = c["securityContext"]
    assert not sc.get("privileged")
    assert sc["capabilities"] == {"drop": ["ALL"], "add": ["SYS_ADMIN"]}
    assert env_of(c)["FUSEFS_SOURCE"] and env_of(c)["FUSEFS_MOUNTPOINT"]
    assert pod["spec"]["terminationGracePeriodSeconds"] >= 30


def test_fd_passing_pod_is_unprivileged_and_wired_to_the_csi_driver():
    (pod,) = by_file("fd-passing-pod.yaml")
    spec = pod["spec"]
    vols = {v["name"]: v for v in spec["volumes"]}
    csi = [v for v in vols.values() if "csi" in v]
    assert len(csi) == 1 and csi[0]["csi"]["driver"] == CSI_DRIVER, csi
    attrs = csi[0]["csi"]["volumeAttributes"]
    assert csi[0]["csi"]["readOnly"] is True
    sock_dir = vols[attrs["fdPassingEmptyDirName"]]
    assert "emptyDir" in sock_dir
    (side,) = [c for c in spec["initContainers"] if runs_fusefs(c)]
    assert side["restartPolicy"] == "Always"          # a native sidecar
    argv = side["command"]
    sock_mount = next(m for m in side["volumeMounts"]
                      if m["name"] == attrs["fdPassingEmptyDirName"])
    i = argv.index("--fd-passing-socket-path")
    assert argv[i + 1] == os.path.join(sock_mount["mountPath"], attrs["fdPassingSocketName"])
    # fusefs gets the mounted fd as descriptor 3 and mounts "/dev/fd/3"
    j = argv.index("--")
    assert argv[j + 1:j + 3] == ["fusefs", "mount"] and argv[j + 4] == "/dev/fd/3", argv
    assert "-f" in argv[j:]
    # no privilege anywhere in the pod
    for c in containers(spec):
        sc = c.get("securityContext", {})
        assert not sc.get("privileged"), c["name"]
        assert sc.get("allowPrivilegeEscalation") is False, c["name"]
        assert sc["capabilities"] == {"drop": ["ALL"]}, c["name"]
        for m in c.get("volumeMounts", []):
            assert m.get("mountPropagation") != "Bidirectional", c["name"]
            assert m["name"] != "fuse-device"
    assert side["securityContext"]["runAsUser"] == 65534     # owner of the socket
    assert side["securityContext"]["runAsNonRoot"] is True
    # the trainer reads the CSI volume read-only
    (trainer,) = spec["containers"]
    tm = [m for m in trainer["volumeMounts"] if "csi" in vols[m["name"]]]
    assert tm and tm[0]["readOnly"] is True
    # the driver's version is pinned and its installation documented
    text = open(os.path.join(K8S, "fd-passing-pod.yaml")).read()
    assert CSI_VERSION in text
    doc = open(KUBERNETES_MD).read()
    assert CSI_VERSION in doc and "meta-fuse-csi-plugin" in doc
    assert f"meta-fuse-csi-plugin/{CSI_VERSION}/deploy/csi-driver.yaml" in doc
    assert f"meta-fuse-csi-plugin/{CSI_VERSION}/deploy/csi-driver-daemonset.yaml" in doc


# ---- the entrypoint's run mode under tini ---------------------------------------------

TRAINER = r"""
import os, signal, sys, time
def term(*_):
    print("trainer: SIGTERM", flush=True)
    sys.exit(int(sys.argv[2]))
signal.signal(signal.SIGTERM, term)
print("trainer reads", open(os.path.join(sys.argv[1], "f")).read(), flush=True)
if sys.argv[3] == "wait":
    time.sleep(120)
sys.exit(int(sys.argv[2]))
"""


def mounted(path):
    with open("/proc/self/mounts") as f:
        return [l for l in f if l.split()[1] == str(path)]


def pod_tree(pid):
    """the processes under @pid: state, kernel wait channel, each thread's
    wait channel for fusefs (what a hang waits on)"""
    ps = subprocess.run(["ps", "-e", "-o", "pid=,ppid=,stat=,wchan:32=,args="],
                        capture_output=True, text=True).stdout.splitlines()
    kids, lines, todo = {}, [], [pid]
    for l in ps:
        f = l.split(None, 4)
        kids.setdefault(int(f[1]), []).append((int(f[0]), l))
    while todo:
        for k, l in kids.get(todo.pop(), []):
            lines.append(l)
            todo.append(k)
            if "fusefs" in l:
                for t in sorted(os.listdir(f"/proc/{k}/task")):
                    try:
                        w = open(f"/proc/{k}/task/{t}/wchan").read()
                        c = open(f"/proc/{k}/task/{t}/comm").read().strip()
                    except OSError:
                        continue
                    lines.append(f"    thread {t} {c}: {w}")
    return "\n".join(lines)


def test_entrypoint_run_mode_forwards_sigterm_and_unmounts(src, tmp_path, how="sigterm"):
    """(a job that ends by itself takes the same path after its exit;
    how="job-ends" runs that variant by hand)"""
    tini = shutil.which("tini")
    if not tini:
        pytest.skip("tini is not installed (apt-get install tini; scripts/deps.sh does)")
    (src / "f").write_text("the dataset")
    mnt = tmp_path / "data"
    env = dict(os.environ, FUSEFS_BIN=FUSEFS, FUSEFS_SOURCE=f"file://{src}",
               FUSEFS_MOUNTPOINT=str(mnt), FUSEFS_CACHE_DIR=str(tmp_path / "cache"))
    log = open(tmp_path / "pod.log", "w+")
    status = 7 if how == "sigterm" else 3
    p = subprocess.Popen([tini, "--", "bash", ENTRYPOINT, "run", sys.executable, "-c",
                          TRAINER, str(mnt), str(status),
                          "wait" if how == "sigterm" else "exit"],
                         env=env, stdout=log, stderr=subprocess.STDOUT)
    out = lambda: open(tmp_path / "pod.log").read()
    try:
        assert wait_for(lambda: "trainer reads the dataset" in out(), 60), out()
        if how == "sigterm":
            assert mounted(mnt)
            p.send_signal(signal.SIGTERM)           # the kubelet stopping the pod
        try:
            rc = p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pytest.fail("the pod did not stop: " + out() + "\n" + pod_tree(p.pid))
        assert rc == status, out()                  # the trainer's status is the pod's
        if how == "sigterm":
            assert "trainer: SIGTERM" in out()
        assert not mounted(mnt), out()              # unmounted by fusefs itself
        assert "detaching" not in out()
        assert "unmounting" in out()
    finally:
        if p.poll() is None:
            p.kill()
        if mounted(mnt):
            subprocess.run(["umount", "-l", str(mnt)])
