"""The posture probe: what code inside a sandbox container can see and do.

`code-mode doctor` (``posture.rs``) runs this with ``python3 -I -c`` in a
throwaway container under the real lockdown, in place of ``runner.py``. It
reports facts, not verdicts: the host judges them. It prints one JSON line,
then waits for the host to close its stdin (the host reads the container's
cgroup meanwhile), then tries to allocate twice the memory limit in a child
process and prints a second line with how that child ended. Under gVisor the
allocation may take the whole sandbox down instead: the host reads the
container's exit state for that.

Only the standard library; every attempt is caught, so a refusal is a fact.
"""

import ctypes
import errno
import hashlib
import json
import os
import platform
import shutil
import signal
import socket
import stat
import subprocess
import sys

MEMORY_BYTES = int(sys.argv[1]) if len(sys.argv) > 1 else 256 * 1024 * 1024
# Processes the probe tries to start: well past any limit we set.
PROCESS_ATTEMPTS = 200

libc = ctypes.CDLL(None, use_errno=True)
facts = {}


def name_of(err):
    return errno.errorcode.get(err, str(err))


def attempt(call):
    """'ok' (or the call's value), else the errno name of the refusal."""
    try:
        value = call()
        return "ok" if value is None else value
    except OSError as e:
        return name_of(e.errno)


def raw(call):
    """A libc call through ctypes: 'ok' or the errno name."""
    ctypes.set_errno(0)
    result = call()
    return "ok" if result >= 0 else name_of(ctypes.get_errno())


# Who the code is.
status = {}
for line in open("/proc/self/status").read().splitlines():
    key, _, value = line.partition(":")
    status[key] = value.strip()
facts["uid"] = [os.getuid(), os.geteuid()]
facts["gid"] = [os.getgid(), os.getegid()]
facts["groups"] = os.getgroups()
facts["status"] = {k: status.get(k) for k in
                   ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp")}
# gVisor's /proc/self/status has no NoNewPrivs line: ask the kernel instead.
facts["no_new_privs"] = libc.prctl(39, 0, 0, 0, 0)  # PR_GET_NO_NEW_PRIVS
facts["seccomp_mode"] = libc.prctl(21, 0, 0, 0, 0)  # PR_GET_SECCOMP
facts["kernel"] = platform.release()

# Files.
# /var/tmp is world-writable in the image: only the read-only root stops it.
facts["root_write"] = attempt(lambda: open("/var/tmp/posture-probe", "w").close())
with open("/tmp/probe.sh", "w") as f:
    f.write("#!/bin/sh\nexit 0\n")
os.chmod("/tmp/probe.sh", 0o755)
facts["tmp_exec"] = attempt(lambda: subprocess.run(["/tmp/probe.sh"]).returncode)
facts["tmp_mount"] = next((line.split()[3] for line in open("/proc/mounts")
                           if line.split()[1] == "/tmp"), None)
if os.path.lexists("/dev/shm"):
    facts["dev_shm"] = attempt(lambda: open("/dev/shm/probe", "w").close())
else:
    facts["dev_shm"] = "absent"

# Network.
facts["interfaces"] = sorted(name for _, name in socket.if_nameindex())

# Kernel surface.
params = ctypes.create_string_buffer(120)
facts["io_uring"] = raw(lambda: libc.syscall(425, 8, params))  # io_uring_setup
facts["unshare_user"] = raw(lambda: libc.unshare(0x10000000))  # CLONE_NEWUSER
facts["clone3"] = raw(lambda: libc.syscall(435, ctypes.create_string_buffer(88), 88))


def memfd_program():
    """Write a program into an anonymous memory file and run it."""
    fd = os.memfd_create("probe", 0)
    with open("/bin/true", "rb") as f:
        os.write(fd, f.read())
    return subprocess.run([f"/proc/self/fd/{fd}"], pass_fds=[fd]).returncode


facts["memfd"] = attempt(memfd_program)
facts["mknod_device"] = attempt(
    lambda: os.mknod("/tmp/probe-null", 0o666 | stat.S_IFCHR, os.makedev(1, 3)))
facts["devices"] = {path: attempt(lambda: os.close(os.open(path, os.O_RDWR)))
                    for path in ("/dev/net/tun", "/dev/fuse")}

# Processes: start sleepers until the limit refuses one.
children, refused = [], None
for _ in range(PROCESS_ATTEMPTS):
    try:
        pid = os.fork()
    except OSError as e:
        refused = name_of(e.errno)
        break
    if pid == 0:
        try:
            os.execv("/bin/sleep", ["sleep", "30"])
        finally:
            os._exit(127)
    children.append(pid)
facts["processes"] = {"started": len(children), "refused": refused}
for pid in children:
    os.kill(pid, signal.SIGKILL)
for pid in children:
    os.waitpid(pid, 0)

# The image: Python and the runner's files, nothing of ours or of an MCP client;
# an image built with packages also holds them (under
# /opt/code-mode/packages, on the code's sys.path as the runner puts it
# there, and named in packages.json).
PACKAGES_DIR = "/opt/code-mode/packages"
RUNNER_FILES = ("runner.py", "tool_search.py", "search_query.py", "search_words.py", "search_rewrites.py",
                "search_graph.py", "search_languages.py", "search_tables.py", "files_out.py")
files_sha256 = {}
for name in RUNNER_FILES:
    try:
        with open("/opt/code-mode/" + name, "rb") as f:
            files_sha256[name] = hashlib.sha256(f.read()).hexdigest()
    except OSError as e:
        files_sha256[name] = name_of(e.errno)
if os.path.isdir(PACKAGES_DIR):
    sys.path.append(PACKAGES_DIR)
try:
    import mcp  # noqa: F401
    mcp_importable = True
except ImportError:
    mcp_importable = False
try:
    with open("/opt/code-mode/packages.json", encoding="utf-8") as f:
        packages = json.load(f)
except (OSError, ValueError):
    packages = None
facts["image"] = {
    "python": platform.python_version(),
    "files_sha256": files_sha256,
    "opt": sorted(p for p in (os.path.join(r, f) for r, _, fs in os.walk("/opt") for f in fs)
                  if not p.startswith(PACKAGES_DIR + "/")),
    "packages": packages,
    "mcp": mcp_importable,
    "tools": [t for t in ("cargo", "rustc", "gcc", "cc", "docker", "code-mode", "code-mode-test-server")
              if shutil.which(t)],
}



# What the code can learn about the kernel: the settings that decide it as
# the code reads them (under runc the host's own, under runsc gVisor's),
# and whether /proc/kallsyms shows it real addresses.
def kernel_setting(name):
    try:
        with open(f"/proc/sys/kernel/{name}") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def kallsyms():
    """'addresses' when a symbol's address is readable, 'zeroed', or the
    errno name of the refusal."""
    try:
        with open("/proc/kallsyms") as f:
            for number, line in enumerate(f):
                if number >= 2000:
                    break
                if int(line.split()[0], 16):
                    return "addresses"
        return "zeroed"
    except OSError as e:
        return name_of(e.errno)
    except (ValueError, IndexError):
        return "unreadable"


facts["kernel_settings"] = {name: kernel_setting(name) for name in (
    "kptr_restrict", "perf_event_paranoid", "dmesg_restrict", "unprivileged_bpf_disabled")}
facts["kallsyms"] = kallsyms()

print(json.dumps(facts), flush=True)

# The host reads the cgroup now; it closes our stdin when done.
while sys.stdin.buffer.read(4096):
    pass

# Memory: a child allocating twice the limit must be killed.
child = subprocess.run([sys.executable, "-I", "-c",
                        f"x = bytearray({2 * MEMORY_BYTES}); x[::4096] = b'x' * len(x[::4096])"])
print(json.dumps({"memory_child": child.returncode}), flush=True)
