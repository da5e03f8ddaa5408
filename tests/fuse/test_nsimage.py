"""The namespace image (docs/cache-format.md, "Namespace image"): a remount
maps CACHE/namespace.img instead of building the tree; an image that is
damaged or of another listing is never served, the tree is rebuilt from
the LMDB listing and the image written again."""

import os
import shutil

import pytest

from mountlib import run_fusefs
from util import put, read_uncached

FILES = {f"d{d}/f{i}": f"file {d}/{i}".encode() for d in range(3) for i in range(40)}
MAPPED = "namespace mapped from its image"
LOADED = "namespace loaded from the namespace cache"


def image(m):
    return os.path.join(m.cache, "namespace.img")


def tree(m):
    return {os.path.relpath(os.path.join(d, f), m.mnt)
            for d, _, fs in os.walk(m.mnt) for f in fs
            if not os.path.relpath(d, m.mnt).startswith(".fusefs")}


def first_mount(mounter, src):
    put(src, FILES)
    m = mounter("--list-refresh", "0")
    assert tree(m) == set(FILES)
    m.umount()
    assert os.path.getsize(image(m)) > 4096
    return m


def test_remount_maps_the_image(mounter, src):
    m = first_mount(mounter, src)
    m = mounter("--list-refresh", "0")
    assert MAPPED in m.log(), m.log()
    assert LOADED not in m.log()
    assert tree(m) == set(FILES)
    assert m.stats()["ns_files"] == len(FILES)
    for name in ("d0/f0", "d2/f39", "d1/f17"):
        assert read_uncached(m.path(name)) == FILES[name]
    assert sorted(os.listdir(m.path("d1"))) == sorted(f"f{i}" for i in range(40))
    with pytest.raises(FileNotFoundError):
        os.stat(m.path("d1/f40"))


@pytest.mark.parametrize("how", ["flip-header", "flip-body", "flip-last", "truncate", "zeros"])
def test_damaged_image_is_rebuilt(mounter, src, how):
    m = first_mount(mounter, src)
    path = image(m)
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        if how == "truncate":
            f.truncate(size - 100)
        elif how == "zeros":
            f.write(b"\0" * size)
        else:
            at = {"flip-header": 20, "flip-body": size // 2, "flip-last": size - 1}[how]
            f.seek(at)
            c = f.read(1)
            f.seek(at)
            f.write(bytes([c[0] ^ 0x40]))
    m = mounter("--list-refresh", "0")
    log = m.log()
    assert "is damaged or of another version: not used" in log, log
    assert LOADED in log and MAPPED not in log
    assert tree(m) == set(FILES)
    assert read_uncached(m.path("d2/f7")) == FILES["d2/f7"]
    m.umount()
    m = mounter("--list-refresh", "0")             # written again
    assert MAPPED in m.log(), m.log()
    assert tree(m) == set(FILES)


def test_image_follows_the_latest_listing(mounter, src):
    m = first_mount(mounter, src)
    old = image(m) + ".saved"
    shutil.copy(image(m), old)
    m = mounter("--list-refresh", "0")
    put(src, {"d9/new": b"new object"})
    r = run_fusefs("refresh", m.mnt, "--wait", "--timeout", "30")
    assert r.returncode == 0, r
    m.umount()
    # no listing at this remount: the new object comes from the new image
    m = mounter("--list-refresh", "0")
    assert MAPPED in m.log(), m.log()
    assert read_uncached(m.path("d9/new")) == b"new object"
    m.umount()
    # the image of the listing before is not the stored listing's
    shutil.copy(old, image(m))
    m = mounter("--list-refresh", "0")
    assert "is of another listing" in m.log(), m.log()
    assert LOADED in m.log()
    assert read_uncached(m.path("d9/new")) == b"new object"
    assert tree(m) == set(FILES) | {"d9/new"}
