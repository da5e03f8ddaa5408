"""The documentation checked against the program (no mount, no Ceph):

* every `--long-option` quoted in README.md, docs/*.md and the man page
  (packaging/fusefs.8) is one fusefs has: in `fusefs --help` /
  `fusefs mount --help`, or parsed by the subcommands in fusefs/*.c;
  options of other programs are named in FOREIGN, with the program;
* each option's default, as `fusefs --help` shows it from the one table
  that sets it (src/conf.c), is the default the man page and
  docs/configuration.md give;
* every `fusefs: ...` message quoted in docs/troubleshooting.md is printed
  by the source: its text between placeholders (DIR, NAME, '...', an
  errno text) appears in a string literal of src/ or fusefs/;
* statements the issue found wrong stay right: the cache directory's
  parents, the bad-source message, what `status` prints.

Failures name the document and the option or message, e.g.
"docs/operations.md: --cache-sise is not a fusefs option"."""

import functools
import glob
import os
import re
import subprocess

import pytest

from mountlib import FUSEFS, ROOT

DOCS = sorted(glob.glob(os.path.join(ROOT, "docs", "*.md"))) + [
    os.path.join(ROOT, "README.md"), os.path.join(ROOT, "packaging", "fusefs.8")]
SOURCES = sorted(glob.glob(os.path.join(ROOT, "src", "*.c")) +
                 glob.glob(os.path.join(ROOT, "fusefs", "*.c")))

# options of other programs that the docs quote: option -> the program
FOREIGN = {
    "variant": "mmdebstrap", "pull": "podman build", "network": "podman",
    "image": "tests/containers/kube.py", "hostpath": "tests/containers/kube.py",
    "secrets": "tests/containers/kube.py", "env": "podman run",
    "preserve-fds": "podman run", "cgroup-manager": "podman", "ulimit": "podman",
    "from-literal": "kubectl create secret", "from-file": "kubectl create secret",
    "propagation": "unshare", "mount": "unshare", "make-shared": "mount",
    "make-rshared": "mount", "bind": "mount", "make-slave": "mount",
    "connect-timeout": "ceph / curl",   # also a fusefs option; harmless either way
    "only-values": "getfattr", "user-group": "useradd", "create-home": "useradd",
    "shell": "useradd", "remove": "userdel", "force": "userdel",
    "now": "systemctl enable", "no-pager": "systemctl / systemd-analyze",
    "offline": "systemd-analyze security", "threshold": "systemd-analyze security",
    "root": "systemd-analyze verify", "man": "systemd-analyze verify",
    "user": "systemctl", "purge": "tests/ceph/cluster.sh", "rgw": "tests/ceph/cluster.sh",
    "pool": "tests/ceph/cluster.sh", "mem-bytes": "tests/ceph/cluster.sh",
    "bucket": "aws s3api", "versioning-configuration": "aws s3api",
    "endpoint-url": "aws cli", "no-sign-request": "aws cli", "recursive": "aws / s3cmd",
    "fd-passing-socket-path": "meta-fuse-csi-plugin fuse-starter",
    "security-opt": "docker", "device": "docker", "cap-add": "docker",
    "privileged": "docker", "rm": "docker", "it": "docker", "net": "docker",
    "tag": "docker", "file": "docker build", "build-arg": "docker build",
    "load": "docker", "break-system-packages": "pip", "user-install": "pip",
    "no-deps": "pip", "prefix": "pip / make", "help": "every program",
    "version": "every program", "nproc": "nproc", "all": "nproc",
    "durations": "pytest", "maxfail": "pytest", "lf": "pytest",
    "gdb": "valgrind", "leak-check": "valgrind", "track-origins": "valgrind",
    "no-install-recommends": "apt-get", "yes": "apt-get", "fix-broken": "apt-get",
    "signal": "kill / systemctl", "kill-who": "systemctl kill",
    "property": "systemd-run", "unit": "systemd-run / journalctl",
    "follow": "journalctl", "since": "journalctl", "grep": "journalctl",
    "lazy": "umount", "verbose": "fuser", "mounts": "fuser",
    "id": "ceph (also a fusefs option)", "name": "ceph / fusefs prefetch",
    "top": "fusefs heat", "show-reachable": "valgrind",
    "print-architecture": "dpkg", "status": "dpkg",
    "vfs-cache-mode": "rclone mount", "vfs-cache-max-size": "rclone mount",
    "vfs-cache-poll-interval": "rclone mount", "dir-cache-time": "rclone mount",
    "aws-sigv4": "curl", "reuid": "setpriv", "data": "train.py (an example trainer)",
}
# the project's own tools (bench/*.py, scripts/*) are checked against their source
TOOLS = sorted(glob.glob(os.path.join(ROOT, "bench", "*.py")) +
               glob.glob(os.path.join(ROOT, "scripts", "*")) +
               glob.glob(os.path.join(ROOT, "tests", "soak", "*.py")) +
               glob.glob(os.path.join(ROOT, "tests", "stress", "*.py")))

LONG_OPT = re.compile(r"(?<![\w/.\-`])--([a-z][a-z0-9]*(?:-[a-z0-9]+)*)(?![\w-])")


def doc_text(path):
    t = open(path, encoding="utf-8").read()
    if path.endswith(".8"):
        t = t.replace("\\-", "-").replace("\\(em", " ").replace("\\fB", "").replace(
            "\\fR", "").replace("\\fI", "").replace("\\fP", "")
    return t


@functools.lru_cache(maxsize=None)
def help_text():
    out = ""
    for args in (["--help"], ["mount", "--help"]):
        r = subprocess.run([FUSEFS] + args, capture_output=True, text=True, timeout=30)
        out += r.stdout + r.stderr
    return out


def source_text():
    return "".join(open(f, encoding="utf-8", errors="replace").read() for f in SOURCES)


def program_options():
    """long options the program knows: its help, and those the subcommands
    compare argv against in fusefs/*.c and src/conf.c"""
    known = set(LONG_OPT.findall(help_text()))
    for f in SOURCES:
        known |= set(re.findall(r'"--([a-z][a-z0-9-]*)', open(f).read()))
    return known


def test_help_lists_options():
    """the baseline the other checks rely on"""
    known = program_options()
    assert {"cache-dir", "cache-size", "chunk-size", "json", "list", "wait"} <= known, known


def tool_options():
    found = set()
    for f in TOOLS:
        if os.path.isfile(f):
            found |= set(re.findall(r"""["']--([a-z][a-z0-9-]*)["']""",
                                    open(f, errors="replace").read()))
    return found


def test_every_option_quoted_in_the_docs_exists():
    known = program_options() | tool_options()
    problems = []
    for path in DOCS:
        rel = os.path.relpath(path, ROOT)
        for n, line in enumerate(doc_text(path).splitlines(), 1):
            for opt in LONG_OPT.findall(line):
                if opt in known or opt in FOREIGN:
                    continue
                problems.append(f"{rel}:{n}: --{opt} is not a fusefs option "
                                f"(not in `fusefs --help`/`fusefs mount --help`, nor parsed "
                                f"in fusefs/*.c, nor by bench/, scripts/ or tests/soak|stress/; if it belongs "
                                f"to another program, add it "
                                f"to FOREIGN in {os.path.relpath(__file__, ROOT)})")
    assert not problems, "\n".join(problems)


def test_every_option_of_the_program_is_documented():
    """the other way round: each mount option of `fusefs --help` (its
    Options: section) is in the man page and in docs/configuration.md"""
    opts_part = help_text().split("Options:", 1)[1]
    helped = set(re.findall(r"^  --([a-z][a-z0-9-]*)", opts_part, re.M))
    assert len(helped) >= 30, helped
    problems = []
    for doc in ("packaging/fusefs.8", "docs/configuration.md"):
        text = doc_text(os.path.join(ROOT, doc))
        quoted = set(LONG_OPT.findall(text)) | set(re.findall(r"\b([a-z]+(?:_[a-z]+)*)\b",
                                                                text))
        for opt in sorted(helped):
            if opt not in quoted and opt.replace("-", "_") not in quoted:
                problems.append(f"{doc}: --{opt} (from fusefs --help) is not documented")
    assert not problems, "\n".join(problems)


# ---- defaults: src/conf.c's table, shown by --help, is the one source ------------

def help_defaults():
    """{option: its default} from `fusefs --help` (conf_usage() prints the
    table's default of each option that has one)"""
    opts_part = help_text().split("Options:", 1)[1]
    out = {}
    for line in opts_part.splitlines():
        m = re.match(r"  --([a-z][a-z0-9-]*)\b.*\(default ([^)]*)\)$", line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def says_default(text, value):
    """does @text state @value as a default: "Default 8", "Default: the
    mounting user", "default 10G", or "auto (default)"?"""
    text = " ".join(text.split())
    v = re.escape(value)
    end = r"(?![\w%$-]|\.\w)"
    return bool(re.search(rf"\bdefault\b:?[^.;]*?(?<![\w$]){v}{end}", text, re.I) or
                re.search(rf"(?<![\w$]){v}\s*\(default\)", text, re.I))


def man_entries(man):
    """{option: its paragraph} of the man page's OPTIONS section"""
    sect = man.split(".SH OPTIONS", 1)[1].split("\n.SH ", 1)[0]
    out = {}
    for para in re.split(r"^\.(?:TP|SS|PP)\b.*$", sect, flags=re.M):
        head, _, body = para.strip().partition("\n")
        for opt in re.findall(r"\\-\\-([a-z][a-z0-9\\-]*)", head):
            out.setdefault(opt.replace("\\-", "-"), para)
    return out


def man_default_problems(man, defaults):
    entries = man_entries(man)
    problems = []
    for opt, value in sorted(defaults.items()):
        para = entries.get(opt)
        if para is None:
            problems.append(f"packaging/fusefs.8: --{opt} has no paragraph under OPTIONS")
            continue
        text = para.replace("\\-", "-")
        text = re.sub(r"\\f[BIRP]|^\.[A-Z]+ ?", "", text, flags=re.M).replace('"', "")
        if not says_default(text, value):
            problems.append(f"packaging/fusefs.8: --{opt}: the default is {value!r} "
                            f"(src/conf.c, fusefs --help), the page says otherwise or nothing")
    return problems


def config_md_default_problems(doc, defaults):
    cells = {}
    for line in doc.splitlines():
        row = [c.strip() for c in line.split("|")]
        if len(row) > 4 and line.startswith("| "):
            for opt in re.findall(r"--([a-z][a-z0-9-]*)", row[1]):
                cells.setdefault(opt, row[3].replace("`", ""))
    problems = []
    for opt, value in sorted(defaults.items()):
        cell = cells.get(opt)
        if cell is None:
            problems.append(f"docs/configuration.md: --{opt} has no table row")
        elif not re.search(rf"(?<![\w$.]){re.escape(value)}(?![\w.%])", cell):
            problems.append(f"docs/configuration.md: --{opt}: the default is {value!r} "
                            f"(src/conf.c, fusefs --help), the table says {cell!r}")
    return problems


def test_defaults_in_the_docs_are_the_programs():
    defaults = help_defaults()
    assert {"cache-size": "10G", "readahead": "8", "passthrough": "auto"}.items() <= \
        defaults.items(), defaults
    man = open(os.path.join(ROOT, "packaging", "fusefs.8"), encoding="utf-8").read()
    doc = open(os.path.join(ROOT, "docs", "configuration.md"), encoding="utf-8").read()
    problems = man_default_problems(man, defaults) + config_md_default_problems(doc, defaults)
    assert not problems, "\n".join(problems)


def test_default_checks_would_catch_a_drift():
    """the checks above can fail: a default changed in one place only"""
    defaults = dict(help_defaults(), readahead="16", **{"log-level": "warn"})
    man = open(os.path.join(ROOT, "packaging", "fusefs.8"), encoding="utf-8").read()
    doc = open(os.path.join(ROOT, "docs", "configuration.md"), encoding="utf-8").read()
    for problems in (man_default_problems(man, defaults),
                     config_md_default_problems(doc, defaults)):
        assert any("--readahead" in p for p in problems), problems
        assert any("--log-level" in p for p in problems), problems
        assert not any("--chunk-size" in p for p in problems), problems


# ---- messages --------------------------------------------------------------------

PLACEHOLDERS = re.compile(
    r"\x00|'\.\.\.'|\.\.\.|\b(?:DIR|NAME|HOST:PORT|HOST|PORT|FILE:LINE|FILE|LINE|MNT|URL|"
    r"X|V|N|SIZE|KEY|PATH)\b|'[A-Z]+'|'[a-z0-9]+://'|'/[^']*'|client\.[A-Za-z]+|\(HTTP \d+[^)]*\)|"
    r"\b(?:rados|s3|file|https?)://\S*?(?=[:\s)]|$)|\b\d{3,}\b")
ERRNO_TEXTS = ("No such file or directory", "Permission denied", "Connection timed out",
               "Connection refused", "Operation not permitted", "Device or resource busy",
               "Input/output error", "Transport endpoint is not connected",
               "No space left on device")


def literal_corpus():
    """the source's string literals, adjacent ones joined, each format
    directive turned into a separator"""
    src = source_text()
    lits = re.findall(r'"((?:[^"\\\n]|\\.)*)"', re.sub(r'"\s*\n\s*"', "", src))
    text = "\x00".join(lits).replace("\\n", "\x00").replace('\\"', '"')
    text = text.replace("%%", "\x01")          # a literal percent sign, not a directive
    return re.sub(r"%[-+ #0]*\d*(?:\.\d+)?(?:hh|h|ll|l|z|j|t|PRI\w+)?[diouxXsScpfgeE]",
                  "\x00", text).replace("\x01", "%")


def quoted_messages(path):
    """(line, message) for each `fusefs: ...` in backquotes"""
    out = []
    for n, line in enumerate(open(path, encoding="utf-8").read().splitlines(), 1):
        for m in re.findall(r"`(fusefs: [^`]+)`", line):
            out.append((n, m))
    return out


def fragments(msg):
    text = msg[len("fusefs: "):]
    for e in ERRNO_TEXTS:
        text = text.replace(e, "\x00")
    parts = PLACEHOLDERS.split(text)
    return [p.strip(" :'()") for p in parts if len(p.strip(" :'()")) >= 8]


def test_troubleshooting_messages_are_printed_by_the_program():
    corpus = literal_corpus()
    path = os.path.join(ROOT, "docs", "troubleshooting.md")
    msgs = quoted_messages(path)
    assert len(msgs) >= 10, msgs
    problems = []
    for n, msg in msgs:
        for frag in fragments(msg):
            if frag not in corpus:
                problems.append(f"docs/troubleshooting.md:{n}: {frag!r} (from `{msg}`) "
                                f"is in no string of src/ or fusefs/")
    assert not problems, "\n".join(problems)


def test_fragments_would_catch_a_wrong_message():
    """the check above can fail: a message fusefs never prints"""
    corpus = literal_corpus()
    frags = fragments("fusefs: cannot frobnicate the cache directory DIR")
    assert frags and any(f not in corpus for f in frags)


# ---- statements the issue found wrong -------------------------------------------------

def test_cache_dir_parents_are_created(tmp_path):
    """docs say the cache directory's missing parents are created: so
    does the program (it refuses a bad source after creating nothing)"""
    for path in DOCS:
        t = doc_text(path)
        assert "does not create parents" not in t, os.path.relpath(path, ROOT)
    mnt, cache = tmp_path / "m", tmp_path / "a" / "b" / "cache"
    mnt.mkdir()
    r = subprocess.run([FUSEFS, "mount", f"file://{tmp_path}/no-such-source", str(mnt), "-f",
                        "--cache-dir", str(cache)], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0                         # the source is missing ...
    assert cache.is_dir(), r.stderr                  # ... but the parents were made
    assert not os.path.ismount(mnt)


@pytest.mark.parametrize("source,placeholder", [("no-scheme", "'...'"),
                                                ("nfs://x/y", None)])
def test_bad_source_messages_match_the_docs(source, placeholder):
    """what the program prints for a malformed source and an unknown
    scheme is quoted, word for word, in docs/troubleshooting.md"""
    r = subprocess.run([FUSEFS, "mount", source, "/tmp", "--cache-dir", "/nonexistent"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2, r.stderr
    line = r.stderr.splitlines()[0]
    if placeholder:
        line = line.replace(f"'{source}'", placeholder)
    doc = open(os.path.join(ROOT, "docs", "troubleshooting.md")).read()
    assert f"`{line}`" in doc, f"docs/troubleshooting.md does not quote: {line}"
