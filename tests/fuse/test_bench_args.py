"""The benchmark scripts' defaults: `make bench` runs them without options,
so their default arguments must be a runnable configuration.  Checked up to
the first thing a run needs (the fusefs binary), with a binary that does not
exist: each script must stop there, saying so, and start nothing."""

import glob
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def bench_scratch_prefixes():
    """the fusefs-* names the benchmark scripts give their scratch
    directories (mkdtemp prefixes, mktemp templates, fixed paths)"""
    found = set()
    for path in glob.glob(os.path.join(ROOT, "bench", "*.py")) + \
            glob.glob(os.path.join(ROOT, "bench", "*.sh")):
        text = open(path).read()
        found.update(re.findall(r'prefix="(fusefs-[^"]+)"', text))
        found.update(m.rstrip("X") for m in re.findall(r'(fusefs-[\w.-]*X{6})', text))
        found.update(re.findall(r'"/(?:var/)?tmp/(fusefs-[\w.-]+)"', text))
    return tuple(sorted(found))


@pytest.mark.parametrize("script,prefix", [("epoch", "epoch bench"),
                                           ("local", "bench-local"),
                                           ("s3", "s3 bench"),
                                           ("open", "bench-open"),
                                           ("listing", "listing bench"),
                                           ("scale", "scale bench"),
                                           ("memory", "memory bench"),
                                           ("churn", "churn bench"),
                                           ("loader", "bench-loader")])
def test_defaults_get_as_far_as_the_binary(script, prefix):
    if os.geteuid() != 0:
        pytest.skip("the scripts check for root first")
    # what the scripts would leave: directories named as the scripts name
    # theirs (other tests, in parallel workers, make fusefs-* ones too)
    prefixes = bench_scratch_prefixes()
    assert len(prefixes) >= 9, prefixes
    scratch = lambda: {p for p in glob.glob("/var/tmp/fusefs-*") + glob.glob("/tmp/fusefs-*")  # noqa: E731
                       if os.path.basename(p).startswith(prefixes)}
    before = scratch()
    r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", script + ".py"),
                        "--bin", "/nonexistent/fusefs"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "%s: /nonexistent/fusefs is not executable" % prefix in r.stderr + r.stdout
    assert scratch() - before == set(), "a scratch directory was left behind"
