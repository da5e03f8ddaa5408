"""How fusefs gets onto a machine and into its mount table: `mount -t
fuse.fusefs` and fstab lines through mount(8)/mount.fuse3, the Debian
package (built with dpkg-buildpackage, installed, used, purged), the RPM
spec and the man page."""

import os
import re
import subprocess
import textwrap

import pytest

from conftest import FUSEFS, POOL, ROOT, run_fusefs
from mountlib import run_captured

pytestmark = pytest.mark.nosan  # scripts, not daemon code: once, on the plain build

PKG = os.path.join(ROOT, "packaging")


def sh_in_private_sbin(tmp_path, script, helper_link, timeout=180):
    """Run the bash @script in a private mount namespace whose /usr/sbin
    (= /sbin, merged /usr) is a copy of the real one without any installed
    mount.fuse.fusefs; with @helper_link, mount.fuse.fusefs -> FUSEFS is
    added. Either way `fusefs` is in that /usr/sbin: mount.fuse3 runs the
    subtype by name with PATH unset, i.e. sh's default path
    (/usr/local/sbin:...:/usr/sbin:...). The host's /usr/sbin is never
    touched."""
    ns = tmp_path / "ns"
    (ns / "bin").mkdir(parents=True)
    os.symlink(FUSEFS, ns / "bin" / "fusefs")
    prologue = textwrap.dedent(f"""\
        set -euo pipefail
        real={ns}/real-sbin fake={ns}/sbin
        mkdir -p $real $fake
        mount --bind /usr/sbin $real
        for f in $real/*; do ln -s "$f" "$fake/${{f##*/}}"; done
        rm -f $fake/mount.fuse.fusefs $fake/fusefs
        ln -s {FUSEFS} $fake/fusefs
        {"ln -s " + FUSEFS + " $fake/mount.fuse.fusefs" if helper_link else ""}
        mount --bind $fake /usr/sbin
        export PATH={ns}/bin:$PATH
        """)
    return subprocess.run(["unshare", "--mount", "--propagation", "private",
                           "bash", "-c", prologue + textwrap.dedent(script)],
                          capture_output=True, text=True, timeout=timeout)


def mount_script(mnt, cache, mount_cmd):
    """mount, read, stats, the mount table line, umount, wait for the
    daemon to let go of the cache."""
    return f"""
        {mount_cmd}
        echo "content: $(cat {mnt}/d/f)"
        fusefs stats {mnt} | grep -E '^(ns_files|misses) '
        grep " {mnt} " /proc/self/mounts
        umount {mnt}
        flock -w 30 {cache}/lock true && echo released
        """


@pytest.mark.parametrize("how", ["mount.fuse3", "helper-link"])
def test_mount_t_fuse_fusefs(ceph, tmp_path, how):
    ceph.put(POOL, "helper/d/f", b"through mount(8)")
    mnt, cache = tmp_path / "m", tmp_path / "c"
    mnt.mkdir()
    opts = f"cache_dir={cache},cache_size=1G,ceph_conf={ceph.conf_path},noatime"
    r = sh_in_private_sbin(tmp_path, mount_script(
        mnt, cache, f"mount -t fuse.fusefs rados://{POOL}/helper {mnt} -o {opts}"),
        helper_link=(how == "helper-link"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "content: through mount(8)" in r.stdout
    assert "ns_files 1" in r.stdout and "misses 1" in r.stdout
    # the kernel's type is fuse.fusefs, the source is the URL
    assert re.search(rf"^rados://{POOL}/helper {mnt} fuse\.fusefs r[ow],", r.stdout, re.M), r.stdout
    assert "released" in r.stdout


def test_mount_t_bad_option_fails_naming_it(ceph, tmp_path):
    mnt = tmp_path / "m"
    mnt.mkdir()
    r = sh_in_private_sbin(tmp_path, f"""
        mount -t fuse.fusefs rados://{POOL}/helper {mnt} \\
            -o cache_dir={tmp_path}/c,ceph_conf={ceph.conf_path},cache_sise=1G
        """, helper_link=False)
    assert r.returncode != 0
    assert "cache_sise" in r.stderr
    assert not os.path.ismount(mnt)


@pytest.mark.parametrize("flag", ["-v", "-n"])
def test_helper_link_accepts_mount_flags(ceph, tmp_path, flag):
    ceph.put(POOL, "helper/d/f", b"through mount(8)")
    mnt, cache = tmp_path / "m", tmp_path / "c"
    mnt.mkdir()
    opts = f"cache_dir={cache},ceph_conf={ceph.conf_path}"
    r = sh_in_private_sbin(tmp_path, mount_script(
        mnt, cache, f"mount {flag} -t fuse.fusefs rados://{POOL}/helper {mnt} -o {opts}"),
        helper_link=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "content: through mount(8)" in r.stdout


@pytest.mark.parametrize("how", ["mount.fuse3", "helper-link"])
def test_fstab_line_with_netdev(ceph, tmp_path, how):
    ceph.put(POOL, "fstab/d/f", b"from fstab")
    mnt, cache = tmp_path / "m", tmp_path / "c"
    mnt.mkdir()
    fstab = tmp_path / "fstab"
    fstab.write_text(
        "# a GPU host's dataset\n"
        f"rados://{POOL}/fstab  {mnt}  fuse.fusefs  "
        f"_netdev,nofail,noatime,cache_dir={cache},cache_size=2G,"
        f"ceph_conf={ceph.conf_path},allow_other,readahead=4  0  0\n")
    r = subprocess.run(["findmnt", "--verify", "--tab-file", str(fstab)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    r = sh_in_private_sbin(tmp_path, mount_script(mnt, cache, f"mount -T {fstab} {mnt}"),
                           helper_link=(how == "helper-link"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "content: from fstab" in r.stdout
    assert re.search(rf" {mnt} fuse\.fusefs r[ow],.*allow_other", r.stdout), r.stdout
    assert "released" in r.stdout


# ---- what the program says about itself, and the documents that must agree -----------

def help_text():
    r = subprocess.run([FUSEFS, "--help"], capture_output=True, text=True, check=True)
    return r.stdout


def help_options():
    """{long option: its default from --help, or None}"""
    opts = {}
    for line in help_text().splitlines():
        m = re.match(r"  --([a-z0-9-]+)\s", line)
        if m:
            d = re.search(r"\(default:? ([^)]*)\)", line)
            opts[m.group(1)] = d.group(1).strip() if d else None
    assert len(opts) > 20, help_text()
    return opts


def help_flags():
    """long options that take no value (their --help line has no VALUE word)"""
    return {m.group(1) for m in re.finditer(r"^  --([a-z0-9-]+)(?: +([A-Z:]+))?\s",
                                              help_text(), re.M) if not m.group(2)}


def help_commands():
    return set(re.findall(r"^(?:usage:)?\s+fusefs ([a-z|]+)", help_text(), re.M))


def man_text():
    return open(os.path.join(PKG, "fusefs.8")).read().replace("\\-", "-")


def test_configuration_md_lists_every_option_with_its_default():
    doc = open(os.path.join(ROOT, "docs", "configuration.md")).read()
    for opt, default in help_options().items():
        rows = [l for l in doc.splitlines() if re.match(rf"\| (`-[a-z]`, )?`--{opt}[ `]", l)]
        assert len(rows) == 1, f"--{opt}: {len(rows)} rows in docs/configuration.md"
        cells = [c.strip() for c in rows[0].split("|")]
        assert f"`{opt.replace('-', '_')}" in cells[2], rows[0]
        if default:
            assert default in cells[3], f"--{opt}: default {default!r} not in {rows[0]}"


def test_man_page_covers_every_option_and_command():
    man = man_text()
    for opt in help_options():
        assert f"--{opt}" in man, f"--{opt} is missing from fusefs(8)"
    for cmd in help_commands():
        for c in cmd.split("|"):
            assert re.search(rf"^\.B[RI]? .*\b{c}\b", man, re.M), f"command {c} missing"
    # it renders without warnings
    r = subprocess.run(["man", "--warnings", "-l", os.path.join(PKG, "fusefs.8")],
                       capture_output=True, text=True, env=dict(os.environ, MANWIDTH="80"))
    assert r.returncode == 0 and r.stderr.strip() == "", r.stderr


def check_config(path, tmp_path):
    """A config file parses iff fusefs gets as far as the mount point,
    which does not exist (exit 2 before any backend is touched)."""
    r = run_fusefs("mount", "--config", str(path), f"rados://{POOL}/x",
                   str(tmp_path / "nonexistent"), "--cache-dir", str(tmp_path / "c"))
    assert r.returncode == 2 and "is not a directory" in r.stderr, r.stderr


def test_example_config_is_valid_and_names_every_option(tmp_path):
    ex = os.path.join(PKG, "fusefs.conf.example")
    check_config(ex, tmp_path)
    keys = set(re.findall(r"^#?([a-z_]+) =", open(ex).read(), re.M))
    # every option except the ones that make no sense in a file
    want = {o.replace("-", "_") for o in help_options()} - {
        "config", "foreground", "debug_fuse", "syslog", "heat_half_life", "rewarm",
        "max_threads", "read_mode"}
    assert want <= keys, sorted(want - keys)
    # and a wrong key is refused, naming the line: the check can fail
    bad = tmp_path / "bad.conf"
    bad.write_text(open(ex).read() + "cache_sise = 1G\n")
    r = run_fusefs("mount", "--config", str(bad), f"rados://{POOL}/x",
                   str(tmp_path / "nonexistent"))
    assert r.returncode == 2 and "cache_sise" in r.stderr and ":" in r.stderr, r.stderr


# ---- the Debian package ------------------------------------------------------------

def sanitizer_build():
    out = subprocess.run(["ldd", FUSEFS], capture_output=True, text=True).stdout
    return "libasan" in out or "libubsan" in out


@pytest.fixture(scope="session")
def built_deb(tmp_path_factory):
    """packaging/build-deb.sh: dpkg-buildpackage in a scratch copy of the tree."""
    if sanitizer_build():
        pytest.skip("the package builds its own optimized binary: tested in the plain pass")
    out = tmp_path_factory.mktemp("deb")
    r = subprocess.run([os.path.join(PKG, "build-deb.sh"), str(out)], capture_output=True,
                       text=True, timeout=1200)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    deb = r.stdout.strip().splitlines()[-1]
    assert os.path.isfile(deb) and deb.endswith(".deb"), r.stdout
    return deb


def deb_files(deb):
    """{path: link target or None} of the non-directory entries of @deb"""
    out = subprocess.run(["dpkg-deb", "-c", deb], capture_output=True, text=True,
                         check=True).stdout
    files = {}
    for line in out.splitlines():
        if line.startswith("d"):
            continue
        name = line.split(None, 5)[5]
        name, _, target = name.partition(" -> ")
        files[name[1:]] = target or None
    return files


def expected_files():
    """what the package must hold, from the tree as it is now"""
    want = {"/usr/sbin/fusefs", "/usr/sbin/mount.fuse.fusefs", "/etc/fusefs/example.conf",
            "/usr/share/man/man8/fusefs.8.gz"}
    for u in os.listdir(os.path.join(ROOT, "systemd")):
        if u.endswith((".service", ".socket", ".timer")):
            want.add("/lib/systemd/system/" + u)
    pydir = os.path.join(ROOT, "python")
    for p in (os.listdir(pydir) if os.path.isdir(pydir) else []):
        if p.endswith(".py"):
            want.add("/usr/lib/python3/dist-packages/" + p)
    return want


def test_deb_contents(built_deb):
    files = deb_files(built_deb)
    want = expected_files()
    assert "/lib/systemd/system/fusefs@.service" in want      # helper-3's unit is there
    assert want <= set(files), sorted(want - set(files))
    assert files["/usr/sbin/mount.fuse.fusefs"] == "fusefs"
    info = subprocess.run(["dpkg-deb", "-f", built_deb, "Package", "Version", "Depends"],
                          capture_output=True, text=True, check=True).stdout
    assert "Package: fusefs" in info and "librados2" in info and "fuse3" in info, info
    conffiles = subprocess.run(["dpkg-deb", "--ctrl-tarfile", built_deb],
                               capture_output=True, check=True).stdout
    import io
    import tarfile
    with tarfile.open(fileobj=io.BytesIO(conffiles)) as t:
        cf = t.extractfile("./conffiles").read().decode().split()
    assert cf == ["/etc/fusefs/example.conf"]


def test_rpm_spec_installs_the_same_files(built_deb):
    """rpmbuild is not available here: check the spec's %files against the .deb."""
    spec = open(os.path.join(PKG, "fusefs.spec")).read()
    macros = {"%{_sbindir}": "/usr/sbin", "%{_unitdir}": "/lib/systemd/system",
              "%{_mandir}": "/usr/share/man", "%{_sysconfdir}": "/etc",
              "%{python3_sitelib}": "/usr/lib/python3/dist-packages"}
    files = spec.split("%files", 1)[1].split("%changelog", 1)[0]
    listed = set()
    for line in files.splitlines():
        line = line.strip()
        if not line or line.startswith(("%license", "%doc", "%dir")):
            continue
        path = re.sub(r"^%config\(noreplace\)\s+", "", line)
        for k, v in macros.items():
            path = path.replace(k, v)
        listed.add(path.replace("fusefs.8*", "fusefs.8.gz"))
    deb = {f for f in deb_files(built_deb) if not f.startswith("/usr/share/doc/")}
    assert listed == deb, (sorted(listed - deb), sorted(deb - listed))
    # and it installs them from the same sources as debian/rules
    for src in ("systemd/fusefs@.service", "packaging/fusefs.8",
                "packaging/fusefs.conf.example", "python/fusefs_prefetch.py"):
        if os.path.exists(os.path.join(ROOT, src)):
            assert src in spec, src
    ver = re.search(r"^Version:\s+(\S+)", spec, re.M).group(1)
    assert ver == deb_version(), "spec and debian/changelog disagree on the version"


def deb_version():
    return subprocess.run(["dpkg-parsechangelog", "-l",
                           os.path.join(PKG, "debian", "changelog"), "-S", "Version"],
                          capture_output=True, text=True, check=True).stdout.strip()


def dpkg_status(pkg="fusefs"):
    r = subprocess.run(["dpkg-query", "-W", "-f=${db:Status-Abbrev}", pkg],
                       capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else ""


def wait_released(cache, timeout=30):
    return subprocess.run(["flock", "-w", str(timeout), os.path.join(cache, "lock"),
                           "true"]).returncode == 0


def test_deb_install_mount_from_config_and_purge(ceph, built_deb, tmp_path):
    if dpkg_status().startswith("i"):
        pytest.fail("a fusefs package is already installed here; this test installs "
                    "and purges its own")
    ceph.put(POOL, "pkg/d/f", b"from the package")
    name = "pkgtest%d" % os.getpid()
    conf = f"/etc/fusefs/{name}.conf"
    mnt, cache = tmp_path / "m", tmp_path / "c"
    mnt.mkdir()
    files = []
    try:
        r = subprocess.run(["dpkg", "-i", built_deb], capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
        assert dpkg_status() == "ii"
        files = subprocess.run(["dpkg", "-L", "fusefs"], capture_output=True, text=True,
                               check=True).stdout.split()
        for f in expected_files():
            assert os.path.lexists(f), f
        r = subprocess.run(["/usr/sbin/fusefs", "--version"], capture_output=True, text=True)
        assert r.stdout.split() == ["fusefs", deb_version()], r.stdout
        assert subprocess.run(["man", "-w", "fusefs"], capture_output=True,
                              text=True).stdout.strip() == "/usr/share/man/man8/fusefs.8.gz"
        if os.path.exists(os.path.join(ROOT, "python", "fusefs_prefetch.py")):
            subprocess.run(["/usr/bin/python3", "-c", "import fusefs_prefetch"], check=True,
                           cwd="/")
        # a mount from /etc/fusefs/NAME.conf, as fusefs@NAME.service does it
        with open(conf, "w") as f:
            f.write(f"[mount]\nsource = rados://{POOL}/pkg\nmountpoint = {mnt}\n"
                    f"cache_dir = {cache}\ncache_size = 1G\nceph_conf = {ceph.conf_path}\n")
        unit = open("/lib/systemd/system/fusefs@.service").read()
        assert "--config /etc/fusefs/%i.conf" in unit
        r = run_captured(["/usr/sbin/fusefs", "mount", "--config", conf])
        assert r.returncode == 0, r.stderr
        try:
            assert (mnt / "d" / "f").read_bytes() == b"from the package"
            r = subprocess.run(["/usr/sbin/fusefs", "stats", str(mnt)],
                               capture_output=True, text=True)
            assert "\nmisses 1\n" in r.stdout, r.stdout
        finally:
            subprocess.run(["/usr/sbin/fusefs", "umount", str(mnt)], check=True)
        assert wait_released(str(cache))
        # an fstab line through the installed mount helper, the rest from the config
        fstab = tmp_path / "fstab"
        fstab.write_text(f"rados://{POOL}/pkg {mnt} fuse.fusefs config={conf},_netdev 0 0\n")
        r = run_captured(["mount", "-T", str(fstab), str(mnt)])
        assert r.returncode == 0, r.stderr
        try:
            assert (mnt / "d" / "f").read_bytes() == b"from the package"
            r = subprocess.run(["/usr/sbin/fusefs", "stats", str(mnt)],
                               capture_output=True, text=True)
            assert "\nmisses 0\n" in r.stdout, r.stdout      # the cache of the first mount
        finally:
            subprocess.run(["umount", str(mnt)], check=True)
        assert wait_released(str(cache))
    finally:
        if os.path.ismount(mnt):
            subprocess.run(["umount", "-l", str(mnt)])
        if os.path.exists(conf):
            os.unlink(conf)
        r = subprocess.run(["dpkg", "--purge", "fusefs"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert dpkg_status() in ("", "un", "pn"), dpkg_status()
    left = [f for f in files if os.path.lexists(f) and not os.path.isdir(f)]
    assert not left, left
    assert not os.path.exists("/etc/fusefs")
    assert not [f for f in os.listdir("/var/lib/dpkg/info") if f.startswith("fusefs.")]


# ---- Kubernetes manifests and the container image definition -------------------------

from k8slib import all_containers, env_of, k8s_docs, pod_spec  # noqa: E402
DOCKERFILE = os.path.join(PKG, "container", "Dockerfile")
ENTRYPOINT_SPECIAL = {"FUSEFS_SOURCE", "FUSEFS_MOUNTPOINT", "FUSEFS_OPTIONS", "FUSEFS_BIN"}
SUBCOMMAND_FLAGS = {"list", "name", "wait", "timeout", "top", "from", "json"}


def is_fusefs_image(c):
    return c["image"].rsplit("/", 1)[-1].split(":")[0] == "fusefs"


def exec_commands(c):
    """every exec argv of a container: command/args and probes"""
    cmds = []
    if "command" in c or "args" in c:
        cmds.append(list(c.get("command", [])) + list(c.get("args", [])))
    for p in ("startupProbe", "readinessProbe", "livenessProbe"):
        if p in c and "exec" in c[p]:
            cmds.append(c[p]["exec"]["command"])
    return cmds


def fusefs_invocations(argv):
    """fusefs command lines inside an argv, including inside `bash -c` scripts"""
    if argv and os.path.basename(argv[0]) == "fusefs":
        return [list(argv)]
    if "fusefs" in argv:          # a wrapper: fuse-starter ... -- fusefs mount ...
        return [list(argv[argv.index("fusefs"):])]
    found = []
    for a in argv:
        for line in a.replace("\\\n", " ").splitlines():
            toks = line.split()
            if toks and toks[0] in ("exec", "then", "do"):
                toks = toks[1:]
            if toks and toks[0] == "fusefs":
                found.append(toks)
            elif "fusefs" in toks:       # e.g. trap '... fusefs umount ...' EXIT
                found.append(toks[toks.index("fusefs"):])
    return found


def test_manifests_parse_and_are_complete():
    docs = k8s_docs()
    kinds = [d["kind"] for _, d in docs]
    assert kinds.count("Secret") == 1 and kinds.count("ConfigMap") == 1, kinds
    assert len([d for _, d in docs if pod_spec(d)]) >= 3
    for f, d in docs:
        assert d.get("apiVersion") and d["metadata"].get("name"), f


def test_manifests_reference_only_real_options_commands_and_env():
    opts, flags = help_options(), help_flags()
    commands = {c for cmd in help_commands() for c in cmd.split("|")}
    ep = open(os.path.join(PKG, "container", "entrypoint.sh")).read()
    for name in ENTRYPOINT_SPECIAL:
        assert name in ep, name
    checked = 0
    for f, d in k8s_docs():
        spec = pod_spec(d)
        if not spec:
            continue
        for c in all_containers(spec):
            if is_fusefs_image(c):
                for name, val in env_of(c).items():
                    if not name.startswith("FUSEFS_") or name in ENTRYPOINT_SPECIAL:
                        continue
                    opt = name[len("FUSEFS_"):].lower().replace("_", "-")
                    assert opt in opts, f"{f}: {name} is not a fusefs option"
                    if opt in flags:
                        assert val in ("true", "false"), f"{f}: {name}={val}"
                    checked += 1
            for argv in exec_commands(c):
                for inv in fusefs_invocations(argv):
                    assert len(inv) > 1 and (inv[1] in commands or "://" in inv[1]), inv
                    for t in inv[2:]:
                        if t.startswith("--"):
                            o = t[2:].split("=")[0]
                            assert o in opts or o in SUBCOMMAND_FLAGS, f"{f}: {t}"
                            checked += 1
    assert checked >= 10


def test_manifests_secrets_configmaps_and_volumes_resolve(tmp_path):
    docs = k8s_docs()
    secrets = {d["metadata"]["name"]: set(d.get("stringData", {})) | set(d.get("data", {}))
               for _, d in docs if d["kind"] == "Secret"}
    cms = {d["metadata"]["name"]: d["data"] for _, d in docs if d["kind"] == "ConfigMap"}

    def check_items(kind, ref):
        pool = secrets if kind == "secret" else cms
        name = ref.get("name") or ref.get("secretName")
        assert name in pool, f"{kind} {name} is not defined"
        for it in ref.get("items", []):
            assert it["key"] in pool[name], f"{kind} {name} has no key {it['key']}"

    for f, d in docs:
        spec = pod_spec(d)
        if not spec:
            continue
        vols = {v["name"]: v for v in spec.get("volumes", [])}
        for v in vols.values():
            if "secret" in v:
                check_items("secret", v["secret"])
            if "configMap" in v:
                check_items("configMap", v["configMap"])
            for src in v.get("projected", {}).get("sources", []):
                for kind in ("secret", "configMap"):
                    if kind in src:
                        check_items(kind, src[kind])
        for c in all_containers(spec):
            for m in c.get("volumeMounts", []):
                assert m["name"] in vols, f"{f}: volume {m['name']} is not defined"
            for e in c.get("env", []):
                ref = e.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    assert ref["key"] in secrets.get(ref["name"], ()), f"{f}: {ref}"
    # the shared config file is one fusefs accepts
    conf = tmp_path / "fusefs.conf"
    conf.write_text(cms["fusefs-config"]["fusefs.conf"])
    check_config(conf, tmp_path)


def mount_for(c, path):
    """the volumeMount of container @c that holds @path (longest match)"""
    best = None
    for m in c.get("volumeMounts", []):
        mp = m["mountPath"].rstrip("/")
        if path == mp or path.startswith(mp + "/"):
            if best is None or len(mp) > len(best["mountPath"]):
                best = m
    return best


def test_manifests_sidecar_security_and_propagation():
    docs = k8s_docs()
    node_paths = {}
    for f, d in docs:
        spec = pod_spec(d)
        if not spec:
            continue
        vols = {v["name"]: v for v in spec.get("volumes", [])}
        sidecars = [c for c in all_containers(spec) if is_fusefs_image(c)]
        for c in sidecars:
            env = env_of(c)
            mnt = env["FUSEFS_MOUNTPOINT"]
            m = mount_for(c, mnt)
            assert m and m.get("mountPropagation") == "Bidirectional", f"{f}: {mnt}"
            # the API server accepts Bidirectional only from privileged containers
            assert c["securityContext"].get("privileged") is True, f
            # the FUSE device, from the node
            dev = mount_for(c, "/dev/fuse")
            assert dev and vols[dev["name"]]["hostPath"] == {"path": "/dev/fuse",
                                                             "type": "CharDevice"}, f
            # the cache survives pod restarts: a hostPath
            cm = mount_for(c, env["FUSEFS_CACHE_DIR"])
            assert cm and "hostPath" in vols[cm["name"]], f
            # readiness only when the mount answers
            assert c["startupProbe"]["exec"]["command"] == ["fusefs", "stats", mnt], f
            assert c["readinessProbe"]["exec"]["command"] == \
                ["fusefs", "status", mnt, "--json"], f
            if "hostPath" in vols[m["name"]]:
                rel = os.path.relpath(mnt, m["mountPath"])
                node_paths[os.path.join(vols[m["name"]]["hostPath"]["path"], rel)] = f
            # the other containers see the mount through HostToContainer, unprivileged
            for o in all_containers(spec):
                if o is c:
                    continue
                for om in o.get("volumeMounts", []):
                    if om["name"] == m["name"]:
                        assert om.get("mountPropagation") == "HostToContainer", f
                        # writable: the loader publishes its lists through
                        # the control files (a read-only bind: EROFS)
                        assert not om.get("readOnly"), f
                assert not o.get("securityContext", {}).get("privileged"), f
        # a native sidecar starts before the trainer and stops after it
        for c in spec.get("initContainers", []):
            if is_fusefs_image(c):
                assert c.get("restartPolicy") == "Always", f
        # fusefs inside the trainer itself: CAP_SYS_ADMIN only, not privileged
        if not sidecars and any(fusefs_invocations(a) for c in spec["containers"]
                                for a in exec_commands(c)):
            for c in spec["containers"]:
                sc = c["securityContext"]
                assert not sc.get("privileged"), f
                assert sc["capabilities"]["add"] == ["SYS_ADMIN"], f
                assert sc["capabilities"]["drop"] == ["ALL"], f
    # pods that read a node mount point at what a DaemonSet mounts
    assert node_paths
    for f, d in docs:
        spec = pod_spec(d)
        if not spec or any(is_fusefs_image(c) for c in all_containers(spec)):
            continue
        for v in spec.get("volumes", []):
            hp = v.get("hostPath", {}).get("path", "")
            if hp.startswith("/mnt/fusefs"):
                assert hp in node_paths, f"{f}: nothing mounts {hp}"


def image_paths(deb):
    """paths that exist in the image: the package's files and directories,
    what the Dockerfile creates or copies, the base system's basics"""
    paths = set(deb_files(deb))
    out = subprocess.run(["dpkg-deb", "-c", deb], capture_output=True, text=True).stdout
    paths |= {l.split(None, 5)[5][1:].rstrip("/") for l in out.splitlines()
              if l.startswith("d")}
    text = open(DOCKERFILE).read().replace("\\\n", " ")
    for m in re.finditer(r"mkdir -p ((?:/\S+\s*)+)", text):
        paths |= set(m.group(1).split())
    for m in re.finditer(r"^COPY (?!--from)(\S+) (\S+)", text, re.M):
        src, dst = m.groups()
        assert src == "." or os.path.exists(os.path.join(ROOT, src)), src
        paths.add(dst)
    return paths, text


def test_image_definition_and_paths(built_deb):
    paths, text = image_paths(built_deb)
    assert re.search(r"^FROM debian:12(-slim)?\s*$", text, re.M), "runtime base is Debian 12"
    assert re.search(r"^FROM debian:12\S* AS build", text, re.M)
    assert "packaging/build-deb.sh" in text and "fusefs_*.deb" in text
    ep = re.search(r'^ENTRYPOINT \[(.*)\]', text, re.M).group(1)
    ep = [a.strip().strip('"') for a in ep.split(",")]
    if ep[:2] == ["/usr/bin/tini", "--"]:          # PID 1 from the Debian package
        assert re.search(r"apt-get install[^\n]*\btini\b", text), "tini is not installed"
        ep = ep[2:]
    assert ep[0] in paths
    checked = 0
    for f, d in k8s_docs():
        spec = pod_spec(d)
        if not spec:
            continue
        for c in all_containers(spec):
            if not is_fusefs_image(c):
                continue
            refs = [v for v in env_of(c).values() if v and v.startswith("/")]
            for argv in exec_commands(c):
                refs += [a for a in argv if a.startswith("/")]
                if argv[0] in ("fusefs",):
                    assert "/usr/sbin/fusefs" in paths
            for p in refs:
                m = mount_for(c, p)
                if m:
                    vol = {v["name"]: v for v in spec["volumes"]}[m["name"]]
                    rel = os.path.relpath(p, m["mountPath"])
                    items = [it["path"] for it in vol.get("configMap", {}).get("items", [])]
                    for src in vol.get("projected", {}).get("sources", []):
                        for k in ("configMap", "secret"):
                            items += [it["path"] for it in src.get(k, {}).get("items", [])]
                    if items and rel != ".":
                        assert rel in items, f"{f}: {p} is not in volume {m['name']}"
                else:
                    assert p in paths, f"{f}: {p} is neither in a volume nor in the image"
                checked += 1
    assert checked >= 8
