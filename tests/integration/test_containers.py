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
    # a host where podman cannot start a container (the build may work):
    # skip; a build that fails where containers run: the Dockerfile's fault
    t = podman("run", "--rm", "--network", "none", BASE, "true", check=False)
    if podman("image", "exists", BASE, check=False).returncode == 0 and t.returncode:
        pytest.skip(f"podman cannot run a container here: {t.stderr.strip()[-300:]}")
    assert r.returncode == 0, "image build failed:\n" + (r.stdout + r.stderr)[-4000:]
    print(f"\nimage {IMAGE} built in {time.time() - t0:.0f} s", file=sys.stderr)
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
    """{basename: digest} of the sha256sum lines in @text"""
    return {os.path.basename(w[1]): w[0] for w in map(str.split, text.splitlines())
            if len(w) == 2 and len(w[0]) == 64}


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
M={mnt}/train S=/sync
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


def training_mountpoint():
    """where the manifest's sidecar mounts (the trainer sees the same path)"""
    fuse_c = doc_of("training-pod.yaml")["spec"]["initContainers"][0]
    return next(e["value"] for e in fuse_c["env"] if e["name"] == "FUSEFS_MOUNTPOINT")


def training_pod(name, trainer_cmd, tmp, vol, s3store, ceph, metrics_port):
    doc = doc_of("training-pod.yaml")
    ak, sk = ceph.s3_credentials()
    pod, gaps = kube.derive(
        doc, name=name, images={REG_FUSEFS: IMAGE, REG_TRAINER: BASE},
        hostpaths={"dataset": vol, "cache": str(tmp / "cache"),
                   "fusefs-config": str(tmp / "cfg")},
        env={"fusefs": {"FUSEFS_SOURCE": f"s3://{BUCKET}/ctrain",
                        "FUSEFS_ENDPOINT": ceph.s3_endpoint, "FUSEFS_CACHE_SIZE": "1G",
                        "FUSEFS_METRICS": f"127.0.0.1:{metrics_port}"}},
        command={"trainer": ["sh", "-c",
                             trainer_cmd.strip().replace("{mnt}", training_mountpoint()) + "\n"]},
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
    mnt = training_mountpoint()
    st = json.loads(podman("exec", side, "fusefs", "status", mnt, "--json").stdout)
    assert st, st
    page = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read()
    assert b"fusefs_" in page
    log = podman("logs", side).stderr + podman("logs", side).stdout
    assert ceph.s3_credentials()[1] not in log

    podman("kill", "--signal", "KILL", side)
    assert wait_exit(side) == 137
    # the killed sidecar's mount is dead on the host (what the restart must fix)
    assert fuse_mounts_under(vol)
    rel = os.path.relpath(mnt, "/mnt/data")                 # the volume's mountPath
    with pytest.raises(OSError) as e:
        open(os.path.join(vol, rel, "train", "b"), "rb")
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
    check = ("n=0; until [ -e {mnt}/train/a ]; do sleep 0.2; "
             "n=$((n+1)); [ $n -lt 900 ] || exit 11; done; sha256sum {mnt}/train/*")
    pod, _ = training_pod(f"{TAG}-train2", check, tmp_path, vol, s3store, ceph, port)
    name = pods(pod, str(tmp_path / "pod2.yaml"))
    side, trainer = f"{name}-fusefs", f"{name}-trainer"
    assert wait_exit(trainer) == 0
    assert digests(podman("logs", trainer).stdout) == {k: sha(v) for k, v in files.items()}
    st = dict(l.split() for l in podman("exec", side, "fusefs", "stats",
                                        mnt).stdout.splitlines())
    assert st["bytes_from_backend"] == "0" and st["misses"] == "0", st
    podman("pod", "stop", "-t", "60", name)
    assert state(side) == ("exited", 0)
    assert fuse_mounts_under(vol) == []


def doc_of(f, kind="Pod", name=None):
    return kube.find(kube.load(os.path.join(K8S, f)), kind, name)


# ---- node-daemonset.yaml: one node mount, two training pods --------------------------

def ceph_client_dir(ceph, path):
    """the ceph-config projected volume: ceph.conf (monitors) and the
    read-only client's keyring"""
    from test_deployment import client_conf
    os.makedirs(os.path.join(path, "keyring"))
    with open(os.path.join(path, "ceph.conf"), "w") as f:
        f.write(client_conf(ceph))
    key = subprocess.run(["ceph-authtool", "--gen-print-key"], capture_output=True,
                         text=True, check=True).stdout.strip()
    kr = os.path.join(path, "keyring", "ceph.client.fusefs.keyring")
    fd = os.open(kr, os.O_WRONLY | os.O_CREAT, 0o400)
    with os.fdopen(fd, "w") as f:
        f.write(f"[client.fusefs]\n    key = {key}\n")
    return path


def test_node_daemonset_two_pods_one_cache(image, ceph, tmp_path, shared, pods):
    rng = random.Random(40)
    files = {f"f{i}": rng.randbytes(200000 + i * 1000) for i in range(6)}
    ceph.put_many(POOL, {f"cds/train/{k}": v for k, v in files.items()})
    node = shared("node")                        # /mnt/fusefs on the node
    os.makedirs(tmp_path / "cache")
    config_dir(str(tmp_path / "cfg"))
    ceph_client_dir(ceph, str(tmp_path / "ceph"))
    docs = kube.load(os.path.join(K8S, "node-daemonset.yaml"))
    ds = kube.find(docs, "DaemonSet")
    pod, gaps = kube.derive(
        ds, name=f"{TAG}-node", images={REG_FUSEFS: image},
        hostpaths={"node-mounts": node, "cache": str(tmp_path / "cache"),
                   "fusefs-config": str(tmp_path / "cfg"),
                   "ceph-config": str(tmp_path / "ceph")},
        env={"fusefs": {"FUSEFS_SOURCE": f"rados://{POOL}/cds", "FUSEFS_CACHE_SIZE": "1G"}})
    assert "DaemonSet: its pod template played as a Pod" in gaps
    name = pods(pod, str(tmp_path / "ds.yaml"))
    side = f"{name}-fusefs"
    mnt = "/mnt/fusefs/imagenet"
    assert wait_for(lambda: podman("exec", side, "fusefs", "stats", mnt,
                                   check=False).returncode == 0, timeout=120), \
        podman("logs", side).stderr[-2000:]
    for probe, argv in kube.probe_commands(ds)["fusefs"].items():
        r = podman("exec", side, *argv, check=False)
        assert r.returncode == 0, f"{probe} {argv}: {r.stdout}{r.stderr}"

    # two training pods of different jobs, each its list, one after the other
    lists = tmp_path / "lists"
    lists.mkdir()
    trainer_doc = kube.find(docs, "Pod", "train-on-node-mount")
    backend = []
    for job, order in (("joba", sorted(files)), ("jobb", sorted(files, reverse=True))):
        (lists / f"{job}.txt").write_text("".join(f"train/{f}\n" for f in order))
        cmd = (f"fusefs prefetch /mnt/data --list /lists/{job}.txt --name {job} --wait "
               f"--timeout 120 && sha256sum /mnt/data/train/*")
        tp, _ = kube.derive(trainer_doc, name=f"{TAG}-{job}", images={REG_TRAINER: image},
                            hostpaths={"dataset": os.path.join(node, "imagenet")},
                            command={"trainer": ["sh", "-c", cmd]})
        add_mount(tp, "trainer", "lists", str(lists), "/lists", readOnly=True)
        tname = pods(tp, str(tmp_path / f"{job}.yaml"))
        assert wait_exit(f"{tname}-trainer") == 0, podman("logs", f"{tname}-trainer").stderr
        out = podman("logs", f"{tname}-trainer").stdout
        assert digests(out) == {k: sha(v) for k, v in files.items()}, out
        st = dict(l.split() for l in podman("exec", side, "fusefs", "stats",
                                            mnt).stdout.splitlines())
        backend.append(int(st["bytes_from_backend"]))
    status = json.loads(podman("exec", side, "fusefs", "status", mnt, "--json").stdout)
    names = json.dumps(status)
    assert '"joba"' in names and '"jobb"' in names, status
    # one cache: the second job read nothing from the pool
    assert backend == [sum(map(len, files.values()))] * 2, backend

    podman("pod", "stop", "-t", "60", name)
    assert state(side) == ("exited", 0), podman("logs", side).stderr[-2000:]
    assert fuse_mounts_under(node) == []


# ---- fd-passing-pod.yaml: fusefs without privilege -----------------------------------

def mount_fuse_fd(mnt, uid, gid):
    """the privileged side (the CSI driver's part): open /dev/fuse, mount it
    on @mnt for @uid; returns the fd"""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open("/dev/fuse", os.O_RDWR)
    opts = (f"fd={fd},rootmode=40000,user_id={uid},group_id={gid},"
            "default_permissions,allow_other")
    if libc.mount(b"fusefs-fd", mnt.encode(), b"fuse.fusefs", 2 | 4 | 1,  # nosuid nodev ro
                  opts.encode()) != 0:
        e = ctypes.get_errno()
        os.close(fd)
        raise OSError(e, os.strerror(e))
    return fd


def test_fd_passing_pod(image, ceph, s3store, tmp_path, shared):
    rng = random.Random(41)
    files = {"x": rng.randbytes(700000), "y": rng.randbytes(3 * MiB)}
    s3store.put_many({f"cfd/train/{k}": v for k, v in files.items()})
    doc = doc_of("fd-passing-pod.yaml")
    fuse_c = next(c for c in doc["spec"]["initContainers"] if c["name"] == "fusefs")
    trainer_c = doc["spec"]["containers"][0]
    vol = shared("dataset")
    cache = tmp_path / "cache"
    cache.mkdir()
    os.chown(cache, 65534, 65534)                 # the emptyDir, as uid 65534 finds it
    os.chmod(cache, 0o700)
    ak, sk = ceph.s3_credentials()
    # fuse-starter's command: what follows "--", the cluster's values in
    argv = fuse_c["command"][fuse_c["command"].index("--") + 1:]
    assert argv[:2] == ["fusefs", "mount"] and argv[3] == "/dev/fd/3", argv
    argv[2] = f"s3://{BUCKET}/cfd"
    argv = [a if not a.startswith("--endpoint=") else f"--endpoint={ceph.s3_endpoint}"
            for a in argv]
    argv = [a if not a.startswith("--cache-size=") else "--cache-size=1G" for a in argv]
    # the fusefs container without the dataset volume: with it podman run
    # hangs, looking the FUSE mount up before its daemon runs; its probes
    # are not run here
    run = kube.run_args(fuse_c, {"cache": str(cache)},
                        skip_volumes=("dataset", "fuse-fd-passing"))
    assert "--privileged" not in run and "--user" in run and "65534:65534" in run
    fd = mount_fuse_fd(vol, 65534, 65534)
    ctr = f"{TAG}-fd"
    try:
        env = dict(ENV, AWS_ACCESS_KEY_ID=ak, AWS_SECRET_ACCESS_KEY=sk)
        # the fd as descriptor 3 of podman, passed on to the container;
        # this process closes its copy, or reads would hang after the daemon
        subprocess.run(["bash", "-c", f'exec "$@" 3<&{fd} {fd}<&-', "sh", "podman", "run",
                        "-d", "--name", ctr, "--network", "host", "--preserve-fds", "1",
                        *run, "--entrypoint", argv[0], image, *argv[1:]],
                       pass_fds=(fd,), env=env, check=True, capture_output=True, timeout=120)
    finally:
        os.close(fd)
    try:
        pid = int(podman("inspect", "--format", "{{.State.Pid}}", ctr).stdout)
        assert wait_for(lambda: os.path.exists(os.path.join(vol, "train")), timeout=60), \
            podman("logs", ctr).stderr[-2000:]
        status = open(f"/proc/{pid}/status").read()
        assert "\nUid:\t65534\t65534\t65534\t65534\n" in status
        assert "\nCapEff:\t0000000000000000\n" in status, status
        assert "\nCapPrm:\t0000000000000000\n" in status, status
        trun = kube.run_args(trainer_c, {"dataset": vol})
        r = podman("run", "--rm", "--name", f"{ctr}-trainer", "--network", "none", *trun,
                   BASE, "sh", "-c", "sha256sum /mnt/data/train/*")
        assert digests(r.stdout) == {k: sha(v) for k, v in files.items()}, r.stdout
        podman("stop", "-t", "60", ctr)
        assert state(ctr) == ("exited", 0)
        log = podman("logs", ctr).stderr
        assert "passthrough: needs CAP_SYS_ADMIN" in log, log[-2000:]
        assert sk not in log
        # the daemon gone: the mount answers ENOTCONN until the privileged side unmounts
        with pytest.raises(OSError) as e:
            open(os.path.join(vol, "train", "x"), "rb")
        assert e.value.errno == 107
    finally:
        podman("rm", "-f", ctr, check=False)
        subprocess.run(["umount", vol], check=False)


# ---- a notebook image: uid 1000, fusermount3 from the image --------------------------

NOTEBOOK = r"""
set -eu
echo "uid $(id -u)"
mkdir -p ~/data ~/.cache
M="fusefs mount rados://fusefs/cnb $HOME/data --cache-dir $HOME/.cache/fusefs --cache-size 1G --ceph-conf $HOME/ceph.conf"
$M
grep " $HOME/data " /proc/self/mounts
sha256sum ~/data/train/*
fusefs stats ~/data | sed -n 's/^\(misses\|bytes_from_backend\) /first: &/p'
fusefs umount ~/data
flock -w 30 ~/.cache/fusefs/lock true
$M
sha256sum ~/data/train/* >/dev/null
fusefs stats ~/data | sed -n 's/^\(misses\|bytes_from_backend\) /second: &/p'
fusefs umount ~/data
flock -w 30 ~/.cache/fusefs/lock true
echo done
"""


def test_notebook_image(image, ceph, tmp_path):
    from test_deployment import client_conf
    rng = random.Random(42)
    files = {"n0": rng.randbytes(400000), "n1": rng.randbytes(90000)}
    ceph.put_many(POOL, {f"cnb/train/{k}": v for k, v in files.items()})
    podman("build", "--pull=never", "--build-arg", f"FUSEFS_IMAGE={image}", "-f",
           os.path.join(ROOT, "tests", "containers", "notebook.Dockerfile"),
           "-t", NB_IMAGE, os.path.join(ROOT, "tests", "containers"), timeout=600)
    try:
        notebook_runs(files, ceph, tmp_path)
    finally:
        podman("rmi", NB_IMAGE, check=False)     # rebuilt by every run: not kept


def notebook_runs(files, ceph, tmp_path):
    from test_deployment import client_conf
    conf = tmp_path / "ceph.conf"
    conf.write_text(client_conf(ceph))
    os.chmod(conf, 0o644)
    # /dev/fuse as a Debian host's udev makes it (0666): the device node the
    # container gets has the mode of the one given to --device
    dev = tmp_path / "fuse"
    os.mknod(dev, 0o666 | 0o020000, os.makedev(10, 229))
    os.chmod(dev, 0o666)
    base = ["run", "--rm", "--network", "host", "--device", f"{dev}:/dev/fuse",
            "-v", f"{conf}:/home/jovyan/ceph.conf:ro"]
    r = podman(*base, "--name", f"{TAG}-nb", "--cap-add", "SYS_ADMIN", NB_IMAGE,
               "bash", "-c", NOTEBOOK, check=False, timeout=300)
    out = r.stdout
    assert r.returncode == 0, out + r.stderr
    assert "uid 1000\n" in out
    assert " /home/jovyan/data fuse.fusefs " in out and "user_id=1000" in out, out
    assert digests(out) == {k: sha(v) for k, v in files.items()}
    assert "first: misses 0\n" not in out
    assert "second: misses 0\n" in out and "second: bytes_from_backend 0\n" in out, out
    # without CAP_SYS_ADMIN in the bounding set fusermount3 cannot mount
    r = podman(*base, "--name", f"{TAG}-nb2", NB_IMAGE, "bash", "-c",
               "mkdir -p ~/data ~/.cache; fusefs mount rados://fusefs/cnb ~/data "
               "--cache-dir ~/.cache/fusefs --ceph-conf ~/ceph.conf", check=False)
    assert r.returncode != 0
    assert "fusermount3: mount failed: Operation not permitted" in r.stderr, r.stderr
