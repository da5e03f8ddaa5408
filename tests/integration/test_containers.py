"""The container ways of using fusefs, run for real with podman on the
session's Ceph cluster (docs/kubernetes.md, "Run with podman"):

* the image built from this checkout (scripts/image.sh, once per session);
* training-pod.yaml through `podman kube play` (tests/containers/kube.py
  derives what podman 4.3 plays): the privileged sidecar mounts a bucket
  on radosgw, the unprivileged trainer reads it through the propagated
  mount; a SIGKILL of the sidecar gives the trainer ENOTCONN and the
  restarted sidecar serves right bytes; stopping the pod leaves no mount on
  the host; the pod played again reads everything from the cache;
* node-daemonset.yaml: the DaemonSet's pod mounts a RADOS pool on a node
  directory, two trainer pods read it, one cache;
* fd-passing-pod.yaml: fusefs as uid 65534 with no capability serves a
  /dev/fuse fd that a privileged helper (here the test, in place of the
  CSI driver) mounted and passed (`podman run --preserve-fds`);
* a notebook image: uid 1000, no root, `fusefs mount` through the image's
  fusermount3 (docs/notebooks.md).

They skip, saying why, where podman is missing or cannot run a container
(CONTAINERS_CONF: tests/containers/containers.conf unless set).
"""

import hashlib
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from conftest import POOL, ROOT, BUCKET, wait_for

sys.path.insert(0, os.path.join(ROOT, "tests", "containers"))
import kube  # noqa: E402

pytestmark = pytest.mark.nosan  # the image has its own build: once, on the plain run

MiB = 1 << 20
K8S = os.path.join(ROOT, "packaging", "kubernetes")
IMAGE = os.environ.get("FUSEFS_IMAGE", "localhost/fusefs:test")
BASE = "localhost/debian:12"            # made by scripts/image.sh: the trainers' image
NB_IMAGE = IMAGE + "-notebook"
REG_FUSEFS = "registry.example.org/fusefs:0.1.0"
REG_TRAINER = "registry.example.org/trainer:latest"
CONF = os.environ.get("CONTAINERS_CONF",
                      os.path.join(ROOT, "tests", "containers", "containers.conf"))
ENV = dict(os.environ, CONTAINERS_CONF=CONF)
TAG = "fusefs-t%d" % os.getpid()         # names of what this session starts


def podman(*args, check=True, timeout=180, env=None, **kw):
    r = subprocess.run(["podman", *args], capture_output=True, text=True,
                       timeout=timeout, env=env or ENV, stdin=subprocess.DEVNULL, **kw)
    if check and r.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)}: {r.returncode}\n{r.stdout}{r.stderr}")
    return r


@pytest.fixture(scope="session")
def image():
    """the fusefs image built once per session from the checkout"""
    for tool in ("podman", "mmdebstrap"):
        if not shutil.which(tool):
            pytest.skip(f"{tool} is not installed (scripts/deps.sh installs it)")
    if os.geteuid() != 0:
        pytest.skip("the container tests run podman as root")
    r = subprocess.run(["podman", "info"], capture_output=True, text=True, env=ENV)
    if r.returncode != 0:
        pytest.skip(f"podman does not work here: {r.stderr.strip()[-300:]}")
    t0 = time.time()
    r = subprocess.run([os.path.join(ROOT, "scripts", "image.sh"), IMAGE],
                       capture_output=True, text=True, env=ENV, timeout=1800)
    assert r.returncode == 0, "image build failed:\n" + (r.stdout + r.stderr)[-4000:]
    print(f"\nimage {IMAGE} built in {time.time() - t0:.0f} s", file=sys.stderr)
    r = podman("run", "--rm", "--network", "none", BASE, "true", check=False)
    if r.returncode != 0:
        pytest.skip(f"podman cannot run a container here: {r.stderr.strip()[-300:]}")
    return IMAGE


def test_image_has_no_build_tools(image):
    out = podman("run", "--rm", "--network", "none", image, "sh", "-c",
                 "fusefs --version; for t in cc gcc make dpkg-buildpackage; do "
                 "command -v $t || true; done; dpkg -l | awk '/^ii/ {print $2}' | "
                 "grep -- '-dev$' || true").stdout.split()
    assert out[0] == "fusefs", out
    assert out[2:] == [], f"build tools or -dev packages in the runtime image: {out[2:]}"
    size = int(podman("image", "inspect", "--format", "{{.Size}}", image).stdout)
    base = int(podman("image", "inspect", "--format", "{{.Size}}",
                      "localhost/debian:12-slim").stdout)
    print(f"\nimage {size / 1e6:.0f} MB, {(size - base) / 1e6:.0f} MB over the base",
          file=sys.stderr)
    assert size - base < 150e6


# ---- host directories ----------------------------------------------------------------

def fuse_mounts_under(path):
    path = os.path.realpath(path)
    with open("/proc/self/mountinfo") as f:
        return [l for l in f if (l.split()[4] + "/").startswith(path + "/")
                and " - fuse" in l]


class SharedDir:
    """a host directory that is a shared mount (what the kubelet makes of a
    pod's volume directory, and /mnt/fusefs on a node): mounts propagate"""

    def __init__(self, path):
        self.path = str(path)
        os.makedirs(self.path, exist_ok=True)
        subprocess.run(["mount", "--bind", self.path, self.path], check=True)
        subprocess.run(["mount", "--make-rshared", self.path], check=True)

    def cleanup(self):
        left = fuse_mounts_under(self.path)
        for l in reversed(left):
            subprocess.run(["umount", "-l", l.split()[4]], check=False)
        subprocess.run(["umount", "-l", self.path], check=False)
        return left


@pytest.fixture
def shared(tmp_path):
    dirs = []

    def make(name):
        d = SharedDir(tmp_path / name)
        dirs.append(d)
        return d.path
    yield make
    left = [l for d in dirs for l in d.cleanup()]
    assert not left, f"fuse mounts left on the host: {left}"


@pytest.fixture
def pods():
    """play(pod, path) plays a derived Pod; all are removed at the end"""
    played = []

    def play(pod, path):
        kube.write(pod, path)
        played.append(pod["metadata"]["name"])
        podman("kube", "play", path)
        return pod["metadata"]["name"]
    yield play
    for name in played:
        podman("pod", "rm", "-f", "-t", "10", name, check=False)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_file(path, what, timeout=180):
    assert wait_for(lambda: os.path.exists(path), timeout=timeout, step=0.2), \
        f"{what}: {path} never appeared"


def state(ctr):
    r = podman("inspect", "--format", "{{.State.Status}} {{.State.ExitCode}}", ctr)
    status, rc = r.stdout.split()
    return status, int(rc)


def wait_exit(ctr, timeout=180):
    podman("wait", ctr, timeout=timeout)
    return state(ctr)[1]


def sha(b):
    return hashlib.sha256(b).hexdigest()


def digests(text):
    """{basename: digest} of sha256sum output"""
    return {os.path.basename(l.split()[1]): l.split()[0] for l in text.splitlines()}


SECRETS = kube.load(os.path.join(K8S, "secret-and-config.yaml"))


def config_dir(path):
    """the fusefs-config ConfigMap's fusefs.conf, as its volume shows it"""
    return kube.configmap_dir(kube.find(SECRETS, "ConfigMap", "fusefs-config"),
                              [{"key": "fusefs.conf", "path": "fusefs.conf"}], path)


def secret_with(values):
    s = kube.find(SECRETS, "Secret", "fusefs-credentials")
    s = json.loads(json.dumps(s))
    s["stringData"].update(values)
    return s


def add_mount(pod, container, name, host, path, **kw):
    c = next(c for c in pod["spec"]["containers"] if c["name"] == container)
    c.setdefault("volumeMounts", []).append({"name": name, "mountPath": path, **kw})
    pod["spec"]["volumes"].append({"name": name,
                                   "hostPath": {"path": host, "type": "Directory"}})


# ---- training-pod.yaml: the sidecar ---------------------------------------------------

# the trainer (uid 1000, no capabilities): digests of every file, holds
# "big" open after its first MiB, and on "go" (the sidecar was SIGKILLed)
# reads on, then reads everything again once the mount answers
TRAINER_KILL = r"""
set -u
M=/mnt/data/imagenet/train S=/sync
n=0; until [ -e $M/a ]; do sleep 0.2; n=$((n+1)); [ $n -lt 900 ] || exit 11; done
id -u > $S/uid
sha256sum $M/a $M/b > $S/first
exec 3< $M/big
dd bs=1M count=1 status=none <&3 | sha256sum > $S/head
touch $S/ready
n=0; until [ -e $S/go ]; do sleep 0.2; n=$((n+1)); [ $n -lt 900 ] || exit 12; done
cat <&3 >/dev/null 2>$S/err; echo $? > $S/rc
exec 3<&-
n=0; until sha256sum $M/a $M/b $M/big > $S/second.tmp 2>/dev/null; do
    sleep 0.2; n=$((n+1)); [ $n -lt 900 ] || exit 13; done
mv $S/second.tmp $S/second
"""


def training_pod(name, trainer_cmd, tmp, vol, s3store, ceph, metrics_port):
    doc = kube.find(kube.load(os.path.join(K8S, "training-pod.yaml")), "Pod")
    ak, sk = ceph.s3_credentials()
    pod, gaps = kube.derive(
        doc, name=name, images={REG_FUSEFS: IMAGE, REG_TRAINER: BASE},
        hostpaths={"dataset": vol, "cache": str(tmp / "cache"),
                   "fusefs-config": str(tmp / "cfg")},
        env={"fusefs": {"FUSEFS_SOURCE": f"s3://{BUCKET}/ctrain",
                        "FUSEFS_ENDPOINT": ceph.s3_endpoint, "FUSEFS_CACHE_SIZE": "1G",
                        "FUSEFS_METRICS": f"127.0.0.1:{metrics_port}"}},
        command={"trainer": ["sh", "-c", trainer_cmd.strip() + "\n"]},
        secret=secret_with({"aws_access_key_id": ak, "aws_secret_access_key": sk}))
    add_mount(pod, "trainer", "sync", str(tmp / "sync"), "/sync")
    return pod, gaps


def test_training_pod(image, ceph, s3store, tmp_path, shared, pods):
    rng = random.Random(39)
    files = {"a": rng.randbytes(MiB + 17), "b": rng.randbytes(300000),
             "big": rng.randbytes(48 * MiB)}
    s3store.put_many({f"ctrain/train/{k}": v for k, v in files.items()})
    vol = shared("dataset")
    os.makedirs(tmp_path / "cache")
    config_dir(str(tmp_path / "cfg"))
    sync = tmp_path / "sync"
    sync.mkdir()
    os.chmod(sync, 0o777)
    port = free_port()

    # run 1: read, SIGKILL of the sidecar mid-file, restart
    pod, gaps = training_pod(f"{TAG}-train", TRAINER_KILL, tmp_path, vol, s3store, ceph, port)
    assert "fusefs: native sidecar run as an ordinary container" in gaps
    name = pods(pod, str(tmp_path / "pod1.yaml"))
    side, trainer = f"{name}-fusefs", f"{name}-trainer"
    wait_file(sync / "ready", "the trainer read the mount")
    assert (sync / "uid").read_text().strip() == "1000"
    assert digests((sync / "first").read_text()) == {k: sha(files[k]) for k in "ab"}
    assert (sync / "head").read_text().split()[0] == sha(files["big"][:MiB])
    # the manifest's probe commands answer (podman does not run them)
    for probe, argv in kube.probe_commands(doc_of("training-pod.yaml"))["fusefs"].items():
        r = podman("exec", side, *argv, check=False)
        assert r.returncode == 0, f"{probe} {argv}: {r.stdout}{r.stderr}"
    st = json.loads(podman("exec", side, "fusefs", "status", "/mnt/data/imagenet",
                           "--json").stdout)
    assert st, st
    page = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read()
    assert b"fusefs_" in page
    log = podman("logs", side).stderr + podman("logs", side).stdout
    assert ceph.s3_credentials()[1] not in log

    podman("kill", "--signal", "KILL", side)
    assert wait_exit(side) == 137
    # the killed sidecar's mount is dead on the host (what the restart must fix)
    assert fuse_mounts_under(vol)
    with pytest.raises(OSError) as e:
        open(os.path.join(vol, "imagenet", "train", "b"), "rb")
    assert e.value.errno == 107                             # ENOTCONN
    (sync / "go").touch()
    wait_file(sync / "rc", "the trainer's read after the kill returned")
    assert (sync / "rc").read_text().strip() != "0"
    assert "Transport endpoint is not connected" in (sync / "err").read_text()

    podman("start", side)
    assert wait_exit(trainer) == 0, podman("logs", trainer).stderr
    assert digests((sync / "second").read_text()) == {k: sha(v) for k, v in files.items()}
    assert "detaching the dead mount" in podman("logs", side).stderr

    # the pod stopped: SIGTERM, fusefs unmounts, nothing left on the host
    podman("pod", "stop", "-t", "60", name)
    assert state(side) == ("exited", 0), podman("logs", side).stderr[-2000:]
    assert fuse_mounts_under(vol) == []
    podman("pod", "rm", name)

    # run 2: the same pod again on the same node: every byte from the cache
    check = ("n=0; until [ -e /mnt/data/imagenet/train/a ]; do sleep 0.2; "
             "n=$((n+1)); [ $n -lt 900 ] || exit 11; done; "
             "sha256sum /mnt/data/imagenet/train/*")
    pod, _ = training_pod(f"{TAG}-train2", check, tmp_path, vol, s3store, ceph, port)
    name = pods(pod, str(tmp_path / "pod2.yaml"))
    side, trainer = f"{name}-fusefs", f"{name}-trainer"
    assert wait_exit(trainer) == 0
    assert digests(podman("logs", trainer).stdout) == {k: sha(v) for k, v in files.items()}
    st = dict(l.split() for l in podman("exec", side, "fusefs", "stats",
                                        "/mnt/data/imagenet").stdout.splitlines())
    assert st["bytes_from_backend"] == "0" and st["misses"] == "0", st
    podman("pod", "stop", "-t", "60", name)
    assert state(side) == ("exited", 0)
    assert fuse_mounts_under(vol) == []


def doc_of(f, kind="Pod", name=None):
    return kube.find(kube.load(os.path.join(K8S, f)), kind, name)
