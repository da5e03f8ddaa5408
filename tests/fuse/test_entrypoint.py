"""The container entrypoint (packaging/container/entrypoint.sh) logs the
fusefs command it runs; a USER:KEY@ in a URL it was given (an endpoint,
a manifest, a source, an -o option) is redacted there, so the secret
never reaches the pod log, even though fusefs then refuses the URL."""

import os
import subprocess

import pytest

from mountlib import FUSEFS

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
ENTRYPOINT = os.path.join(ROOT, "packaging", "container", "entrypoint.sh")
SECRET = "s3cr/et+Key"          # AWS secret keys may hold '/' and '+'


@pytest.mark.parametrize("var, value", [
    ("FUSEFS_ENDPOINT", f"http://user:{SECRET}@127.0.0.1:1"),
    ("FUSEFS_MANIFEST", f"s3://user:{SECRET}@bucket/manifest.gz"),
    ("FUSEFS_SOURCE", f"s3://user:{SECRET}@bucket/prefix"),
    ("FUSEFS_OPTIONS", f"ro,endpoint=https://user:{SECRET}@host:443/,allow_other"),
])
def test_entrypoint_never_logs_a_credential(tmp_path, var, value):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FUSEFS_", "AWS_"))}
    env.update(FUSEFS_BIN=FUSEFS, FUSEFS_SOURCE="s3://bucket/prefix",
               FUSEFS_MOUNTPOINT=str(tmp_path / "data"),
               FUSEFS_CACHE_DIR=str(tmp_path / "cache"),
               AWS_ACCESS_KEY_ID="AKID", AWS_SECRET_ACCESS_KEY="not-the-one")
    env[var] = value
    r = subprocess.run(["bash", ENTRYPOINT], env=env, capture_output=True, text=True,
                       timeout=60)
    out = r.stdout + r.stderr
    assert r.returncode != 0, out                       # fusefs refuses it
    assert "fusefs-entrypoint: " in out, out            # the command was logged
    for part in ("s3cr", "et+Key", SECRET):
        assert part not in out, out
    assert "://***@" in out, out                        # and says what it hid


def test_a_known_option_is_known_however_long_the_help(tmp_path):
    """FUSEFS_<OPTION> is checked against `fusefs --help` without a pipe
    into `grep -q` (which, under pipefail, failed the check when grep
    found the option and left before the list was written: a known
    option was refused, now and then, on a loaded machine). A fake fusefs
    whose help names --cache-dir first and then 200 options of 1,000
    characters (200 KB, past a pipe's 64 KiB) makes that early exit
    certain."""
    fake = tmp_path / "fusefs"
    fake.write_text("#!/bin/bash\n"
                    "if [[ $1 == --help ]]; then\n"
                    "  echo '  --cache-dir DIR'\n"
                    "  long=$(printf 'x%.0s' {1..1000})\n"
                    "  for ((i = 0; i < 200; i++)); do echo \"  --opt$i-$long N\"; done\n"
                    "  exit 0\n"
                    "fi\n"
                    "echo \"fake fusefs ran: $*\"\n")
    fake.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("FUSEFS_")}
    env.update(FUSEFS_BIN=str(fake), FUSEFS_SOURCE="file:///nonexistent",
               FUSEFS_MOUNTPOINT=str(tmp_path / "data"),
               FUSEFS_CACHE_DIR=str(tmp_path / "cache"))
    r = subprocess.run(["bash", ENTRYPOINT], env=env, capture_output=True, text=True,
                       timeout=120)
    out = r.stdout + r.stderr
    assert "is not a fusefs option" not in out, out
    assert f"fake fusefs ran: mount file:///nonexistent {tmp_path}/data -f " \
           f"--cache-dir={tmp_path}/cache" in out, out
