"""The Prometheus page (--metrics) parsed by Debian's python3-prometheus-client
in both formats it is served in, held against the table of docs/operations.md,
the example alert rules and Grafana dashboard in packaging/monitoring/, and
the documented field names of `fusefs stats --json` / `status --json`."""

import json
import os
import re
import select
import socket
import threading
import time
import urllib.request

import pytest
import yaml
from prometheus_client.openmetrics.parser import \
    text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families as parse_text

from mountlib import ROOT, run_fusefs, wait_for
from util import CHUNK, put, read_uncached

OPS = os.path.join(ROOT, "docs", "operations.md")
EPOCHS = os.path.join(ROOT, "docs", "epochs.md")
MONITORING = os.path.join(ROOT, "packaging", "monitoring")
UNITS = ("bytes", "seconds", "ratio")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fetch(port, openmetrics=False):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/metrics")
    if openmetrics:
        req.add_header("Accept", "application/openmetrics-text; version=1.0.0,text/plain;q=0.5")
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.headers["Content-Type"], r.read().decode()


def families(port):
    """{family name: Metric} of the OpenMetrics page (counters without _total)"""
    ctype, text = fetch(port, openmetrics=True)
    assert ctype.startswith("application/openmetrics-text; version=1.0.0"), ctype
    return {f.name: f for f in parse_openmetrics(text)}


def value(fams, name, **labels):
    """the value of the sample @name (as exposed, e.g. fusefs_reads_total)"""
    for f in fams.values():
        for s in f.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return s.value
    raise KeyError((name, labels))


def exposed(fam):
    """the name a family's samples are queried by"""
    return fam.name + "_total" if fam.type == "counter" else fam.name


def doc_table():
    """{metric: (type, unit, labels, meaning)} of the table between the
    metrics-table markers of docs/operations.md"""
    text = open(OPS).read()
    m = re.search(r"<!-- metrics-table -->\n(.*?)<!-- /metrics-table -->", text, re.S)
    assert m, "docs/operations.md has no <!-- metrics-table --> block"
    rows = {}
    for line in m.group(1).strip().splitlines()[2:]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        assert len(cells) == 5, line
        name = cells[0].strip("`")
        assert name not in rows, f"{name} documented twice"
        rows[name] = (cells[1], cells[2].strip("`"), cells[3], cells[4])
    return rows


def page_table(fams):
    """the same table from the page: type, unit, label names, HELP"""
    rows = {}
    for f in fams.values():
        labels = sorted({k for s in f.samples for k in s.labels if k not in ("le",)})
        rows[exposed(f)] = (f.type, f.unit, ", ".join(f"`{k}`" for k in labels), f.documentation)
    return rows


def markdown(rows):
    """what the docs block must read (print it to regenerate the docs)"""
    out = ["| Metric | Type | Unit | Labels | Meaning |", "|---|---|---|---|---|"]
    for name, (kind, unit, labels, meaning) in rows.items():
        out.append(f"| `{name}` | {kind} | {f'`{unit}`' if unit else ''} | {labels} | {meaning} |")
    return "\n".join(out) + "\n"


@pytest.fixture
def metered(mounter, src):
    """a mount with --metrics, a 3-chunk file and a small one: (mount, port)"""
    put(src, {"big": os.urandom(3 * CHUNK), "small": b"x" * 100})
    port = free_port()
    m = mounter("--metrics", f"127.0.0.1:{port}")
    return m, port


def test_page_parses_names_types_help_and_counters_move(metered):
    m, port = metered
    ctype, text = fetch(port)
    assert ctype.startswith("text/plain; version=0.0.4"), ctype
    before = {f.name: f for f in parse_text(text)}
    # every family has HELP and TYPE, in both formats
    helps = re.findall(r"^# HELP (\S+) .+$", text, re.M)
    types = re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M)
    assert [n for n, _ in types] == helps and len(helps) == len(set(helps)) >= 40
    fams = families(port)
    assert set(fams) == set(before)
    for f in fams.values():
        assert f.documentation, f.name
        assert f.name.startswith(("fusefs_", "process_")), f.name
        assert re.fullmatch(r"[a-z][a-z0-9_]*", f.name), f.name
        # Prometheus naming: base units as suffix, no other unit words
        assert not re.search(r"_(us|ms|usec|msec|permille|percent|kb|mb|kib|mib)(_|$)",
                             f.name), f.name
        if f.unit:
            assert f.unit in UNITS and f.name.endswith("_" + f.unit), (f.name, f.unit)
        for s in f.samples:
            assert s.value >= 0 or f.name in ("fusefs_list_epoch", "fusefs_list_next_epoch"), s
            if f.type == "counter":
                assert s.name in (f.name + "_total", f.name + "_created"), s.name
    kinds = {exposed(f): f.type for f in fams.values()}
    assert kinds["fusefs_reads_total"] == "counter"
    assert kinds["fusefs_read_bytes_total"] == "counter"
    assert kinds["fusefs_read_stall_seconds_total"] == "counter"
    assert kinds["fusefs_backend_errors_total"] == "counter"
    assert kinds["fusefs_cache_used_bytes"] == "gauge"
    assert kinds["fusefs_cache_used_ratio"] == "gauge"
    assert kinds["fusefs_backend_read_seconds"] == "histogram"
    assert kinds["process_resident_memory_bytes"] == "gauge"
    assert kinds["process_open_fds"] == "gauge"
    assert value(fams, "fusefs_build_info", version=run_fusefs("--version").stdout.split()[1]) == 1
    assert value(fams, "process_resident_memory_bytes") > 1 << 20
    assert value(fams, "process_open_fds") >= 3
    assert value(fams, "fusefs_namespace_files") == 2
    # reads move the counters: a miss from the backend, then hits
    for name in ("big", "big", "small"):
        assert len(read_uncached(m.path(name))) > 0
    after = families(port)
    assert value(after, "fusefs_reads_total") > value(fams, "fusefs_reads_total")
    assert value(after, "fusefs_read_bytes_total", source="backend") >= 3 * CHUNK
    assert value(after, "fusefs_read_bytes_total", source="cache") >= 3 * CHUNK
    assert value(after, "fusefs_chunk_reads_total", result="miss") >= 1
    assert value(after, "fusefs_chunk_reads_total", result="hit") >= 1
    assert value(after, "fusefs_read_stall_seconds_total") > 0
    assert value(after, "fusefs_backend_read_seconds_count") >= 1
    assert value(after, "fusefs_backend_read_seconds_bucket", le="+Inf") == \
        value(after, "fusefs_backend_read_seconds_count")
    # (chunks are stored after the reply)
    assert wait_for(lambda: value(families(port), "fusefs_cache_used_bytes") >= 3 * CHUNK), \
        value(families(port), "fusefs_cache_used_bytes")
    # ratios are fractions
    with open(m.path(".fusefs/lists/r0"), "w") as f:
        f.write("big\nsmall\n")
    read_uncached(m.path("big"))
    listed = families(port)
    ratios = [s for f in listed.values() if f.unit == "ratio" for s in f.samples]
    assert {s.name for s in ratios} >= {"fusefs_cache_used_ratio", "fusefs_list_hit_ratio"}
    for s in ratios:
        assert 0 <= s.value <= 1, s
    assert 0 < value(listed, "fusefs_cache_used_ratio") < 1
    assert value(listed, "fusefs_list_files", list="r0") == 2


def test_every_metric_is_documented(metered):
    """docs/operations.md lists exactly the families of the page, with the
    page's type, unit, labels and HELP text"""
    m, port = metered
    with open(m.path(".fusefs/lists/r0"), "w") as f:      # the per-list families
        f.write("big\n")
    page = page_table(families(port))
    docs = doc_table()
    assert docs == page, "docs/operations.md metrics table is out of date; it should read:\n" \
        + markdown(page)


def referenced_metrics(text):
    names = set(re.findall(r"\b((?:fusefs|process)_[a-z0-9_]+)", text))
    base = set()
    for n in names:
        for sfx in ("_bucket", "_sum", "_count"):
            if n.endswith(sfx) and n[:-len(sfx)] in doc_table():
                n = n[:-len(sfx)]
        base.add(n)
    return base


def test_alert_rules_and_dashboard_use_real_metrics():
    documented = set(doc_table())
    with open(os.path.join(MONITORING, "fusefs-alerts.yml")) as f:
        rules = yaml.safe_load(f)
    alerts = {r["alert"]: r for g in rules["groups"] for r in g["rules"]}
    for want in ("FusefsHitRatioCollapse", "FusefsReadStall", "FusefsBackendErrors",
                 "FusefsCacheNearFull"):
        assert want in alerts, want
    for name, r in alerts.items():
        assert r["expr"].strip() and r["labels"]["severity"] and r["annotations"]["summary"], name
        used = referenced_metrics(r["expr"])
        assert used and used <= documented, (name, used - documented)
    with open(os.path.join(MONITORING, "fusefs-dashboard.json")) as f:
        dash = json.load(f)
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    assert len(exprs) >= 10
    used = set().union(*(referenced_metrics(e) for e in exprs))
    assert used <= documented, used - documented
    assert {"fusefs_chunk_reads_total", "fusefs_read_stall_seconds_total",
            "fusefs_backend_errors_total", "fusefs_cache_used_ratio"} <= used


def backticked(cell):
    return re.findall(r"`([a-z0-9_<>]+)`", cell)


def doc_rows(path, heading, stop="\n#"):
    """first-column names of the tables in section @heading of @path"""
    text = open(path).read()
    start = text.index(heading)
    end = text.find(stop, start + len(heading))
    section = text[start:end if end > 0 else None]
    tables = re.split(r"\n\n(?=\|)", section)
    out = []
    for t in tables[1:]:
        rows = [ln for ln in t.splitlines() if ln.startswith("|")][2:]
        out.append([(backticked(r.split("|")[1]), r) for r in rows])
    return out


def test_json_field_names_are_the_documented_ones(metered, src):
    m, port = metered
    with open(m.path(".fusefs/lists/r0"), "w") as f:
        f.write("# epoch 3\n# begin\nbig\nsmall\n")
    read_uncached(m.path("big"))
    # stats --json: exactly the fields of the stats table of docs/operations.md
    r = run_fusefs("stats", m.mnt, "--json")
    assert r.returncode == 0, r.stderr
    stats = json.loads(r.stdout)
    (rows,) = doc_rows(OPS, "### `fusefs stats --json`")
    documented = {n for names, _ in rows for n in names}
    assert documented == set(stats), ("undocumented", set(stats) - documented,
                                      "documented but missing", documented - set(stats))
    # and each row names the metric(s) it feeds, which exist on the page
    metrics = set(page_table(families(port)))
    for names, row in rows:
        feeds = re.findall(r"`((?:fusefs|process)_[a-z0-9_*]+)", row.split("|")[3])
        assert feeds, row
        for pat in feeds:
            assert any(re.fullmatch(pat.replace("*", "[a-z0-9_]+"), m) for m in metrics), \
                (pat, row)
    # status --json: the tables of docs/epochs.md, "Machine-readable status"
    r = run_fusefs("status", m.mnt, "--json")
    assert r.returncode == 0, r.stderr
    status = json.loads(r.stdout)
    top, per_list = doc_rows(EPOCHS, "## Machine-readable status")
    top_names = {n for names, _ in top for n in names}
    list_names = {n for names, row in per_list for n in
                  backticked(row.split("|")[1])}
    assert top_names == set(status), set(status) ^ top_names
    l0 = status["lists"]["r0"]
    assert list_names == set(l0), set(l0) ^ list_names
    publish_row = [row for names, row in per_list if names == ["last_publish"]][0]
    publish_doc = set(backticked(publish_row.split("|")[2]))
    for k in l0["last_publish"]:
        assert k in publish_doc or (k.startswith("rejected_") and "rejected_<reason>"
                                    in publish_doc), k


def test_serving_logs_no_error(metered):
    """a healthy start with --metrics logs no error line (libmicrohttpd's
    messages go to the log from the first option on)"""
    m, port = metered
    fetch(port)
    assert "[error]" not in m.log(), m.log()


HANG = 60       # a client's timeout: only a hang fails on it


class Slow:
    """@n connections from @src that send a request's headers one line at
    a time, a line every 0.5 s, never the blank line that ends them: the
    way a slow client holds a connection slot against an idle timeout.
    A connection the server closes or refuses is dropped quietly."""

    def __init__(self, port, n, src="127.0.0.1"):
        self.socks = []
        for _ in range(n):
            s = socket.create_connection(("127.0.0.1", port), timeout=HANG,
                                         source_address=(src, 0))
            self.socks.append(s)
            self.send(s, b"GET /metrics HTTP/1.1\r\n")
        self.stop = threading.Event()
        self.t = threading.Thread(target=self.trickle, daemon=True)
        self.t.start()

    def send(self, s, data):
        try:
            s.sendall(data)
        except OSError:
            pass

    def trickle(self):
        while not self.stop.wait(0.5):
            for s in self.socks:
                self.send(s, b"X-Slow: 1\r\n")

    def close(self):
        self.stop.set()
        self.t.join()
        for s in self.socks:
            s.close()


def scrape_from(port, src):
    """GET /metrics over a connection from source address @src: the status line"""
    with socket.create_connection(("127.0.0.1", port), timeout=HANG,
                                  source_address=(src, 0)) as s:
        s.sendall(b"GET /metrics HTTP/1.0\r\nHost: fusefs\r\n\r\n")
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    return data.split(b"\r\n", 1)[0]


def test_slow_clients_do_not_stop_a_scrape(metered):
    """16 connections trickling headers (the 16 that used to fill every
    slot) leave room for a scrape, from the same address too"""
    m, port = metered
    slow = Slow(port, 16)
    try:
        assert scrape_from(port, "127.0.0.1") == b"HTTP/1.1 200 OK"
        ctype, text = fetch(port)
        assert "fusefs_build_info" in text
    finally:
        slow.close()


def test_one_address_cannot_take_every_connection(metered):
    """64 slow connections from one address (the total bound) get only
    that address's share: a scrape from another address is served"""
    m, port = metered
    slow = Slow(port, 64)
    try:
        assert scrape_from(port, "127.0.0.2") == b"HTTP/1.1 200 OK"
    finally:
        slow.close()


def test_a_client_that_never_ends_its_headers_is_cut_off(metered):
    """each byte restarts the idle timeout, so the server closes a
    connection whose request headers are not complete in time (5 s)
    however steadily it sends; HANG only guards against a hang"""
    m, port = metered
    with socket.create_connection(("127.0.0.1", port), timeout=HANG) as s:
        s.sendall(b"GET /metrics HTTP/1.1\r\n")
        end = time.monotonic() + HANG
        closed = False
        while not closed and time.monotonic() < end:
            if select.select([s], [], [], 0.5)[0]:
                try:
                    closed = s.recv(4096) == b""
                except ConnectionResetError:
                    closed = True
            else:
                try:
                    s.sendall(b"X-Slow: 1\r\n")
                except OSError:
                    closed = True
        assert closed, f"a connection sending header lines is still open after {HANG} s"
    assert scrape_from(port, "127.0.0.1") == b"HTTP/1.1 200 OK"
