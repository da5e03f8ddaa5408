"""Failures at mount are named for what they are: a host name that does
not resolve (DNS), a refused connection, a TLS handshake with a server
that does not speak TLS, a server that accepts and never answers
(timeout), and HTTP errors by their status and S3 error code; "no such
bucket" only for S3's NoSuchBucket. An endpoint with credentials in it
(USER:KEY@) is refused by every command, its text never printed. No
Ceph: 127.0.0.1 only (the .invalid name never leaves the resolver)."""

import socket
import time

import pytest

from hostile_s3 import BUCKET, HostileS3
from mountlib import BAD_WORDS, run_fusefs

CREDS = {"AWS_ACCESS_KEY_ID": "errors-test", "AWS_SECRET_ACCESS_KEY": "not-a-secret",
         "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent"}


def mount_error(tmp_path, endpoint, *args, bucket=BUCKET, timeout=60):
    mnt = tmp_path / "mnt"
    mnt.mkdir(exist_ok=True)
    r = run_fusefs("mount", f"s3://{bucket}", str(mnt), "-f", "--cache-dir",
                   str(tmp_path / "cache"), "--endpoint", endpoint,
                   "--connect-timeout", "5", *args, timeout=timeout, env=CREDS)
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert not [w for w in BAD_WORDS if w in r.stderr], r.stderr
    assert "not-a-secret" not in r.stderr
    return r.stderr


def closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]       # nothing listens once closed


@pytest.fixture
def srv():
    s = HostileS3()
    yield s
    s.close()


def test_dns_failure_is_named(tmp_path):
    err = mount_error(tmp_path, "http://nonexistent.invalid:8080")
    assert ("cannot reach the S3 endpoint http://nonexistent.invalid:8080: "
            "DNS failure, the host name does not resolve") in err, err
    assert "refused" not in err.lower(), err


def test_connection_refused_is_named(tmp_path):
    port = closed_port()
    err = mount_error(tmp_path, f"http://127.0.0.1:{port}")
    assert f"cannot reach the S3 endpoint http://127.0.0.1:{port}: connection refused" in err, err
    assert "DNS" not in err, err


def test_tls_error_against_plain_http_is_named(tmp_path, srv):
    err = mount_error(tmp_path, f"https://127.0.0.1:{srv.port}")
    assert f"cannot reach the S3 endpoint https://127.0.0.1:{srv.port}: TLS error" in err, err
    assert "does the endpoint speak HTTPS?" in err, err


def test_timeout_is_named(tmp_path):
    with socket.socket() as s:          # accepts (backlog), never answers
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        port = s.getsockname()[1]
        t0 = time.monotonic()
        # a hang guard (about 1-4 s is usual: the op timeout, retried)
        err = mount_error(tmp_path, f"http://127.0.0.1:{port}", "--op-timeout", "1",
                          timeout=180)
        assert time.monotonic() - t0 < 120
    assert f"cannot reach the S3 endpoint http://127.0.0.1:{port}: timed out" in err, err


def test_http_errors_are_named_by_s3_code(tmp_path, srv):
    for mode, want in (
            ("list_404_plain", f"the S3 endpoint answered HTTP 404 at {srv.endpoint}/"
                               f"{BUCKET}/ (listing bucket '{BUCKET}')"),
            ("list_404_nosuchkey", "the S3 endpoint answered HTTP 404 NoSuchKey at "
                                   f"{srv.endpoint}/{BUCKET}"),
            ("list_403", f"access to bucket '{BUCKET}' denied (HTTP 403 AccessDenied): "
                         "check the credentials")):
        srv.mode = mode
        err = mount_error(tmp_path, srv.endpoint)
        assert want in err, (mode, err)
        assert "no such bucket" not in err, (mode, err)


def test_no_such_bucket_only_for_nosuchbucket(tmp_path, srv):
    err = mount_error(tmp_path, srv.endpoint, bucket="other-bucket")
    assert f"no such bucket 'other-bucket' at http://127.0.0.1:{srv.port}" in err, err


KEY_ID, SECRET = "AKIAEXAMPLE", "TOPSECRET"
CREDS_REFUSED = ("fusefs: the S3 endpoint must not contain credentials (USER:KEY@); "
                 "use the environment or --credentials-file")


def userinfo_endpoint(where, srv):
    """an endpoint with KEY_ID:SECRET@ in it: at a closed port, at the
    live server, or with a scheme fusefs does not take"""
    if where == "closed":
        return f"http://{KEY_ID}:{SECRET}@127.0.0.1:{closed_port()}"
    if where == "live":
        return f"http://{KEY_ID}:{SECRET}@127.0.0.1:{srv.port}"
    return f"ftp://{KEY_ID}:{SECRET}@127.0.0.1:{srv.port}"


def refused_quietly(r):
    out = r.stdout + r.stderr
    assert r.returncode != 0, (r.returncode, out)
    assert KEY_ID not in out and SECRET not in out, out
    assert CREDS_REFUSED in r.stderr, r.stderr
    assert not [w for w in BAD_WORDS if w in out], out


@pytest.mark.parametrize("where", ["closed", "live", "ftp"])
@pytest.mark.parametrize("how", ["flag", "env"])
def test_manifest_create_refuses_credentials_in_the_endpoint(srv, where, how):
    """`fusefs manifest create` refuses an endpoint (--endpoint or
    AWS_ENDPOINT_URL) with USER:KEY@ in it, and prints neither part"""
    ep = userinfo_endpoint(where, srv)
    args = ["--endpoint", ep] if how == "flag" else []
    env = dict(CREDS, **({"AWS_ENDPOINT_URL": ep} if how == "env" else {}))
    r = run_fusefs("manifest", "create", f"s3://{BUCKET}", *args, timeout=60, env=env)
    refused_quietly(r)
    assert r.stdout == "", r.stdout
    assert not srv.requests, srv.requests       # nothing was sent


def test_manifest_diff_refuses_credentials_in_the_endpoint(srv, tmp_path):
    """a manifest read from S3 (AWS_ENDPOINT_URL) by `fusefs manifest diff`"""
    local = tmp_path / "m.manifest"
    local.write_text("#fusefs-manifest 1\n")
    env = dict(CREDS, AWS_ENDPOINT_URL=userinfo_endpoint("live", srv))
    r = run_fusefs("manifest", "diff", f"s3://{BUCKET}/m.manifest", str(local),
                   timeout=60, env=env)
    refused_quietly(r)
    assert not srv.requests, srv.requests


@pytest.mark.parametrize("how", ["flag", "env"])
def test_mount_refuses_credentials_in_the_endpoint(tmp_path, srv, how):
    """the mount's check before going to the background: the same words"""
    ep = userinfo_endpoint("live", srv)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    args = ["--endpoint", ep] if how == "flag" else []
    env = dict(CREDS, **({"AWS_ENDPOINT_URL": ep} if how == "env" else {}))
    r = run_fusefs("mount", f"s3://{BUCKET}", str(mnt), "-f", "--cache-dir",
                   str(tmp_path / "cache"), *args, timeout=60, env=env)
    refused_quietly(r)
    assert not srv.requests, srv.requests


SOURCE_REFUSED = ("fusefs: SOURCE must not contain credentials (USER:KEY@); "
                  "use the environment or --credentials-file")


@pytest.mark.parametrize("cmd", ["create", "mount"])
def test_credentials_in_the_source_are_refused_unprinted(srv, tmp_path, cmd):
    """s3://KEY:SECRET@bucket: `fusefs manifest create` refused it no more
    than it printed it; both commands refuse it and print neither part"""
    src = f"s3://{KEY_ID}:{SECRET}@{BUCKET}"
    env = dict(CREDS, AWS_ENDPOINT_URL=srv.endpoint)
    if cmd == "create":
        r = run_fusefs("manifest", "create", src, timeout=60, env=env)
    else:
        mnt = tmp_path / "mnt"
        mnt.mkdir()
        r = run_fusefs("mount", src, str(mnt), "-f", "--cache-dir",
                       str(tmp_path / "cache"), timeout=60, env=env)
    out = r.stdout + r.stderr
    assert r.returncode != 0, out
    assert KEY_ID not in out and SECRET not in out, out
    assert SOURCE_REFUSED in r.stderr, r.stderr
    assert not srv.requests, srv.requests


MANIFEST_REFUSED = ("fusefs: a manifest URL must not contain credentials (USER:KEY@); "
                    "use the environment or --credentials-file")


@pytest.mark.parametrize("cmd", ["diff", "mount"])
def test_credentials_in_a_manifest_url_are_refused_unprinted(srv, tmp_path, cmd):
    """s3://KEY:SECRET@bucket/key as `manifest diff A B` or `--manifest`:
    refused like such a SOURCE, before any request, neither part printed
    (the URL is in every message and log line about the manifest)"""
    url = f"s3://{KEY_ID}:{SECRET}@{BUCKET}/m.manifest"
    env = dict(CREDS, AWS_ENDPOINT_URL=srv.endpoint)
    if cmd == "diff":
        local = tmp_path / "m.manifest"
        local.write_text("#fusefs-manifest 1\n")
        r = run_fusefs("manifest", "diff", url, str(local), timeout=60, env=env)
    else:
        mnt = tmp_path / "mnt"
        mnt.mkdir()
        r = run_fusefs("mount", f"s3://{BUCKET}", str(mnt), "-f", "--cache-dir",
                       str(tmp_path / "cache"), "--manifest", url, timeout=60, env=env)
    out = r.stdout + r.stderr
    assert r.returncode == 2, (r.returncode, out)
    assert KEY_ID not in out and SECRET not in out, out
    assert MANIFEST_REFUSED in r.stderr, r.stderr
    assert not srv.requests, srv.requests
