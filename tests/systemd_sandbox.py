"""Run a command under the sandbox a systemd unit's [Service] section asks
for, without systemd (PID 1 here is not systemd, so neither systemctl nor
systemd-run can start the unit).  What is applied, as systemd applies it:

* CapabilityBoundingSet= and NoNewPrivileges= (setpriv, util-linux);
* UMask=; ProtectHostname= (a UTS namespace, unshare);
* a seccomp filter (libseccomp, python3-seccomp, the library systemd
  uses) with SystemCallFilter= (groups expanded by `systemd-analyze
  syscall-filter`, the first line's kind sets the default action,
  SystemCallErrorNumber= its errno), SystemCallArchitectures=native,
  RestrictAddressFamilies=, MemoryDenyWriteExecute=, LockPersonality=,
  RestrictRealtime=, RestrictSUIDSGID= and RestrictNamespaces=.

Not applied: DevicePolicy=/DeviceAllow= (a cgroup BPF program),
KeyringMode=, ProtectClock='s device rule (its system calls are in
~@privileged here) and the resource limits.  Use:

    argv = sandbox_argv(unit_service_section, ["fusefs", "mount", ...])

which runs `python3 systemd_sandbox.py --apply JSON -- CMD...` below
setpriv; the filter is loaded last, right before exec.
"""

import errno
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

CAPS = {"CAP_SYS_ADMIN": "sys_admin", "CAP_DAC_READ_SEARCH": "dac_read_search",
        "CAP_DAC_OVERRIDE": "dac_override", "CAP_SYS_RESOURCE": "sys_resource",
        "CAP_IPC_LOCK": "ipc_lock", "CAP_CHOWN": "chown", "CAP_FOWNER": "fowner"}


def service_settings(unit_path):
    """{key: [values in order]} of the unit's [Service] section"""
    # repeated keys (SystemCallFilter=) are meaningful in unit files
    out = {}
    section = None
    for line in open(unit_path):
        s = line.strip()
        if not s or s[0] in "#;":
            continue
        if s.startswith("["):
            section = s
            continue
        if section == "[Service]" and "=" in s:
            k, v = s.split("=", 1)
            out.setdefault(k.strip(), []).append(v.strip())
    return out


def syscall_groups():
    """{"@group": [names, "@nested", ...]} from systemd-analyze"""
    txt = subprocess.run(["systemd-analyze", "syscall-filter"], capture_output=True,
                         text=True, check=True).stdout
    groups, cur = {}, None
    for line in txt.splitlines():
        if line.startswith("@"):
            cur = groups.setdefault(line.strip(), [])
        elif cur is not None and line.startswith("    ") and not line.strip().startswith("#"):
            cur.append(line.strip())
    return groups


def expand(items, groups, seen=None):
    seen = set() if seen is None else seen
    out = set()
    for it in items:
        if it.startswith("@"):
            if it in seen:
                continue
            seen.add(it)
            out |= expand(groups[it], groups, seen)
        else:
            out.add(it)
    return out


def plan(settings):
    """what --apply needs, from service_settings()"""
    groups = syscall_groups()
    allow, deny, mode = set(), set(), None
    for v in settings.get("SystemCallFilter", []):
        neg = v.startswith("~")
        names = expand(v.lstrip("~").split(), groups)
        if mode is None:
            mode = "deny" if neg else "allow"
        if mode == "allow":
            allow = allow - names if neg else allow | names
        else:
            deny = deny - names if not neg else deny | names
    yes = lambda k: settings.get(k, ["no"])[-1] in ("yes", "true", "1", "on")
    fams = [f for v in settings.get("RestrictAddressFamilies", []) for f in v.split()]
    return {
        "mode": mode, "allow": sorted(allow), "deny": sorted(deny),
        "errno": settings.get("SystemCallErrorNumber", [None])[-1],
        "native": settings.get("SystemCallArchitectures", [""])[-1] == "native",
        "families": fams, "mdwe": yes("MemoryDenyWriteExecute"),
        "lock_personality": yes("LockPersonality"), "realtime": yes("RestrictRealtime"),
        "suid": yes("RestrictSUIDSGID"), "namespaces": yes("RestrictNamespaces"),
        "umask": settings.get("UMask", [None])[-1],
    }


def sandbox_argv(settings, cmd):
    """argv that runs @cmd under @settings (service_settings())"""
    argv = []
    if settings.get("ProtectHostname", ["no"])[-1] == "yes":
        argv += ["unshare", "--uts"]
    caps = [c for v in settings.get("CapabilityBoundingSet", []) for c in v.split()]
    argv += [shutil.which("setpriv"), "--bounding-set",
             ",".join(["-all"] + ["+" + CAPS[c] for c in caps])]
    if settings.get("NoNewPrivileges", ["no"])[-1] == "yes":
        argv.append("--no-new-privs")
    argv += ["/usr/bin/python3", os.path.join(HERE, "systemd_sandbox.py"), "--apply",
             json.dumps(plan(settings)), "--"] + list(cmd)
    return argv


def apply_and_exec(p, cmd):
    import socket as so
    import seccomp as sc
    eno = getattr(errno, p["errno"]) if p["errno"] else None
    kill = sc.ERRNO(eno) if eno else sc.KILL_PROCESS
    if p["mode"] != "allow" or not p["native"]:
        raise SystemExit("only an allow-list with SystemCallArchitectures=native is emulated")
    f = sc.SyscallFilter(defaction=kill)
    conditional = set()

    def rule(action, name, *args):
        try:
            f.add_rule(action, name, *args)
        except (RuntimeError, ValueError, OSError):
            pass                               # not a system call of this kernel/arch

    # conditional allows replace an unconditional one (libseccomp: an
    # unconditional rule would win over the conditions)
    if p["families"]:
        conditional.add("socket")
        for fam in p["families"]:
            rule(sc.ALLOW, "socket", sc.Arg(0, sc.EQ, getattr(so, fam)))
    if p["mdwe"]:
        conditional |= {"mmap", "mprotect", "pkey_mprotect", "shmat"}
        PW, PX = 0x2, 0x4
        for want in (0, PW, PX):
            rule(sc.ALLOW, "mmap", sc.Arg(2, sc.MASKED_EQ, PW | PX, want))
        rule(sc.ALLOW, "mprotect", sc.Arg(2, sc.MASKED_EQ, PX, 0))
        rule(sc.ALLOW, "pkey_mprotect", sc.Arg(2, sc.MASKED_EQ, PX, 0))
        rule(sc.ALLOW, "shmat", sc.Arg(2, sc.MASKED_EQ, 0o100000, 0))   # SHM_EXEC
    if p["lock_personality"]:
        conditional.add("personality")
        rule(sc.ALLOW, "personality", sc.Arg(0, sc.EQ, 0))
        rule(sc.ALLOW, "personality", sc.Arg(0, sc.EQ, 0xFFFFFFFF))
    if p["realtime"]:
        conditional.add("sched_setscheduler")
        for pol in (0, 3, 5):                  # OTHER, BATCH, IDLE
            rule(sc.ALLOW, "sched_setscheduler", sc.Arg(1, sc.EQ, pol))
    if p["suid"]:
        conditional |= {"chmod", "fchmod", "fchmodat"}
        S = 0o6000
        rule(sc.ALLOW, "chmod", sc.Arg(1, sc.MASKED_EQ, S, 0))
        rule(sc.ALLOW, "fchmod", sc.Arg(1, sc.MASKED_EQ, S, 0))
        rule(sc.ALLOW, "fchmodat", sc.Arg(2, sc.MASKED_EQ, S, 0))
    if p["namespaces"]:
        conditional |= {"clone", "unshare", "setns", "clone3"}
        NS = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | \
            0x20000000 | 0x40000000 | 0x00000080
        rule(sc.ALLOW, "clone", sc.Arg(0, sc.MASKED_EQ, NS, 0))
        rule(sc.ERRNO(errno.ENOSYS), "clone3")     # flags in a struct: as systemd does
    for name in p["allow"]:
        if name not in conditional:
            rule(sc.ALLOW, name)
    # what systemd itself needs to get to execve()
    for name in ("execve", "exit", "exit_group", "rt_sigreturn"):
        if name not in conditional:
            rule(sc.ALLOW, name)
    if p["umask"]:
        os.umask(int(p["umask"], 8))
    f.load()
    os.execvp(cmd[0], cmd)


if __name__ == "__main__":
    i = sys.argv.index("--")
    apply_and_exec(json.loads(sys.argv[2]), sys.argv[i + 1:])
