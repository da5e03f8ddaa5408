"""Deployments as far as this machine allows.

* The Kubernetes sidecar pattern without Kubernetes: the pod volume is a
  shared mount on the "host" (kubelet makes its pod directories rshared),
  the fusefs daemon runs in its own mount namespace with shared
  propagation (mountPropagation: Bidirectional), the trainer in another
  one that is a slave of the host's (HostToContainer) and was created
  before the mount existed. SIGTERM of the daemon while the trainer holds
  a file open must leave no stuck mount anywhere and give the trainer an
  error, not a hang; a restarted sidecar reuses the cache.
* Notebooks: a real unprivileged user mounts with fusermount3 (through
  libfuse), keeps the cache in their home, reads, asks for stats and
  unmounts with `fusefs umount`.
"""

import errno
import os
import pathlib
import pwd
import random
import shutil
import re
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap
import time

import pytest

from conftest import FUSEFS, POOL, run_fusefs, wait_for

pytestmark = pytest.mark.nosan  # scripts, not daemon code: once, on the plain build

MiB = 1 << 20

# The trainer container: waits for the dataset to appear through
# propagation, checks the warm file, holds the big file open, then on "go"
# reads the rest of it (the daemon is gone by then) and reports.
TRAINER = r"""
import os, sys, time, hashlib
vol = sys.argv[1]
def say(*a):
    print(*a, flush=True)
say("waiting")                              # in its namespace, before the mount
deadline = time.time() + 60
while not os.path.exists(os.path.join(vol, "warm")):
    if time.time() > deadline:
        say("timeout waiting for the mount"); sys.exit(1)
    time.sleep(0.05)
say("warm", hashlib.sha256(open(os.path.join(vol, "warm"), "rb").read()).hexdigest())
fd = os.open(os.path.join(vol, "big"), os.O_RDONLY)
say("head", hashlib.sha256(os.pread(fd, 1 << 20, 0)).hexdigest())
say("opened")
sys.stdin.readline()                        # "go": the daemon was sent SIGTERM
t0 = time.time()
try:
    off = 1 << 20
    while True:
        b = os.pread(fd, 1 << 20, off)
        if not b:
            break
        off += len(b)
    say("read-ok", off)
except OSError as e:
    say("read-error", e.errno, round(time.time() - t0, 1))
deadline = time.time() + 30
# the pod volume itself (a bind mount) stays; the fuse mount on it must go
while any(l.split()[1] == vol and l.split()[2].startswith("fuse")
          for l in open("/proc/self/mounts")):
    if time.time() > deadline:
        say("still-mounted"); sys.exit(1)
    time.sleep(0.05)
say("unmounted-here")
"""


def mounted(path, mounts="/proc/self/mounts"):
    with open(mounts) as f:
        return [l for l in f if l.split()[1] == str(path)]



class Sidecar:
    """fusefs -f in its own mount namespace, / made rshared (Bidirectional)."""

    def __init__(self, ceph, src, vol, cache, log):
        self.log_path = log
        self.logf = open(log, "ab")
        self.proc = subprocess.Popen(
            ["unshare", "--mount", "--propagation", "shared", FUSEFS, "mount", src,
             str(vol), "-f", "--cache-dir", str(cache), "--ceph-conf", ceph.conf_path],
            stdout=self.logf, stderr=subprocess.STDOUT)

    def log(self):
        return open(self.log_path, errors="replace").read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(timeout=60)
        self.logf.close()
        return rc


def test_sidecar_propagation_and_sigterm(ceph, tmp_path):
    warm = random.Random(1).randbytes(3 * MiB)
    big = random.Random(2).randbytes(40 * MiB)
    ceph.put_many(POOL, {"side/warm": warm, "side/big": big})
    vol, cache = tmp_path / "vol", tmp_path / "cache"
    vol.mkdir()
    import hashlib
    # the host side of the pod volume: a shared mount point
    subprocess.run(["mount", "--bind", str(vol), str(vol)], check=True)
    subprocess.run(["mount", "--make-shared", str(vol)], check=True)
    trainer = sidecar = None
    try:
        # the trainer starts first (containers start in any order) and is a
        # slave of the host: it must see the mount arrive by propagation
        trainer = subprocess.Popen(
            ["unshare", "--mount", "--propagation", "slave", sys.executable, "-c",
             TRAINER, str(vol)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            text=True)
        assert trainer.stdout.readline().strip() == "waiting"
        sidecar = Sidecar(ceph, f"rados://{POOL}/side", vol, cache, tmp_path / "side.log")
        # the sidecar's mount reached the host (Bidirectional) ...
        assert wait_for(lambda: mounted(vol) and len(mounted(vol)) == 2), sidecar.log()
        assert any("fuse.fusefs" in l for l in mounted(vol))
        # ... and the trainer (HostToContainer), which reads through it
        assert trainer.stdout.readline().split() == ["warm", hashlib.sha256(warm).hexdigest()]
        assert trainer.stdout.readline().split() == \
            ["head", hashlib.sha256(big[:MiB]).hexdigest()]
        assert trainer.stdout.readline().strip() == "opened"

        # SIGTERM with a file held open (stop() waits at most 60 s: a hang
        # guard, 1-2 s expected); the clean exit stores the chunks in
        # flight and commits the index
        rc = sidecar.stop()
        log = sidecar.log()
        assert rc == 0, log
        trainer.stdin.write("go\n")
        trainer.stdin.flush()
        out, _ = trainer.communicate(timeout=60)
        lines = out.splitlines()
        # an error, not a hang and not silently short data
        assert lines and lines[0].startswith("read-error"), out
        err = int(lines[0].split()[1])
        assert err in (errno.ENOTCONN, errno.EIO, errno.ECONNABORTED), out
        assert "unmounted-here" in lines, out
        assert trainer.returncode == 0
        # the fuse mount left the host's table too: only the bind mount is left
        assert wait_for(lambda: len(mounted(vol)) == 1), mounted(vol)
        assert not any("fuse" in l for l in mounted(vol))
        # nothing left in any namespace (the sidecar's died with it)
        assert not any("fuse.fusefs" in l and "side" in l
                       for l in open("/proc/self/mountinfo"))

        # a restarted sidecar reuses the whole cache: the warm file is a hit
        sidecar = Sidecar(ceph, f"rados://{POOL}/side", vol, cache, tmp_path / "side2.log")
        assert wait_for(lambda: len(mounted(vol)) == 2), sidecar.log()
        assert (vol / "warm").read_bytes() == warm
        r = run_fusefs("stats", str(vol))
        st = dict(l.split() for l in r.stdout.splitlines())
        assert st["misses"] == "0" and int(st["hits"]) > 0, r.stdout
        assert sidecar.stop() == 0
        assert wait_for(lambda: len(mounted(vol)) == 1)
    finally:
        for p in (trainer, sidecar and sidecar.proc):
            if p and p.poll() is None:
                p.kill()
                p.wait()
        subprocess.run(["umount", "-l", str(vol)], check=False)
        subprocess.run(["umount", "-l", str(vol)], check=False)


# ---- notebooks: a real unprivileged user ---------------------------------------------

def client_conf(ceph):
    """The [global] lines a client needs (monitors, auth), nothing that
    points into root's cluster directory."""
    keep = ("fsid", "mon host", "auth ", "ms bind")
    lines, section = ["[global]"], None
    for l in open(ceph.conf_path):
        s = l.strip()
        if s.startswith("["):
            section = s
        elif section == "[global]" and s.startswith(keep):
            lines.append(s)
    return "\n".join(lines) + "\n"


@pytest.fixture
def nbuser(tmp_path):
    """A real unprivileged user with a home directory (removed afterwards),
    a copy of the fusefs binary that user may execute (the checkout may
    live under a directory only root can enter), and
    u.ns(script, fuse_conf=None): run the bash @script as root in a private
    mount namespace in which `asuser CMD` runs CMD as the user (fusefs on
    PATH), /dev/fuse is usable by everyone (a Debian host's udev makes it
    0666; containers like this one often have it 0600) and, with
    @fuse_conf, that text is /etc/fuse.conf. The host is left untouched."""
    name = "fusefsnb%04d" % random.randrange(10000)
    subprocess.run(["useradd", "--create-home", "--user-group", "--shell", "/bin/bash",
                    name], check=True)
    pw = pwd.getpwnam(name)
    bindir = pathlib.Path(tempfile.mkdtemp(prefix="fusefs-nb-"))   # /tmp/pytest-of-root is 0700
    os.chmod(bindir, 0o755)
    subprocess.run(["cp", FUSEFS, str(bindir / "fusefs")], check=True)
    os.chmod(bindir / "fusefs", 0o755)
    u = type("User", (), {})()
    u.name, u.uid, u.home, u.bindir = name, pw.pw_uid, pw.pw_dir, str(bindir)
    u.fuse_dev_open = bool(os.stat("/dev/fuse").st_mode & 0o006 == 0o006)

    def ns(script, fuse_conf=None, timeout=180):
        pro = ["set -euo pipefail",
               # runuser resets PATH: set it inside
               f"asuser() {{ runuser -u {name} -- bash -c "
               f"\"export PATH={bindir}:/usr/bin:/bin HOME={pw.pw_dir}; set -e; $1\"; }}"]
        if not u.fuse_dev_open:
            if not os.path.exists(bindir / "fuse"):
                os.mknod(bindir / "fuse", 0o666 | stat.S_IFCHR, os.makedev(10, 229))
                os.chmod(bindir / "fuse", 0o666)
            pro.append(f"mount --bind {bindir}/fuse /dev/fuse")
        if fuse_conf is not None:
            (bindir / "fuse.conf").write_text(fuse_conf)
            pro.append(f"mount --bind {bindir}/fuse.conf /etc/fuse.conf")
        return subprocess.run(["unshare", "--mount", "--propagation", "private", "bash",
                               "-c", "\n".join(pro) + "\n" + textwrap.dedent(script)],
                              capture_output=True, text=True, timeout=timeout)
    u.ns = ns
    try:
        yield u
    finally:
        time.sleep(0.3)
        subprocess.run(["userdel", "--remove", "--force", name], check=False,
                       capture_output=True)
        shutil.rmtree(bindir, ignore_errors=True)
    assert not os.path.exists(pw.pw_dir)


def user_ceph_conf(ceph, u):
    conf = os.path.join(u.home, "ceph.conf")
    with open(conf, "w") as f:
        f.write(client_conf(ceph))
    os.chown(conf, u.uid, -1)


def test_notebook_user_mounts_reads_and_unmounts(ceph, nbuser):
    ceph.put(POOL, "nb/train/part-0", b"for the notebook")
    user_ceph_conf(ceph, nbuser)
    mnt = os.path.join(nbuser.home, "data")
    mount = (f"fusefs mount rados://{POOL}/nb ~/data --cache-dir ~/.cache/fusefs "
             "--cache-size 1G --ceph-conf ~/ceph.conf")
    r = nbuser.ns(f"""
        asuser 'mkdir -p ~/data ~/.cache; {mount}'
        echo "user reads: $(asuser 'cat ~/data/train/part-0')"
        grep " {mnt} " /proc/self/mounts
        stat -c 'index owner %u' {nbuser.home}/.cache/fusefs/index
        # without allow_other nobody else gets in, not even root
        ls {mnt} 2>&1 | sed 's/^/root: /' || true
        asuser 'fusefs stats ~/data; getfattr --only-values -n user.fusefs.stats ~/data'
        asuser 'fusefs umount ~/data && flock -w 30 ~/.cache/fusefs/lock true && echo released'
        grep -c " {mnt} " /proc/self/mounts || true
        # the next notebook session reuses the cache in the home directory
        asuser '{mount}; cat ~/data/train/part-0 >/dev/null
                fusefs stats ~/data | sed "s/^/second: /"
                fusefs umount ~/data; flock -w 30 ~/.cache/fusefs/lock true'
        """)
    out = r.stdout
    assert r.returncode == 0, out + r.stderr
    assert "user reads: for the notebook" in out
    assert re.search(rf" {mnt} fuse\.fusefs r[ow],.*user_id={nbuser.uid},", out), out
    assert f"index owner {nbuser.uid}" in out
    assert re.search(r"^root: ls: .*Permission denied", out, re.M), out
    assert "ns_files 1\n" in out and out.count("\nmisses 1\n") == 2, out
    assert "released\n0\n" in out, out
    assert "second: misses 0\n" in out and "second: hits 0\n" not in out, out


def test_notebook_allow_other_needs_user_allow_other(ceph, nbuser):
    ceph.put(POOL, "nbo/f", b"shared with the team")
    user_ceph_conf(ceph, nbuser)
    mnt = os.path.join(nbuser.home, "data")
    mount = (f"mkdir -p ~/data ~/.cache; fusefs mount rados://{POOL}/nbo ~/data "
             "--cache-dir ~/.cache/fusefs --ceph-conf ~/ceph.conf -o allow_other")
    # the stock /etc/fuse.conf: fusermount3 refuses, and says why
    r = nbuser.ns(f"asuser '{mount}'", fuse_conf="#user_allow_other\n")
    assert r.returncode != 0
    assert "user_allow_other" in r.stderr, r.stderr
    # with user_allow_other other users, here root, can read
    r = nbuser.ns(f"""
        asuser '{mount}'
        echo "root reads: $(cat {mnt}/f)"
        grep " {mnt} " /proc/self/mounts
        asuser 'fusefs umount ~/data && flock -w 30 ~/.cache/fusefs/lock true && echo released'
        """, fuse_conf="user_allow_other\n")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "root reads: shared with the team" in r.stdout
    assert "allow_other" in r.stdout and "released" in r.stdout


@pytest.mark.skipif(os.stat("/dev/fuse").st_mode & 0o006 == 0o006,
                    reason="/dev/fuse is open to everyone here")
def test_notebook_without_dev_fuse_access_says_so(ceph, nbuser):
    """A container whose /dev/fuse is 0600 (this one): libfuse cannot open
    it and never gets to fusermount3; the error names /dev/fuse."""
    user_ceph_conf(ceph, nbuser)
    r = subprocess.run(["/usr/sbin/runuser", "-u", nbuser.name, "--", "bash", "-c",
                        f"mkdir -p ~/data ~/.cache; {nbuser.bindir}/fusefs mount "
                        f"rados://{POOL}/nb ~/data --cache-dir ~/.cache/fusefs "
                        "--ceph-conf ~/ceph.conf"],
                       capture_output=True, text=True, timeout=60, cwd="/")
    assert r.returncode != 0
    assert "/dev/fuse: Permission denied" in r.stderr, r.stderr


# ---- the container entrypoint, without a container engine -----------------------------

ENTRYPOINT = os.path.join(os.path.dirname(__file__), "..", "..", "packaging", "container",
                          "entrypoint.sh")


def start_entrypoint(ceph, tmp_path, prefix):
    mnt = tmp_path / "data"
    env = dict(os.environ, FUSEFS_BIN=FUSEFS, FUSEFS_SOURCE=f"rados://{POOL}/{prefix}",
               FUSEFS_MOUNTPOINT=str(mnt), FUSEFS_CACHE_DIR=str(tmp_path / "cache"),
               FUSEFS_CACHE_SIZE="1G", FUSEFS_CEPH_CONF=ceph.conf_path,
               FUSEFS_ALLOW_OTHER="true", FUSEFS_VIRTUAL_HOST="false",
               FUSEFS_OPTIONS="noatime")
    log = open(tmp_path / "entrypoint.log", "wb")
    p = subprocess.Popen(["bash", ENTRYPOINT], env=env, stdout=log, stderr=subprocess.STDOUT)
    ok = wait_for(lambda: mounted(mnt) or p.poll() is not None)
    assert ok and p.poll() is None, open(tmp_path / "entrypoint.log").read()
    return p, mnt


def test_entrypoint_mounts_from_env_and_unmounts_on_sigterm(ceph, tmp_path):
    ceph.put(POOL, "ep/f", b"in the pod")
    p, mnt = start_entrypoint(ceph, tmp_path, "ep")
    try:
        assert (mnt / "f").read_bytes() == b"in the pod"
        line = mounted(mnt)[0]
        assert "allow_other" in line
        # the readiness probe of the manifests
        assert run_fusefs("stats", str(mnt)).returncode == 0
        p.send_signal(signal.SIGTERM)            # the kubelet stopping the container
        assert p.wait(timeout=60) == 0, open(tmp_path / "entrypoint.log").read()
        assert not mounted(mnt)
        assert run_fusefs("stats", str(mnt)).returncode != 0   # not ready any more
    finally:
        if p.poll() is None:
            p.kill()
        if mounted(mnt):
            subprocess.run(["umount", "-l", str(mnt)])


def test_entrypoint_detaches_the_mount_when_fusefs_dies(ceph, tmp_path):
    """SIGKILL of fusefs (OOM): the entrypoint must not leave a dead mount on
    the propagated volume (the node could not clean up the pod)."""
    ceph.put(POOL, "ep2/f", b"x")
    p, mnt = start_entrypoint(ceph, tmp_path, "ep2")
    try:
        daemon = [c for c in subprocess.run(["pgrep", "-P", str(p.pid)], capture_output=True,
                                            text=True).stdout.split()]
        assert len(daemon) == 1
        os.kill(int(daemon[0]), signal.SIGKILL)
        rc = p.wait(timeout=60)
        assert rc == 128 + signal.SIGKILL, rc
        assert not mounted(mnt), mounted(mnt)
        log = open(tmp_path / "entrypoint.log").read()
        assert "detaching" in log, log
    finally:
        if p.poll() is None:
            p.kill()
        if mounted(mnt):
            subprocess.run(["umount", "-l", str(mnt)])


def test_entrypoint_refuses_unknown_variables(tmp_path):
    r = subprocess.run(["bash", ENTRYPOINT], capture_output=True, text=True, timeout=30,
                       env=dict(os.environ, FUSEFS_BIN=FUSEFS, FUSEFS_SOURCE="rados://p/x",
                                FUSEFS_MOUNTPOINT=str(tmp_path / "m"),
                                FUSEFS_CACHE_SISE="1G"))
    assert r.returncode == 2 and "FUSEFS_CACHE_SISE" in r.stderr, r.stderr
    assert not (tmp_path / "m").exists()
