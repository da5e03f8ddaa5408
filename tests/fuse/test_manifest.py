"""Manifest mounts (docs/manifests.md) on file:// sources: `fusefs manifest
create` and `diff`, a mount that reads no listing and serves the pinned
versions, every kind of malformed line refused with its line number, gzip
and zstd, and a 1,000,000-entry manifest.  Also the never-stale namespace
of a listed mount: the background re-listing after a remount, `fusefs
refresh` and the swap under open files."""

import gzip
import os
import subprocess
import time

import pytest

from mountlib import run_fusefs, wait_for
from checks import rnd
from util import put, read_uncached

MAGIC = "#fusefs-manifest 1\n"


def create(src, out):
    r = run_fusefs("manifest", "create", f"file://{src}")
    assert r.returncode == 0, r.stderr
    with open(out, "w") as f:
        f.write(r.stdout)
    return r.stdout


def entries(text):
    return sorted(line for line in text.splitlines() if line and not line.startswith("#"))


def test_create_diff_and_mount_serve_the_tree(mounter, src, tmp_path):
    data = {"a.txt": b"hello\n", "d1/b.bin": rnd(300000, 1),
            "d1/d2/we ird%name\tx": b"hostile", "e/empty": b""}
    put(src, data)
    man = tmp_path / "m.txt"
    text = create(src, man)
    assert text.startswith(MAGIC)
    lines = entries(text)
    assert len(lines) == 4
    assert "d1/d2/we%20ird%25name%09x\t7\t" in text      # encoded, one line
    same = run_fusefs("manifest", "diff", str(man), str(man))
    assert same.returncode == 0 and same.stdout == "", same

    m = mounter("--manifest", str(man))
    for rel, want in data.items():
        assert os.stat(m.path(rel)).st_size == len(want)
        assert read_uncached(m.path(rel)) == want, rel
    s = m.stats()
    assert s["listings"] == 0, s           # the namespace came from the manifest only
    assert s["ns_files"] == 4, s
    assert "read from the manifest" in m.log()


def test_diff_names_added_removed_changed(src, tmp_path):
    put(src, {"keep": b"k", "change": b"1", "gone": b"g"})
    a = create(src, tmp_path / "a.txt")
    os.unlink(os.path.join(src, "gone"))
    put(src, {"change": b"22", "new": b"n"})
    create(src, tmp_path / "b.txt")
    with gzip.open(tmp_path / "b.txt.gz", "wt") as f:
        f.write(open(tmp_path / "b.txt").read())
    r = run_fusefs("manifest", "diff", str(tmp_path / "a.txt"), str(tmp_path / "b.txt.gz"))
    assert r.returncode == 1, r
    got = sorted(line.split("\t")[0] for line in r.stdout.splitlines())
    assert got == ["+ new", "- gone", "~ change"], r.stdout
    assert "1 added, 1 removed, 1 changed" in r.stderr
    assert a  # the first manifest was written


BAD_LINES = [
    ("a\t1", "expected PATH<TAB>SIZE<TAB>VERSION"),
    ("a\t1\tv\txxh3:0123456789abcdef\textra", "too many fields"),
    ("a\t-5\tv", "size is not a decimal number"),
    ("a\t17592186044417\tv", "size is not a decimal number"),       # 2^44 + 1
    ("a\t99999999999999999999999\tv", "size is not a decimal number"),
    ("a\t12x\tv", "size is not a decimal number"),
    ("a\t1\t", "version is empty"),
    ("a\t1\t" + "v" * 48, "longer than 47 bytes"),
    ("a\t1\tv w", "version holds a space"),
    ("a\t1\tv\x1b", "version holds a space, control"),
    ("a\t1\tv\txxh3:zz", "checksum is not xxh3"),
    ("bad%2\t1\tv", "bad percent-encoding"),
    ("bad%zz\t1\tv", "bad percent-encoding"),
    ("raw space\t1\tv", "raw control byte or space"),
    ("../up\t1\tv", "'..'"),
    ("a//b\t1\tv", "empty"),
    ("dir/\t1\tv", "ends in '/'"),
    ("\t1\tv", "empty path"),
    ("x" * 17000 + "\t1\tv", "line longer than 16384 bytes"),
]


@pytest.mark.parametrize("bad,why", BAD_LINES, ids=[w for _, w in BAD_LINES])
def test_malformed_line_is_refused_with_its_number(mounter, src, tmp_path, bad, why):
    put(src, {"ok": b"ok"})
    man = tmp_path / "bad.txt"
    with open(man, "w") as f:
        f.write(MAGIC + "# a comment\n\nok\t2\tv1\n" + bad + "\nok2\t1\tv\n")
    m = mounter("--manifest", str(man), start=False)
    with pytest.raises(AssertionError) as e:
        m.start(timeout=30)
    m.proc = None
    msg = str(e.value)
    assert "bad.txt:5: " in msg and why in msg, msg
    assert not os.path.ismount(m.mnt)
    # and the same error from `manifest diff`
    r = run_fusefs("manifest", "diff", str(man), str(man))
    assert r.returncode == 2 and "bad.txt:5: " in r.stderr and why in r.stderr, r


BAD_FILES = [
    (b"", ":1: empty file"),
    (b"a\t1\tv\n", ":1: not a fusefs manifest"),
    (gzip.compress(MAGIC.encode() + b"a\t1\tv\n" * 1000, mtime=0)[:-40],
     "damaged or truncated gzip"),
]


# ids from the reasons: the same in every pytest-xdist worker
@pytest.mark.parametrize("content,why", BAD_FILES, ids=[w for _, w in BAD_FILES])
def test_bad_file_is_refused(mounter, tmp_path, content, why):
    man = tmp_path / "m"
    man.write_bytes(content)
    m = mounter("--manifest", str(man), start=False)
    with pytest.raises(AssertionError) as e:
        m.start(timeout=30)
    m.proc = None
    assert why in str(e.value), str(e.value)


def test_gzip_and_zstd_manifests(mounter, src, tmp_path):
    put(src, {"x/y": b"yy", "z": rnd(5000, 3)})
    create(src, tmp_path / "m.txt")
    subprocess.run(["gzip", "-k", str(tmp_path / "m.txt")], check=True)
    subprocess.run(["zstd", "-q", str(tmp_path / "m.txt")], check=True)
    for name in ("m.txt.gz", "m.txt.zst"):
        m = mounter("--manifest", str(tmp_path / name), cache=str(tmp_path / ("c" + name)))
        assert read_uncached(m.path("x/y")) == b"yy"
        assert read_uncached(m.path("z")) == rnd(5000, 3)
        m.umount()


def test_pinned_version_is_never_served_changed(mounter, src, tmp_path):
    put(src, {"cached": b"old cached", "uncached": b"old uncached", "gone": b"g"})
    man = tmp_path / "m.txt"
    create(src, man)
    m = mounter("--manifest", str(man), "--revalidate", "1")
    assert read_uncached(m.path("cached")) == b"old cached"
    put(src, {"cached": b"NEW", "uncached": b"NEW uncached!"})
    os.unlink(os.path.join(src, "gone"))
    # the cached file keeps the pinned bytes; the other fails, never new bytes
    assert read_uncached(m.path("cached")) == b"old cached"
    with pytest.raises(OSError):
        read_uncached(m.path("uncached"))
    assert os.stat(m.path("uncached")).st_size == len(b"old uncached")
    # a re-check (after --revalidate) logs the change and keeps the pin
    assert wait_for(lambda: "changed since the manifest" in m.log(), timeout=20), m.log()
    with pytest.raises(OSError):
        read_uncached(m.path("uncached"))
    with pytest.raises(OSError):
        read_uncached(m.path("gone"))
    assert "reading 'gone' chunk 0 failed" in m.log() or "vanished" in m.log(), m.log()


def test_million_entry_manifest(mounter, src, tmp_path):
    man = tmp_path / "big.txt.gz"
    with gzip.open(man, "wt", compresslevel=1) as f:
        f.write(MAGIC)
        for d in range(1000):
            f.write("".join(f"d{d:03}/f{i:04}\t{i}\tv{i}\n" for i in range(1000)))
    put(src, {"d007/f0042": b"x" * 42})
    m = mounter("--manifest", str(man))
    assert m.stats()["ns_files"] == 1000000
    assert len([n for n in os.listdir(m.mnt) if n.startswith("d")]) == 1000
    names = sorted(os.listdir(m.path("d999")))
    assert names == [f"f{i:04}" for i in range(1000)]
    assert os.stat(m.path("d123/f0777")).st_size == 777
    # the manifest pins version "v42", the source has another: never served
    with pytest.raises(OSError):
        read_uncached(m.path("d007/f0042"))


# ---- listed mounts: never stale after a remount ----

def test_remount_sees_new_object_without_list_refresh(mounter, src, tmp_path):
    put(src, {"a": b"a"})
    m = mounter("--list-refresh", "0")
    assert "a" in os.listdir(m.mnt) and not os.path.exists(m.path("b"))
    m.umount()
    put(src, {"b/new": b"new object"})
    m = mounter()        # the stored namespace, served at once; re-listed in the background
    assert wait_for(lambda: os.path.exists(m.path("b/new")), timeout=20), m.log()
    assert read_uncached(m.path("b/new")) == b"new object"
    assert m.stats()["ns_swaps"] >= 1
    assert "re-listing file://" in m.log() or "background" in m.log()


def test_remount_maps_the_manifest_tree_however_old(mounter, src, tmp_path):
    """A remount with the same manifest file maps the stored namespace
    without reading the manifest again, even once --list-refresh seconds
    have passed: a manifest mount is never re-listed by the clock."""
    put(src, {"a": b"a", "d/b": b"b"})
    man = tmp_path / "m.txt"
    create(src, man)
    cache = str(tmp_path / "c")
    m = mounter("--manifest", str(man), "--list-refresh", "1", cache=cache)
    assert "read from the manifest" in m.log()
    m.umount()
    time.sleep(1.5)
    m = mounter("--manifest", str(man), "--list-refresh", "1", cache=cache)
    assert "namespace mapped from its image" in m.log(), m.log()
    assert "read from the manifest" not in m.log(), m.log()
    assert read_uncached(m.path("d/b")) == b"b"


def test_refresh_command_and_swap_under_open_files(mounter, src, tmp_path):
    put(src, {"f": b"version one"})
    m = mounter("--list-refresh", "0")
    with open(m.path("f"), "rb") as held:
        assert held.read() == b"version one"          # cached now
        put(src, {"f": b"version two!", "later": b"l"})
        r = run_fusefs("refresh", m.mnt, "--wait", "--timeout", "30")
        assert r.returncode == 0, r
        assert os.path.exists(m.path("later"))
        held.seek(0)
        os.posix_fadvise(held.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        assert held.read() == b"version one"          # the open file keeps its version
    assert read_uncached(m.path("f")) == b"version two!"
    # the control file does the same
    put(src, {"third": b"3"})
    with open(m.path(".fusefs/refresh"), "w") as f:
        f.write("1\n")
    assert wait_for(lambda: os.path.exists(m.path("third")), timeout=20)
    r = run_fusefs("refresh", "/")
    assert r.returncode == 1 and "not inside a fusefs mount" in r.stderr


@pytest.mark.parametrize("order", ["config_last", "config_first"])
def test_create_with_config_lists_the_source_given(src, tmp_path, order):
    """`manifest create SOURCE --config FILE`: the file's options apply
    and the command line overrides them, as for a mount; the SOURCE given
    is listed, not the file's `source =`, in either order"""
    put(src, {"wanted": b"w"})
    other = tmp_path / "other"
    other.mkdir()
    (other / "from_the_file").write_bytes(b"o")
    conf = tmp_path / "m.conf"
    conf.write_text(f"[mount]\nsource = file://{other}\nmountpoint = {tmp_path}/mnt\n"
                    f"cache_dir = {tmp_path}/cache\n")
    args = [f"file://{src}", "--config", str(conf)]
    if order == "config_first":
        args = args[1:] + args[:1]
    r = run_fusefs("manifest", "create", *args)
    assert r.returncode == 0, r.stderr
    assert entries(r.stdout) and entries(r.stdout)[0].startswith("wanted\t"), r.stdout
    assert f"#source file://{src}\n" in r.stdout, r.stdout
    # without a SOURCE on the command line the file's is used
    r = run_fusefs("manifest", "create", "--config", str(conf))
    assert r.returncode == 0, r.stderr
    assert entries(r.stdout)[0].startswith("from_the_file\t"), r.stdout
