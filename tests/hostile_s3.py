"""A hostile (or broken) S3 endpoint for tests: an http.server on
127.0.0.1 that answers ListObjectsV2, HEAD and ranged GETs of one bucket
the way a broken or malicious server might. No SigV4 checking.

    srv = HostileS3()               # listens on a free port, in a thread
    srv.mode = "fresh_tokens"       # see MODES; "normal" serves OBJECTS
    ... fusefs mount s3://bucket MNT --endpoint srv.endpoint ...
    srv.close()

Every request is recorded in srv.requests (method, path, headers) so a
test can check, say, that no If-Match header ever carried a CR or LF.
Run it alone to poke at it by hand: python3 tests/hostile_s3.py MODE.
"""

import http.server
import itertools
import random
import sys
import threading
import time
import urllib.parse

BUCKET = "bucket"
ETAG = '"0123456789abcdef0123456789abcdef"'
OBJECTS = {"normal.bin": random.Random(1).randbytes(3 * 1024 * 1024 + 17)}
HUGE = 256 << 20                # bytes of the huge page
# listed only in the "trickle" and "slow_steady" modes, whose GETs of it
# trickle or come slowly
TRICKLE_KEY = "slow.bin"
# 1 MiB: a client's limit for the whole transfer of it (fusefs: op_timeout
# + 16 s) is longer than TRICKLE_MAX, so only a stall limit can end it
# with a timeout
TRICKLE_DATA = random.Random(2).randbytes(1024 * 1024)
TRICKLE_BPS = 2                 # bytes a second after the headers
TRICKLE_MAX = 15                # then the connection is closed (an unfixed
                                # client must not hold a test up for hours)
STEADY_DATA = random.Random(3).randbytes(256 * 1024)
STEADY_BPS = 80 * 1024          # "slow_steady": slow but steady, 3.2 s for it

MODES = {
    "normal": "one object, served properly",
    "get_500": "listing and HEAD as normal, every GET of an object answers 500 InternalError "
               "after 0.4 s",
    "trickle": f"one more object, {TRICKLE_KEY}, whose GETs answer 206 at once, then "
               f"{TRICKLE_BPS} bytes a second (for at most {TRICKLE_MAX} s, then the "
               "connection is closed); the rest as normal",
    "slow_steady": f"one more object, {TRICKLE_KEY} ({len(STEADY_DATA) >> 10} KiB), whose "
                   f"GETs come at a steady {STEADY_BPS >> 10} KiB/s (a shared slow link); "
                   "the rest as normal",
    "fresh_tokens": "every page empty, truncated, with a token never seen before",
    "fresh_tokens_same_keys": "every page the same keys under a fresh token",
    "alternating_tokens": "tokens A, B, A, ... with new keys on each page",
    "huge_page": f"a {HUGE >> 20} MiB page",
    "size_negative": "a Size of -5",
    "size_overflow": "a Size of 2^64 + 1",
    "size_too_big": "a Size of 2^44 + 1",
    "etag_crlf_list": "an ETag with CR/LF in the listing",
    "control_keys": "keys with control characters (and a NUL), URL-encoded if asked",
    "head_etag_cr": "HEAD answers an ETag with a bare CR and a header after it",
    "head_etag_ctl": "HEAD answers an ETag with a control character",
    "head_size_negative": "HEAD answers Content-Length: -5",
    "head_size_overflow": "HEAD answers Content-Length: 2^64 + 1",
    "head_size_too_big": "HEAD answers Content-Length: 2^44 + 1",
    "list_404_plain": "the bucket's listing answers 404 without an S3 error (a wrong path)",
    "list_404_nosuchkey": "the bucket's listing answers 404 with the S3 code NoSuchKey",
    "list_403": "the bucket's listing answers 403 with the S3 code AccessDenied",
    "versions_no_latest": "a versions listing (?versions) whose versions never say IsLatest",
}

# mode -> (status, S3 error code or None) of the bucket's listing
LIST_ERRORS = {"list_404_plain": (404, None), "list_404_nosuchkey": (404, "NoSuchKey"),
               "list_403": (403, "AccessDenied")}

CONTROL_KEYS = [b"ctl\x01char", b"new\nline", b"tab\there", b"bell\x07\x1b[31mred",
                b"nul\x00byte", b"plus+and space"]
CONTROL_DATA = {k: b"<" + k + b">" for k in CONTROL_KEYS}   # served in control_keys


def xml_escape(s):
    return (s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;"))


def contents(key, size, etag=ETAG, encode=False):
    """one <Contents>; @key is bytes, %-encoded as S3 does when @encode"""
    if encode:
        k = urllib.parse.quote_plus(key, safe="/")
    else:
        k = xml_escape(key.decode("utf-8", "surrogateescape"))
    return (f"<Contents><Key>{k}</Key><LastModified>2024-01-02T03:04:05.000Z"
            f"</LastModified><ETag>{etag}</ETag><Size>{size}</Size>"
            f"<StorageClass>STANDARD</StorageClass></Contents>")


def page(entries, token=None, encode=False):
    trunc = "true" if token else "false"
    tok = f"<NextContinuationToken>{token}</NextContinuationToken>" if token else ""
    enc = "<EncodingType>url</EncodingType>" if encode else ""
    return ('<?xml version="1.0" encoding="UTF-8"?>'
            '<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
            f"<Name>{BUCKET}</Name><Prefix></Prefix><MaxKeys>1000</MaxKeys>{enc}"
            f"<IsTruncated>{trunc}</IsTruncated>{tok}{''.join(entries)}"
            "</ListBucketResult>").encode()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"       # keep-alive, as curl likes it
    disable_nagle_algorithm = True      # no 40 ms stall per answer

    def log_message(self, *args):
        pass

    def record(self):
        with self.server.lock:
            self.server.requests.append((self.command, self.path,
                                         dict(self.headers.items())))

    def split(self):
        u = urllib.parse.urlsplit(self.path)
        q = dict(urllib.parse.parse_qsl(u.query, keep_blank_values=True))
        path = urllib.parse.unquote_to_bytes(u.path)
        parts = path.lstrip(b"/").split(b"/", 1)
        return parts[0].decode(), (parts[1] if len(parts) > 1 else b""), q

    def reply(self, code, body=b"", headers=()):
        self.send_response(code)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_GET(self):
        self.record()
        bucket, key, q = self.split()
        if bucket != BUCKET:
            return self.reply(404, b"<Error><Code>NoSuchBucket</Code></Error>")
        if not key:
            return self.listing(q)
        return self.get_object(key)

    def objects(self):
        """the objects served in the current mode"""
        if self.server.mode == "trickle":
            return {**OBJECTS, TRICKLE_KEY: TRICKLE_DATA}
        if self.server.mode == "slow_steady":
            return {**OBJECTS, TRICKLE_KEY: STEADY_DATA}
        return OBJECTS

    def do_HEAD(self):
        self.record()
        bucket, key, _ = self.split()
        name = key.decode("utf-8", "surrogateescape")
        if bucket != BUCKET or name not in self.objects():
            return self.reply(404)
        mode, size = self.server.mode, str(len(self.objects()[name]))
        etag = ETAG
        if mode == "head_etag_cr":
            etag = '"e\rX-Injected: 1"'        # short: the CR is the problem
        elif mode == "head_etag_ctl":
            etag = ETAG[:-1] + '\x01"'
        elif mode == "head_size_negative":
            size = "-5"
        elif mode == "head_size_overflow":
            size = str(2**64 + 1)
        elif mode == "head_size_too_big":
            size = str(2**44 + 1)
        # by hand: send_header would add its own Content-Length rules
        self.send_response(200)
        self.send_header("ETag", etag)
        self.send_header("Last-Modified", "Tue, 02 Jan 2024 03:04:05 GMT")
        self.send_header("Content-Length", size)
        self.end_headers()

    def get_object(self, key):
        name = key.decode("utf-8", "surrogateescape")
        data = self.objects().get(name)
        if self.server.mode == "control_keys" and key in CONTROL_DATA:
            data = CONTROL_DATA[key]
        if data is None:
            return self.reply(404)
        if self.server.mode == "get_500":
            time.sleep(0.4)             # a slow failure: remembered that long
            return self.reply(500, b"<Error><Code>InternalError</Code></Error>",
                              [("Content-Type", "application/xml")])
        if self.headers.get("If-Match", ETAG) != ETAG:
            return self.reply(412)
        rng = self.headers.get("Range", "")
        if not rng.startswith("bytes="):
            return self.reply(200, data, [("ETag", ETAG)])
        a, b = rng[6:].split("-")
        a, b = int(a), min(int(b), len(data) - 1)
        if a >= len(data):
            return self.reply(416)
        headers = [("ETag", ETAG), ("Content-Range", f"bytes {a}-{b}/{len(data)}")]
        if name == TRICKLE_KEY and self.server.mode == "slow_steady":
            return self.trickle(data[a:b + 1], headers, STEADY_BPS // 10, 0.1)
        if name == TRICKLE_KEY:
            return self.trickle(data[a:b + 1], headers)
        return self.reply(206, data[a:b + 1], headers)

    def trickle(self, body, headers, piece=TRICKLE_BPS, every=1.0):
        """the headers at once, then @piece bytes every @every seconds: the
        k-th piece at start + k x @every (paced by the clock, so a loaded
        machine delays a piece but never slows the rate down)"""
        self.send_response(206)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        start = time.monotonic()
        try:
            for k, i in enumerate(range(0, len(body), piece)):
                due = start + k * every
                if due > start + TRICKLE_MAX:
                    break
                time.sleep(max(0.0, due - time.monotonic()))
                self.wfile.write(body[i:i + piece])
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.close_connection = True

    def listing(self, q):
        mode = self.server.mode
        if "versions" in q and mode == "versions_no_latest":
            body = ('<?xml version="1.0" encoding="UTF-8"?><ListVersionsResult>'
                    "<IsTruncated>false</IsTruncated>" + "".join(
                        f"<Version><Key>{k}</Key><VersionId>v{i}</VersionId>"
                        f"<Size>{len(v)}</Size></Version>"
                        for i, (k, v) in enumerate(OBJECTS.items())) +
                    "</ListVersionsResult>").encode()
            return self.reply(200, body)
        if mode in LIST_ERRORS:
            status, code = LIST_ERRORS[mode]
            body = (f"<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>{code}</Code>"
                    f"<Message>test</Message><BucketName>{BUCKET}</BucketName></Error>"
                    ).encode() if code else b""
            return self.reply(status, body, [("Content-Type", "application/xml")])
        enc = q.get("encoding-type") == "url"
        token = q.get("continuation-token", "")
        n = next(self.server.pages)
        normal = [contents(k.encode(), len(v), encode=enc) for k, v in self.objects().items()]
        if q.get("max-keys") == "1" or mode.startswith("head_") or \
                mode in ("normal", "get_500", "trickle", "slow_steady"):
            return self.reply(200, page(normal, encode=enc))
        if mode == "fresh_tokens":
            return self.reply(200, page([], token=f"fresh-{n}", encode=enc))
        if mode == "fresh_tokens_same_keys":
            return self.reply(200, page(normal, token=f"fresh-{n}", encode=enc))
        if mode == "alternating_tokens":
            keys = [contents(f"k{n:06d}".encode(), 1, encode=enc)]
            return self.reply(200, page(keys, token="AB"[n % 2], encode=enc))
        if mode == "huge_page":
            return self.huge_page(enc)
        if mode.startswith("size_"):
            size = {"size_negative": "-5", "size_overflow": str(2**64 + 1),
                    "size_too_big": str(2**44 + 1)}[mode]
            return self.reply(200, page(normal + [contents(b"z", size, encode=enc)],
                                        encode=enc))
        if mode == "etag_crlf_list":
            bad = contents(b"z", 1, etag="&quot;e&#13;&#10;X-Injected: 1&quot;", encode=enc)
            return self.reply(200, page(normal + [bad], encode=enc))
        if mode == "control_keys":
            if not enc:         # what a server that cannot encode sends
                keys = [f"<Contents><Key>{k.decode()}</Key><Size>1</Size></Contents>"
                        for k in CONTROL_KEYS]
                return self.reply(200, page(keys))
            every = {**CONTROL_DATA, **{k.encode(): v for k, v in OBJECTS.items()}}
            keys = [contents(k, len(v), encode=True) for k, v in sorted(every.items())]
            return self.reply(200, page(keys, encode=True))
        return self.reply(500)

    def huge_page(self, enc):
        self.send_response(200)
        self.send_header("Content-Length", str(HUGE))
        self.end_headers()
        head = page([], encode=enc)[:-len(b"</ListBucketResult>")]
        filler = b"<Filler>" + b"x" * 65000 + b"</Filler>"
        sent = 0
        try:
            self.wfile.write(head)
            sent = len(head)
            while sent + len(filler) < HUGE:
                self.wfile.write(filler)
                sent += len(filler)
            self.wfile.write(b" " * (HUGE - sent - 19) + b"</ListBucketResult>")
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.close_connection = True


class HostileS3:
    """the server, serving on a thread until close()"""

    def __init__(self, mode="normal"):
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.mode = mode
        self.httpd.requests = []
        self.httpd.pages = itertools.count(1)
        self.httpd.lock = threading.Lock()
        self.port = self.httpd.server_address[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def mode(self):
        return self.httpd.mode

    @mode.setter
    def mode(self, m):
        assert m in MODES, m
        self.httpd.pages = itertools.count(1)
        self.httpd.mode = m

    @property
    def requests(self):
        with self.httpd.lock:
            return list(self.httpd.requests)

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


if __name__ == "__main__":
    srv = HostileS3(sys.argv[1] if len(sys.argv) > 1 else "normal")
    print(f"{srv.endpoint} bucket {BUCKET}, mode {srv.mode}: {MODES[srv.mode]}")
    try:
        srv.thread.join()
    except KeyboardInterrupt:
        srv.close()
