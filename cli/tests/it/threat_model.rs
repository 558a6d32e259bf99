//! The threat model, one control per test: what model-written code can reach
//! from inside the sandbox, what its tool calls can do to the wrapped server,
//! and how runaway code ends.
//!
//! Every test runs the real `code-mode run` against the real sandbox image and
//! the test MCP server. The sandboxed code never sends traffic anywhere but
//! loopback. Python that attacks the protocol reaches the runner's private
//! pipe the way hostile code could: by looking through `/proc/self/fd`.

use std::net::TcpListener;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use code_mode_sandbox_runner::container::Runtime;

use crate::support::{self, Ran, run};

/// Deadline (seconds) of the runs that are meant to be stopped by it.
const SHORT_DEADLINE: u64 = 6;
/// How long after its deadline a stopped run may still take to come back
/// (process start-up, the wrapped server, removing the container).
const MARGIN: Duration = Duration::from_secs(6);

/// Python defining `protocol_out_fd()`: the runner's private descriptor to
/// the host (the only pipe open for writing; fds 0-2 are `/dev/null`).
const FIND_PROTOCOL_FD: &str = r#"
import fcntl, os, stat

def protocol_out_fd():
    found = []
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            mode = os.fstat(fd).st_mode
            flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        except OSError:
            continue
        if stat.S_ISFIFO(mode) and flags & os.O_ACCMODE == os.O_WRONLY:
            found.append(fd)
    assert len(found) == 1, f"expected one protocol pipe, found {found}"
    return found[0]
"#;

/// Python defining `await forge(id, tool, arguments)`: writes a call line of
/// its own straight onto the protocol pipe and returns the host's answer as
/// `"ok: ..."` or `"ToolError: ..."` (it registers the id with the runner's
/// reader, as hostile code in the same process could).
const FORGE: &str = r#"
import asyncio, gc, json

_caller = next(o for o in gc.get_objects() if type(o).__name__ == "ToolCaller")

async def forge(call_id, tool, arguments):
    future = asyncio.get_running_loop().create_future()
    with _caller._lock:
        _caller._pending[call_id] = future
    line = json.dumps({"type": "call", "id": call_id, "tool": tool, "arguments": arguments})
    os.write(protocol_out_fd(), line.encode() + b"\n")
    try:
        return "ok: " + await future
    except ToolError as e:
        return "ToolError: " + str(e)
"#;

/// Python defining `await attempt(coroutine)`: `"ok: <result>"` or `"ToolError: <message>"`.
const ATTEMPT: &str = r#"
async def attempt(call):
    try:
        return "ok: " + await call
    except ToolError as e:
        return "ToolError: " + str(e)
"#;

/// [`run`], timed from the process start to its exit.
fn timed_run(args: &[&str], code: &str, server_args: &[&str]) -> (Ran, Duration) {
    let started = Instant::now();
    let ran = run(args, code, server_args);
    (ran, started.elapsed())
}

/// The cell's stdout parsed as one JSON value.
fn json_stdout(ran: &Ran) -> Value {
    let stdout = ran.ok();
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {stdout}"))
}

fn unique(tag: &str) -> String {
    format!("{tag}-{}", uuid::Uuid::new_v4().simple())
}

/// Assert a run was stopped at its deadline, in time. Under gVisor a fork
/// bomb may be stopped earlier, by the memory limit: the sandbox's 256 MiB
/// also pay for its kernel's side of each process.
fn assert_stopped_at_deadline(ran: &Ran, elapsed: Duration) {
    assert!(ran.stopped(), "the run was not stopped: {ran:#?}");
    let error = ran.error().unwrap_or_default();
    let out_of_memory = support::runtime() == Runtime::Runsc && error.contains("out of memory");
    assert!(error.contains("deadline") || out_of_memory, "the error does not name the deadline: {error}");
    assert!(
        elapsed < Duration::from_secs(SHORT_DEADLINE) + MARGIN,
        "code-mode took {elapsed:?} with a {SHORT_DEADLINE} s deadline"
    );
}

// ---------------------------------------------------------------------------
// What the sandbox holds
// ---------------------------------------------------------------------------

fn nothing_from_the_hosts_environment_reaches_the_code() {
    if !support::sandbox_available() {
        return;
    }
    let secret = unique("cm-secret");
    let home = format!("/home/{}", unique("cm-home"));
    let code = r#"import json, os
procs = {}
for pid in os.listdir("/proc"):
    if pid.isdigit():
        try:
            procs[pid] = open(f"/proc/{pid}/environ", "rb").read().decode("utf-8", "replace")
        except OSError as e:
            procs[pid] = f"unreadable: {e}"
print(json.dumps({"environ": dict(os.environ), "procs": procs}))"#;
    let mut command = support::command(&["--deadline", "20"], code, &[]);
    command.env("CODE_MODE_THREAT_SECRET", &secret).env("AWS_SECRET_ACCESS_KEY", &secret).env("HOME", &home);
    let ran = support::run_prepared(command);
    let stdout = ran.ok();
    assert!(!stdout.contains(&secret), "a host secret is visible in the sandbox: {stdout}");
    assert!(!stdout.contains(&home), "the host's HOME is visible in the sandbox: {stdout}");
    assert!(!stdout.contains("CODE_MODE_THREAT_SECRET") && !stdout.contains("AWS_SECRET_ACCESS_KEY"), "{stdout}");

    let seen = json_stdout(&ran);
    // The container's environment is the image's, plus what Docker and
    // Python add themselves; nothing else.
    let image = code_mode_sandbox_runner::image::default_image_tag();
    let inspect = Command::new("docker")
        .args(["image", "inspect", "--format", "{{json .Config.Env}}", &image])
        .output()
        .expect("docker image inspect runs");
    let image_env: Vec<String> = serde_json::from_slice(&inspect.stdout).expect("the image's Env is JSON");
    let environ = seen["environ"].as_object().expect("environ");
    assert!(environ.contains_key("PATH"), "the code did not read its environment: {environ:?}");
    for (key, value) in environ {
        let from_image = image_env.contains(&format!("{key}={}", value.as_str().unwrap()));
        assert!(
            from_image || ["HOSTNAME", "HOME", "LC_CTYPE"].contains(&key.as_str()),
            "{key}={value} in the sandbox comes from neither the image nor Docker"
        );
    }
    let procs = seen["procs"].as_object().expect("procs");
    assert!(procs.contains_key("1"), "pid 1 (the runner) is not visible: {procs:?}");
}

fn no_secret_from_the_host_is_inside_the_sandbox() {
    if !support::sandbox_available() {
        return;
    }
    // No Docker socket (nor any other socket) on the filesystem, no host
    // path mounted, no host process visible.
    let code = r#"import json, os, stat
sockets, visited = [], 0
for root, dirs, files in os.walk("/"):
    if root == "/":
        dirs[:] = [d for d in dirs if d not in ("proc", "sys")]
    for name in files + dirs:
        visited += 1
        path = os.path.join(root, name)
        try:
            if stat.S_ISSOCK(os.lstat(path).st_mode):
                sockets.append(path)
        except OSError:
            pass
known = ["/var/run/docker.sock", "/run/docker.sock", "/run/containerd/containerd.sock", "/var/run/docker"]
mounts = []
for line in open("/proc/self/mountinfo"):
    fields = line.split()
    sep = fields.index("-")
    mounts.append({"root": fields[3], "point": fields[4], "fstype": fields[sep + 1]})
print(json.dumps({
    "sockets": sockets,
    "visited": visited,
    "known": [p for p in known if os.path.lexists(p)],
    "docker_host": os.environ.get("DOCKER_HOST"),
    "mounts": mounts,
    "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
}))"#;
    let ran = run(&["--deadline", "20"], code, &[]);
    let seen = json_stdout(&ran);
    assert!(seen["visited"].as_u64().unwrap() > 1000, "the filesystem walk saw too little: {seen}");
    assert_eq!(seen["sockets"], serde_json::json!([]), "sockets inside the sandbox");
    assert_eq!(seen["known"], serde_json::json!([]), "a Docker socket path exists");
    assert_eq!(seen["docker_host"], Value::Null);
    let mounts = seen["mounts"].as_array().expect("mounts");
    // Under gVisor every file the container sees comes through its gofer, as
    // 9p: the image's overlay and Docker's own files alike.
    let gvisor = support::runtime() == Runtime::Runsc;
    let root_fs = if gvisor { "9p" } else { "overlay" };
    assert!(
        mounts.iter().any(|m| m["point"] == "/" && m["fstype"] == root_fs),
        "the root is not the image's {root_fs}: {mounts:?}"
    );
    // Pseudo filesystems aside, only the files Docker writes for each
    // container may be mounted: a host directory would show up here.
    let pseudo = ["overlay", "proc", "tmpfs", "devpts", "sysfs", "cgroup", "cgroup2", "mqueue"];
    let docker_files = ["/etc/hostname", "/etc/hosts", "/etc/resolv.conf"];
    for m in mounts {
        let (point, fstype, root) =
            (m["point"].as_str().unwrap(), m["fstype"].as_str().unwrap(), m["root"].as_str().unwrap());
        if pseudo.contains(&fstype) {
            continue;
        }
        if gvisor && point == "/" {
            continue; // the image's root, checked above
        }
        assert!(docker_files.contains(&point), "a host filesystem is mounted at {point}: {m}");
        if gvisor {
            // gVisor shows neither the source path nor another type.
            assert!(fstype == "9p" && root == "/", "{point} is not Docker's own file: {m}");
            continue;
        }
        let base = point.rsplit('/').next().unwrap();
        assert!(root.ends_with(&format!("/{base}")), "{point} is not Docker's own file: {m}");
    }
    assert_eq!(seen["pids"], serde_json::json!([1]), "processes other than the runner are visible");
}

fn neither_this_project_nor_an_mcp_client_is_installed() {
    if !support::sandbox_available() {
        return;
    }
    let code = r#"import importlib.util, json, os, shutil
try:
    import mcp
    imported = "imported"
except ImportError as e:
    imported = type(e).__name__
found = []
for root, dirs, files in os.walk("/"):
    if root == "/":
        dirs[:] = [d for d in dirs if d not in ("proc", "sys", "dev")]
    for name in files + dirs:
        low = name.lower()
        if any(w in low for w in ("code-mode", "code_mode", "rmcp", "cargo", "rustc", "rustup")):
            found.append(os.path.join(root, name))
# An image's packages sit under /opt/code-mode/packages, named by packages.json.
opt = sorted(p for p in (os.path.join(r, f) for r, _, fs in os.walk("/opt") for f in fs)
             if not p.startswith("/opt/code-mode/packages/"))
print(json.dumps({
    "import_mcp": imported,
    "mcp_spec": importlib.util.find_spec("mcp") is not None,
    "found": found,
    "opt": opt,
    "which": [n for n in ("cargo", "rustc", "code-mode", "code-mode-test-server", "docker") if shutil.which(n)],
}))"#;
    let ran = run(&["--deadline", "20"], code, &[]);
    let seen = json_stdout(&ran);
    assert_eq!(seen["import_mcp"], "ModuleNotFoundError");
    assert_eq!(seen["mcp_spec"], false);
    assert_eq!(seen["found"], serde_json::json!(["/opt/code-mode"]), "project or Rust files in the image");
    // The runner's files, and an image with packages also names them.
    let mut opt: Vec<String> = code_mode_sandbox_runner::image::RUNNER_FILES
        .iter()
        .map(|(name, _)| format!("/opt/code-mode/{name}"))
        .collect();
    if support::image() != code_mode_sandbox_runner::image::default_image_tag() {
        opt.push("/opt/code-mode/packages.json".into());
    }
    opt.sort();
    let opt = serde_json::json!(opt);
    assert_eq!(seen["opt"], opt);
    assert_eq!(seen["which"], serde_json::json!([]));
}

fn the_wrapped_server_gets_only_the_variables_it_is_given() {
    if !support::sandbox_available() {
        return;
    }
    let secret = unique("cm-server-secret");
    let home = format!("/home/{}", unique("cm-home"));
    let code = r#"import json
names = ["CODE_MODE_SERVER_SECRET", "CODE_MODE_OTHER_SECRET", "PATH", "HOME"]
print(json.dumps({n: await get_env({"name": n}) for n in names}))"#;
    let env_of = |args: &[&str]| {
        let mut command = support::command(args, code, &[]);
        command.env("CODE_MODE_SERVER_SECRET", &secret).env("CODE_MODE_OTHER_SECRET", &secret).env("HOME", &home);
        json_stdout(&support::run_prepared(command))
    };
    let path = std::env::var("PATH").expect("PATH is set");

    let without = env_of(&["--deadline", "20"]);
    assert_eq!(without["CODE_MODE_SERVER_SECRET"], "<unset>", "{without}");
    assert_eq!(without["CODE_MODE_OTHER_SECRET"], "<unset>", "{without}");
    assert_eq!(without["PATH"], path.as_str(), "PATH is not passed");
    assert_eq!(without["HOME"], home.as_str(), "HOME is not passed");

    let with = env_of(&["--deadline", "20", "--env", "CODE_MODE_SERVER_SECRET"]);
    assert_eq!(with["CODE_MODE_SERVER_SECRET"], secret.as_str(), "--env did not pass the variable");
    assert_eq!(with["CODE_MODE_OTHER_SECRET"], "<unset>", "a variable not named by --env was passed: {with}");
}

// ---------------------------------------------------------------------------
// Isolation of the container
// ---------------------------------------------------------------------------

fn the_sandbox_has_no_network_and_its_loopback_is_its_own() {
    if !support::sandbox_available() {
        return;
    }
    // A listener on the host's loopback: the sandbox's 127.0.0.1 is another
    // namespace's, so the connection must be refused there and never arrive here.
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback listener");
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let code = r#"import json, os, socket
seen = {"net": sorted(os.listdir("/sys/class/net")), "routes": open("/proc/net/route").read().splitlines()[1:]}
try:
    socket.create_connection(("127.0.0.1", PORT), timeout=3).close()
    seen["host_port"] = "connected"
except OSError as e:
    seen["host_port"] = type(e).__name__
# The sandbox's own loopback works, so the refusal above is not a broken socket layer.
server = socket.socket()
server.bind(("127.0.0.1", 0))
server.listen()
socket.create_connection(server.getsockname(), timeout=3).close()
seen["own_loopback"] = "connected"
print(json.dumps(seen))"#
        .replace("PORT", &port.to_string());
    let ran = run(&["--deadline", "20"], &code, &[]);
    let seen = json_stdout(&ran);
    assert_eq!(seen["net"], serde_json::json!(["lo"]), "network interfaces besides lo");
    assert_eq!(seen["routes"], serde_json::json!([]), "the sandbox has routes");
    assert_eq!(seen["host_port"], "ConnectionRefusedError", "the host's loopback port answered: {seen}");
    assert_eq!(seen["own_loopback"], "connected");
    match listener.accept() {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        other => panic!("the host listener saw a connection from the sandbox: {other:?}"),
    }
}

fn the_root_filesystem_is_read_only_and_tmp_cannot_run_programs() {
    if !support::sandbox_available() {
        return;
    }
    let code = r##"import errno, json, os, subprocess
seen = {}
# /var/tmp is world-writable in the image: only the read-only root stops it.
seen["var_tmp_mode"] = oct(os.stat("/var/tmp").st_mode & 0o7777)
for path in ["/x", "/etc/x", "/var/tmp/x", "/opt/code-mode/runner.py", "/opt/code-mode/tool_search.py",
             "/opt/code-mode/search_query.py", "/opt/code-mode/search_words.py", "/opt/code-mode/search_rewrites.py",
             "/opt/code-mode/search_graph.py", "/opt/code-mode/search_languages.py", "/opt/code-mode/search_tables.py"]:
    try:
        with open(path, "a") as f:
            f.write("x")
        seen[path] = "written"
    except OSError as e:
        seen[path] = errno.errorcode.get(e.errno, str(e.errno))
with open("/tmp/script.sh", "w") as f:
    f.write("#!/bin/sh\necho ran\n")
os.chmod("/tmp/script.sh", 0o755)
seen["tmp_written"] = open("/tmp/script.sh").read().startswith("#!")
try:
    seen["exec"] = subprocess.run(["/tmp/script.sh"], capture_output=True, text=True).stdout
except OSError as e:
    seen["exec"] = errno.errorcode.get(e.errno, str(e.errno))
seen["sh"] = subprocess.run(["/bin/sh", "-c", "echo ran"], capture_output=True, text=True).stdout
if os.path.exists("/dev/shm"):
    try:
        open("/dev/shm/x", "w").close()
        seen["shm"] = "written"
    except OSError as e:
        seen["shm"] = errno.errorcode.get(e.errno, str(e.errno))
else:
    seen["shm"] = "absent"
print(json.dumps(seen))"##;
    let ran = run(&["--deadline", "20"], code, &[]);
    let seen = json_stdout(&ran);
    assert_eq!(seen["var_tmp_mode"], "0o1777", "{seen}");
    assert_eq!(seen["/var/tmp/x"], "EROFS", "writing /var/tmp/x: {seen}");
    // gVisor checks permissions before the read-only mount: EACCES there.
    let not_ours = if support::runtime() == Runtime::Runsc { "EACCES" } else { "EROFS" };
    for path in ["/x", "/etc/x"] {
        assert_eq!(seen[path], not_ours, "writing {path}: {seen}");
    }
    for (name, _) in code_mode_sandbox_runner::image::RUNNER_FILES {
        let path = format!("/opt/code-mode/{name}");
        assert_ne!(seen[path.as_str()], "written", "the runner's {path} was modified: {seen}");
    }
    assert_eq!(seen["tmp_written"], true, "/tmp is not writable: {seen}");
    assert_eq!(seen["sh"], "ran\n", "programs of the image do not run: {seen}");
    assert_eq!(seen["exec"], "EACCES", "a program written to /tmp ran: {seen}");
    assert_ne!(seen["shm"], "written", "/dev/shm is writable: {seen}");
}

fn the_code_runs_as_nobody_with_no_capabilities_and_a_seccomp_filter() {
    if !support::sandbox_available() {
        return;
    }
    // gVisor's /proc/self/status has no CapAmb or NoNewPrivs line: prctl
    // asks the kernel itself, under either runtime.
    let code = r#"import ctypes, json, os
status = dict(l.split(":\t", 1) for l in open("/proc/self/status").read().splitlines() if ":\t" in l)
keys = ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp"]
libc = ctypes.CDLL(None)
print(json.dumps({"uid": os.getuid(), "euid": os.geteuid(), "gid": os.getgid(), "groups": os.getgroups(),
                  "prctl_no_new_privs": libc.prctl(39, 0, 0, 0, 0), "prctl_seccomp": libc.prctl(21, 0, 0, 0, 0),
                  **{k: status[k].strip() for k in keys if k in status}}))"#;
    let seen = json_stdout(&run(&["--deadline", "20"], code, &[]));
    assert_eq!(seen["uid"], 65534);
    assert_eq!(seen["euid"], 65534);
    assert_eq!(seen["gid"], 65534);
    assert!(seen["groups"].as_array().unwrap().iter().all(|g| g == 65534), "{seen}");
    let gvisor = support::runtime() == Runtime::Runsc;
    for cap in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        if gvisor && cap == "CapAmb" {
            assert_eq!(seen[cap], Value::Null, "gVisor shows CapAmb now: check it: {seen}");
            continue;
        }
        assert_eq!(seen[cap], "0000000000000000", "{cap}: {seen}");
    }
    assert_eq!(seen["prctl_no_new_privs"], 1, "{seen}");
    if !gvisor {
        assert_eq!(seen["NoNewPrivs"], "1");
    }
    assert_eq!(seen["prctl_seccomp"], 2, "no seccomp filter: {seen}");
    assert_eq!(seen["Seccomp"], "2", "no seccomp filter");
}

fn io_uring_and_user_namespaces_are_refused_by_seccomp() {
    if !support::sandbox_available() {
        return;
    }
    // io_uring_setup is 425 on both x86_64 and aarch64; CLONE_NEWUSER is 0x10000000.
    let code = r#"import ctypes, json, os, threading
libc = ctypes.CDLL(None, use_errno=True)
def attempt(call):
    ctypes.set_errno(0)
    result = call()
    return [result, ctypes.get_errno()]
params = ctypes.create_string_buffer(120)
print(json.dumps({
    "getpid": attempt(lambda: libc.syscall(39 if os.uname().machine == "x86_64" else 172)) + [os.getpid()],
    "io_uring_setup": attempt(lambda: libc.syscall(425, 8, params)),
    "unshare_user": attempt(lambda: libc.unshare(0x10000000)),
    "unshare_net": attempt(lambda: libc.unshare(0x40000000)),
    "clone3": attempt(lambda: libc.syscall(435, ctypes.create_string_buffer(88), 88)),
    "thread": threading.Thread(target=lambda: None).start() is None,
}))"#;
    let seen = json_stdout(&run(&["--deadline", "20"], code, &[]));
    // A raw system call through ctypes works at all ...
    assert_eq!(seen["getpid"][0], seen["getpid"][2], "{seen}");
    // ... and these are refused with EPERM.
    assert_eq!(seen["io_uring_setup"], serde_json::json!([-1, 1]), "{seen}");
    assert_eq!(seen["unshare_user"], serde_json::json!([-1, 1]), "{seen}");
    assert_eq!(seen["unshare_net"], serde_json::json!([-1, 1]), "{seen}");
    // clone3 hides its flags from seccomp: it answers ENOSYS (the runc
    // profile's rule; gVisor's own kernel lacks it), so threads go through
    // the checked clone, and they do start.
    assert_eq!(seen["clone3"], serde_json::json!([-1, 38]), "{seen}");
    assert_eq!(seen["thread"], true, "{seen}");
}

fn a_program_written_to_an_anonymous_memory_file_cannot_run() {
    if !support::sandbox_available() {
        return;
    }
    // noexec on /tmp stops a program written there; an anonymous memory file
    // (memfd_create) has no mount to be noexec, so it is refused itself, and
    // so is exec by descriptor (execveat, behind os.execve(fd)).
    let code = r#"import errno, json, os, subprocess
seen = {}
def name(e):
    return errno.errorcode.get(e.errno, str(e.errno))
try:
    fd = os.memfd_create("payload", 0)
    with open("/bin/true", "rb") as f:
        os.write(fd, f.read())
    seen["memfd"] = subprocess.run([f"/proc/self/fd/{fd}"], pass_fds=[fd]).returncode
except OSError as e:
    seen["memfd"] = name(e)
fd = os.open("/bin/true", os.O_RDONLY)
pid = os.fork()
if pid == 0:
    try:
        os.execve(fd, ["true"], {})
    except OSError as e:
        os._exit(100 + e.errno)
seen["exec_by_fd"] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
seen["exec_by_path"] = subprocess.run(["/bin/true"]).returncode
print(json.dumps(seen))"#;
    let seen = json_stdout(&run(&["--deadline", "20"], code, &[]));
    assert_eq!(seen["memfd"], "EPERM", "a program in an anonymous memory file ran: {seen}");
    assert_eq!(seen["exec_by_fd"], 100 + 1, "exec by descriptor was not refused with EPERM: {seen}");
    assert_eq!(seen["exec_by_path"], 0, "programs of the image do not run: {seen}");
}

fn device_nodes_cannot_be_made_and_no_tun_or_fuse_device_opens() {
    if !support::sandbox_available() {
        return;
    }
    // runc's /dev has neither device and the kernel refuses mknod without
    // CAP_MKNOD; gVisor's own /dev has both and its kernel lets any uid make
    // a device node, so under runsc this is the seccomp rule on mknod's
    // mode and the empty tmpfs mounted over /dev/net and /dev/fuse.
    let code = r#"import errno, json, os, stat
seen = {}
def attempt(key, call):
    try:
        call()
        seen[key] = "ok"
    except OSError as e:
        seen[key] = errno.errorcode.get(e.errno, str(e.errno))
attempt("char", lambda: os.mknod("/tmp/null", 0o666 | stat.S_IFCHR, os.makedev(1, 3)))
attempt("block", lambda: os.mknod("/tmp/loop", 0o666 | stat.S_IFBLK, os.makedev(7, 0)))
attempt("fifo", lambda: os.mkfifo("/tmp/fifo"))
for path in ["/dev/net/tun", "/dev/fuse"]:
    attempt(path, lambda: os.close(os.open(path, os.O_RDWR)))
print(json.dumps(seen))"#;
    let seen = json_stdout(&run(&["--deadline", "20"], code, &[]));
    assert_eq!(seen["char"], "EPERM", "{seen}");
    assert_eq!(seen["block"], "EPERM", "{seen}");
    assert_eq!(seen["fifo"], "ok", "a FIFO (os.mkfifo) must still work: {seen}");
    for device in ["/dev/net/tun", "/dev/fuse"] {
        assert_ne!(seen[device], "ok", "{device} opened: {seen}");
    }
}

/// runc only: under gVisor (20221219) the Sentry does not apply `noexec`
/// to `mmap(PROT_EXEC)` of a file, so ld.so can load a program from /tmp
/// there. That cannot be closed by a filter (ld.so maps every library the
/// same way) and buys nothing ctypes does not already give the code inside
/// its own process; it runs inside gVisor's kernel under the same filter.
/// See "What is not protected" in docs/architecture.md.
fn the_dynamic_loader_cannot_load_a_program_from_tmp() {
    if !support::sandbox_available() {
        return;
    }
    let code = r#"import shutil, subprocess
shutil.copy("/bin/true", "/tmp/true")
loader = "/lib64/ld-linux-x86-64.so.2" if __import__("os").uname().machine == "x86_64" else "/lib/ld-linux-aarch64.so.1"
p = subprocess.run([loader, "/tmp/true"], capture_output=True, text=True)
print(p.returncode, "failed to map segment" in p.stderr)"#;
    let stdout = run(&["--deadline", "20"], code, &[]).ok().to_string();
    assert_eq!(stdout, "127 True\n", "ld.so ran a program from the noexec /tmp");
}

fn the_posture_check_passes_under_this_runtime() {
    if !support::sandbox_available() {
        return;
    }
    // The same check as `code-mode doctor`, from the library.
    let runtime = support::runtime();
    let image = support::image();
    let tokio = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let report = tokio.block_on(code_mode_sandbox_runner::posture::check(runtime, &image));
    assert!(report.passed(), "{report}");
    let names: Vec<&str> = report.checks.iter().map(|c| c.name).collect();
    for name in [
        "engine",
        "runtime",
        "runc-version",
        "image",
        "uid",
        "capabilities",
        "no-new-privileges",
        "seccomp",
        "read-only-root",
        "tmp-noexec",
        "no-dev-shm",
        "network",
        "pids-limit",
        "memory-limit",
        "io-uring",
        "memfd",
        "namespaces",
        "devices",
        "image-contents",
        "packages",
        "kptr-restrict",
        "perf-paranoid",
        "dmesg-restrict",
        "unprivileged-bpf",
    ] {
        assert!(names.contains(&name), "no {name} check: {report}");
    }
    // Doctor names what the image holds beyond the standard library.
    let packages = &report.get("packages").expect("packages").detail;
    if image == code_mode_sandbox_runner::image::default_image_tag() {
        assert_eq!(packages, "none beyond the standard library");
    } else {
        for named in ["numpy 2.2.6", "pandas 2.2.3", "matplotlib 3.9.4"] {
            assert!(packages.contains(named), "{named} is not listed: {packages}");
        }
    }
    let kernel = &report.get("kernel").expect("kernel").detail;
    // gVisor's Sentry presents itself as Linux 4.4.0.
    assert_eq!(kernel.ends_with(" 4.4.0"), runtime == Runtime::Runsc, "{kernel}");
}

// ---------------------------------------------------------------------------
// Runaway code
// ---------------------------------------------------------------------------

fn a_fork_bomb_is_stopped_at_the_deadline() {
    if !support::sandbox_available() {
        return;
    }
    let code = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n";
    let (ran, elapsed) = timed_run(&["--deadline", &SHORT_DEADLINE.to_string()], code, &[]);
    assert_stopped_at_deadline(&ran, elapsed);
}

fn an_endless_loop_is_stopped_at_the_deadline() {
    if !support::sandbox_available() {
        return;
    }
    let (ran, elapsed) = timed_run(&["--deadline", &SHORT_DEADLINE.to_string()], "while True:\n    pass\n", &[]);
    assert_stopped_at_deadline(&ran, elapsed);
}

fn a_gigabyte_allocation_is_stopped_for_running_out_of_memory() {
    if !support::sandbox_available() {
        return;
    }
    // Multiplying a str writes every byte, so the pages are really used.
    let code = "x = 'x' * (1 << 30)\nprint(len(x))\n";
    let (ran, elapsed) = timed_run(&["--deadline", &SHORT_DEADLINE.to_string()], code, &[]);
    assert!(ran.stopped(), "{ran:#?}");
    assert_eq!(ran.stdout(), "", "the allocation succeeded");
    let error = ran.error().unwrap_or_default();
    assert!(error.contains("out of memory"), "the error does not say out of memory: {error}");
    assert!(elapsed < Duration::from_secs(SHORT_DEADLINE) + MARGIN, "took {elapsed:?}");
}

fn the_process_limit_holds() {
    if !support::sandbox_available() {
        return;
    }
    // posix_spawn starts each child without copying Python (vfork
    // semantics), so what is counted is processes, not memory: under gVisor
    // the sandbox's 256 MiB also hold its kernel's cost of each process, and
    // a hundred forks of Python under a loaded machine once ran it out.
    let code = r#"import errno, os
started, refused = 0, set()
for _ in range(100):
    try:
        os.posix_spawn("/bin/sleep", ["sleep", "3"], {})
    except OSError as e:
        refused.add(errno.errorcode.get(e.errno, str(e.errno)))
        continue
    started += 1
print(started, sorted(refused))"#;
    let ran = run(&["--deadline", "40"], code, &[]);
    let stdout = ran.ok();
    let (started, refused) = stdout.trim().split_once(' ').expect("two fields");
    let started: u32 = started.parse().unwrap();
    assert!((16..64).contains(&started), "{started} of 100 sleeping children started");
    assert_eq!(refused, "['EAGAIN']");
}

fn open_files_are_limited() {
    if !support::sandbox_available() {
        return;
    }
    let code = r#"import errno
files = []
try:
    for _ in range(100):
        files.append(open("/dev/null"))
    print(len(files), "none")
except OSError as e:
    print(len(files), errno.errorcode.get(e.errno, str(e.errno)))"#;
    let stdout = run(&["--deadline", "20"], code, &[]).ok().to_string();
    let (opened, error) = stdout.trim().split_once(' ').expect("two fields");
    let opened: u32 = opened.parse().unwrap();
    assert!((16..64).contains(&opened), "{opened} of 100 files opened");
    assert_eq!(error, "EMFILE");
}

// ---------------------------------------------------------------------------
// Output
// ---------------------------------------------------------------------------

fn printed_output_is_cut_to_8192_bytes_its_head_and_its_tail() {
    if !support::sandbox_available() {
        return;
    }
    let ran = run(&["--deadline", "20"], "print(''.join(chr(97 + i % 26) for i in range(20000)))", &[]);
    let printed: String = (0..20000u32).map(|i| char::from(b'a' + (i % 26) as u8)).chain(['\n']).collect();
    // The first 6 KiB, the line saying what was cut, and the last 1984
    // bytes (2 KiB less the cut line's room).
    let (head, tail) = (&printed[..6144], &printed[printed.len() - 1984..]);
    let cut = printed.len() - head.len() - tail.len();
    let expected = format!("{head}\n[... {cut} bytes of output cut here ...]\n{tail}");
    assert_eq!(ran.ok(), expected, "not the head, the cut and the tail");
    assert!(ran.ok().len() <= 8192);
    assert!(ran.truncated(), "{ran:#?}");
    assert!(!ran.stopped(), "{ran:#?}");
}

fn an_output_flood_is_stopped_long_before_the_deadline() {
    if !support::sandbox_available() {
        return;
    }
    let code = "chunk = 'x' * 1023\nwhile True:\n    print(chunk)\n";
    let (ran, elapsed) = timed_run(&["--deadline", "20"], code, &[]);
    assert!(ran.stopped(), "{ran:#?}");
    assert!(ran.truncated());
    let error = ran.error().unwrap_or_default();
    assert!(error.contains("printed 1 MiB"), "the error does not name the output limit: {error}");
    // The head and the tail, at most the 8 KiB kept.
    let stdout = ran.stdout();
    assert!(stdout.len() <= 8192 && stdout.len() > 7000, "{} bytes", stdout.len());
    assert!(stdout.contains(" bytes of output cut here ...]\n"), "{stdout}");
    assert!(elapsed < Duration::from_secs(10), "took {elapsed:?} with a 20 s deadline");
}

// ---------------------------------------------------------------------------
// The protocol pipe
// ---------------------------------------------------------------------------

fn printed_protocol_lines_stay_plain_output_and_make_no_call() {
    if !support::sandbox_available() {
        return;
    }
    let log = support::log_path("forged-print");
    let code = r#"import json, os, subprocess
def call_line(n):
    return json.dumps({"type": "call", "id": n, "tool": "crash", "arguments": {}})
print(call_line(1))
os.write(1, (call_line(2) + "\n").encode())
os.write(2, (call_line(3) + "\n").encode())
print(os.system("echo '" + call_line(4) + "'"))
print(subprocess.run(["sh", "-c", "echo '" + call_line(5) + "' >&2"]).returncode)
print(await add({"a": 2, "b": 3}))"#;
    let ran = run(&["--deadline", "20"], code, &["--log", log.to_str().unwrap()]);
    let line = r#"{"type": "call", "id": 1, "tool": "crash", "arguments": {}}"#;
    assert_eq!(ran.ok(), format!("{line}\n0\n0\n{{\"sum\":5}}\n"));
    assert_eq!(support::logged_calls(&log), vec!["tools/call add"], "a printed line became a call");
}

fn garbage_on_the_protocol_pipe_ends_the_cell_as_a_violation() {
    if !support::sandbox_available() {
        return;
    }
    let code = r#"import os, time
for fd in range(3, 64):
    try:
        os.write(fd, b"garbage\n")
    except OSError:
        pass
time.sleep(30)"#;
    let (ran, elapsed) = timed_run(&["--deadline", "15"], code, &[]);
    assert!(ran.stopped(), "{ran:#?}");
    let error = ran.error().unwrap_or_default();
    assert!(error.contains("protocol violation"), "the error does not name a protocol violation: {error}");
    assert!(elapsed < Duration::from_secs(8), "took {elapsed:?}: the violation did not end the run");
}

fn an_over_long_line_on_the_protocol_pipe_ends_the_cell_as_a_violation() {
    if !support::sandbox_available() {
        return;
    }
    let code = format!(
        "{FIND_PROTOCOL_FD}
import time
data = memoryview(b'x' * (300 * 1024))
fd = protocol_out_fd()
while data:
    data = data[os.write(fd, data):]
time.sleep(30)"
    );
    let (ran, elapsed) = timed_run(&["--deadline", "15"], &code, &[]);
    assert!(ran.stopped(), "{ran:#?}");
    let error = ran.error().unwrap_or_default();
    assert!(error.contains("protocol violation"), "{error}");
    assert!(error.contains("longer than 262144 bytes"), "{error}");
    assert!(elapsed < Duration::from_secs(8), "took {elapsed:?}: the violation did not end the run");
}

fn content_forged_past_the_bound_ends_the_cell_as_a_violation_and_reaches_nobody() {
    if !support::sandbox_available() {
        return;
    }
    // Written straight onto the protocol pipe, past show()'s own checks: a
    // ninth block, then one with data that is not base64.
    for (blocks, block, why) in [
        (9, r#"{'type': 'image', 'data': 'AAAA', 'mimeType': 'image/png'}"#, "more content blocks handed back"),
        (1, r#"{'type': 'image', 'data': 'not base64!', 'mimeType': 'image/png'}"#, "not base64"),
        (1, r#"{'type': 'text', 'text': 'spoofed report'}"#, "a type code cannot hand back"),
    ] {
        let code = format!(
            "{FIND_PROTOCOL_FD}
import json, time
line = json.dumps({{'type': 'content', 'block': {block}}}).encode() + b'\\n'
for _ in range({blocks}):
    os.write(protocol_out_fd(), line)
time.sleep(30)"
        );
        let (ran, elapsed) = timed_run(&["--deadline", "15"], &code, &[]);
        assert!(ran.stopped(), "{ran:#?}");
        let error = ran.error().unwrap_or_default();
        assert!(error.contains("protocol violation") && error.contains(why), "{error}");
        assert!(ran.report.get("content").is_none(), "nothing of a violating cell is handed back: {:?}", ran.report);
        assert!(elapsed < Duration::from_secs(8), "took {elapsed:?}: the violation did not end the run");
    }
}

fn a_request_code_may_not_make_is_refused_without_reaching_the_bridge() {
    if !support::sandbox_available() {
        return;
    }
    let log = support::log_path("forged-op");
    let code = format!(
        "{FIND_PROTOCOL_FD}
import asyncio, gc, json
caller = next(o for o in gc.get_objects() if type(o).__name__ == 'ToolCaller')
async def forged(call_id, op, target):
    future = asyncio.get_running_loop().create_future()
    with caller._lock:
        caller._pending[call_id] = future
    line = json.dumps({{'type': 'call', 'id': call_id, 'tool': target, 'arguments': {{}}, 'op': op}})
    os.write(protocol_out_fd(), line.encode() + b'\\n')
    try:
        return 'ok: ' + await future
    except ToolError as e:
        return 'ToolError: ' + str(e)
print(await forged(2000, 'subscribe', 'test://small'))
print(await forged(2001, 'get_prompt', 'greet'))
print(await read_resource('test://small'))"
    );
    let audit = support::log_path("forged-op-audit");
    // A budget of one call: the refused requests use none of it.
    let args = ["--deadline", "20", "--max-calls", "1", "--audit", audit.to_str().unwrap()];
    let ran = run(&args, &code, &["--resources", "--log", log.to_str().unwrap()]);
    // The bridge writes an audit record for every request it is sent,
    // refused or not: it holds the read alone, as the first call of the cell.
    let records: Vec<Value> = std::fs::read_to_string(&audit)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["kind"] == "call")
        .collect();
    let seen_by_bridge: Vec<(&str, &str)> =
        records.iter().map(|r| (r["tool"].as_str().unwrap_or("?"), r["decision"].as_str().unwrap_or("?"))).collect();
    assert_eq!(seen_by_bridge, [("test://small", "allowed")], "what the bridge saw: {records:#?}");
    let lines: Vec<&str> = ran.ok().lines().collect();
    assert_eq!(
        lines,
        [
            "ToolError: resources/subscribe: not available to code",
            "ToolError: prompts/get: not available to code",
            "small"
        ]
    );
    let seen = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(!seen.contains("subscribe") && !seen.contains("prompts/get"), "{seen}");
    let _ = std::fs::remove_file(log);
    let _ = std::fs::remove_file(audit);
}

fn forged_calls_to_unknown_tools_are_refused_before_the_server_sees_them() {
    if !support::sandbox_available() {
        return;
    }
    let log = support::log_path("forged-call");
    let code = format!(
        "{FIND_PROTOCOL_FD}{FORGE}
print(await forge(1000, 'crash', {{}}))
print(await forge(1001, 'no_such_tool', {{}}))
print(await add({{'a': 1, 'b': 2}}))"
    );
    let ran = run(&["--deadline", "20", "--allow", "add"], &code, &["--log", log.to_str().unwrap()]);
    let lines: Vec<&str> = ran.ok().lines().collect();
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert_eq!(lines[0], "ToolError: crash: this tool is not on the allowlist");
    assert!(lines[1].starts_with("ToolError: there is no tool named \"no_such_tool\""), "{}", lines[1]);
    assert_eq!(lines[2], r#"{"sum":3}"#, "the session did not survive the forged calls");
    assert_eq!(support::logged_calls(&log), vec!["tools/call add"]);
}

// ---------------------------------------------------------------------------
// The bridge's checks
// ---------------------------------------------------------------------------

fn the_allowlist_keeps_other_tools_out_of_the_code() {
    if !support::sandbox_available() {
        return;
    }
    let code = r#"import json
try:
    echo
    defined = "defined"
except NameError as e:
    defined = "NameError: " + str(e)
print(json.dumps({"echo": defined, "TOOLS": sorted(TOOLS), "globals": "crash" in globals()}))"#;
    let seen = json_stdout(&run(&["--deadline", "20", "--allow", "add"], code, &[]));
    assert_eq!(seen["echo"], "NameError: name 'echo' is not defined");
    assert_eq!(seen["TOOLS"], serde_json::json!(["add"]));
    assert_eq!(seen["globals"], false);
}

fn arguments_outside_the_schema_never_reach_the_server() {
    if !support::sandbox_available() {
        return;
    }
    let log = support::log_path("schema");
    let code = format!(
        "{ATTEMPT}
print(await attempt(add({{'a': 'one', 'b': 2}})))
print(await attempt(add({{'a': 1, 'b': 2, 'extra': 3}})))
print(await attempt(add(a=1)))
print(await attempt(add(a=1, b=2)))
# Code that goes around the sandbox's own check of the names (straight to
# the channel, as hostile code may): the bridge refuses the same calls.
caller = add.__closure__[0].cell_contents
print(await attempt(caller.call('add', {{'a': 1, 'b': 2, 'extra': 3}}, {{}})))
print(await attempt(caller.call('add', {{'a': 1}}, {{}})))"
    );
    let ran = run(&["--deadline", "20"], &code, &["--log", log.to_str().unwrap()]);
    let lines: Vec<&str> = ran.ok().lines().collect();
    assert_eq!(lines.len(), 6, "{lines:?}");
    assert!(lines[0].starts_with("ToolError: add: arguments do not match the schema"), "{}", lines[0]);
    assert!(lines[0].contains("/a") && lines[0].contains("integer"), "the problem is not named: {}", lines[0]);
    // The sandbox refuses a name the tool does not take and a missing one
    // before the call leaves (no call used), saying what the tool takes.
    assert_eq!(lines[1], "ToolError: add: it takes no parameter 'extra'. It takes: a: int, b: int");
    assert_eq!(lines[2], "ToolError: add: missing required parameter b: int. It takes: a: int, b: int");
    assert_eq!(lines[3], r#"ok: {"sum":3}"#);
    assert_eq!(lines[4], r#"ToolError: add: the schema does not name "extra"; it takes "a", "b""#);
    assert!(lines[5].starts_with("ToolError: add: arguments do not match the schema"), "{}", lines[5]);
    assert!(lines[5].contains("\"b\""), "the missing property is not named: {}", lines[5]);
    assert_eq!(support::logged_calls(&log), vec!["tools/call add"], "a refused call reached the server");
}

fn oversized_arguments_are_refused_naming_the_limit() {
    if !support::sandbox_available() {
        return;
    }
    let log = support::log_path("big-args");
    let code = format!("{ATTEMPT}\nprint(await attempt(echo({{'text': 'x' * 20000}})))");
    let ran = run(&["--deadline", "20"], &code, &["--log", log.to_str().unwrap()]);
    let stdout = ran.ok();
    assert!(stdout.starts_with("ToolError: echo: "), "{stdout}");
    assert!(stdout.contains("16384 byte limit"), "the limit is not named: {stdout}");
    assert!(support::logged_calls(&log).is_empty(), "the oversized call reached the server");
}

fn calls_past_the_budget_are_refused() {
    if !support::sandbox_available() {
        return;
    }
    let log = support::log_path("budget");
    let code = format!("{ATTEMPT}\nfor i in range(7):\n    print(await attempt(add(a=i, b=1)))");
    let ran = run(&["--deadline", "20", "--max-calls", "5"], &code, &["--log", log.to_str().unwrap()]);
    let lines: Vec<&str> = ran.ok().lines().collect();
    assert_eq!(lines.len(), 7, "{lines:?}");
    for (i, line) in lines[..5].iter().enumerate() {
        assert_eq!(*line, format!("ok: {{\"sum\":{}}}", i + 1));
    }
    for line in &lines[5..] {
        assert!(line.starts_with("ToolError: ") && line.contains("used all of its 5 tool calls"), "{line}");
    }
    assert_eq!(support::logged_calls(&log).len(), 5);
}

fn a_call_refused_for_its_arguments_still_counts_against_the_budget() {
    if !support::sandbox_available() {
        return;
    }
    let log = support::log_path("budget-refused");
    let code = format!(
        "{ATTEMPT}
print(await attempt(add(a='x', b=1)))
print(await attempt(add(a=1, b=1)))
print(await attempt(add(a=2, b=2)))"
    );
    let ran = run(&["--deadline", "20", "--max-calls", "2"], &code, &["--log", log.to_str().unwrap()]);
    let lines: Vec<&str> = ran.ok().lines().collect();
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(lines[0].contains("do not match the schema"), "{}", lines[0]);
    assert_eq!(lines[1], r#"ok: {"sum":2}"#);
    assert!(lines[2].contains("used all of its 2 tool calls"), "{}", lines[2]);
    assert_eq!(support::logged_calls(&log), vec!["tools/call add"]);
}

fn a_slow_tool_times_out_and_the_session_survives() {
    if !support::sandbox_available() {
        return;
    }
    let code = format!(
        "{ATTEMPT}
import time
started = time.monotonic()
print(await attempt(sleep({{'seconds': 5}})))
print(round(time.monotonic() - started))
print(await attempt(add(a=1, b=1)))"
    );
    let ran = run(&["--deadline", "20", "--call-timeout", "1"], &code, &[]);
    let lines: Vec<&str> = ran.ok().lines().collect();
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert_eq!(lines[0], "ToolError: sleep: no answer within 1 s");
    let waited: u32 = lines[1].parse().unwrap();
    assert!(waited < 3, "the call took {waited} s with a 1 s timeout");
    assert_eq!(lines[2], r#"ok: {"sum":2}"#, "the session did not survive the timeout");
}

fn an_oversized_result_is_refused_not_cut() {
    if !support::sandbox_available() {
        return;
    }
    let code = format!(
        "{ATTEMPT}
print(await attempt(huge(bytes=70000)))
r = await huge(bytes=60000)
print(len(r), r == 'x' * 60000)"
    );
    let ran = run(&["--deadline", "20"], &code, &[]);
    let lines: Vec<&str> = ran.ok().lines().collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines[0].starts_with("ToolError: huge: "), "{}", lines[0]);
    assert!(lines[0].contains("65536 byte limit") && lines[0].contains("not cut"), "{}", lines[0]);
    assert_eq!(lines[1], "60000 True");
}

/// True for a bare type name such as `McpError`.
fn is_type_name(text: &str) -> bool {
    !text.is_empty() && text.chars().all(|c| c.is_ascii_alphabetic())
}

fn a_server_protocol_error_reaches_the_code_as_a_type_name_only() {
    if !support::sandbox_available() {
        return;
    }
    let code = "import json\ntry:\n    await protocol_error()\n    print('no error')\nexcept ToolError as e:\n    \
                print(json.dumps(str(e)))\nprint(await add(a=1, b=2))";
    let ran = run(&["--deadline", "20"], code, &[]);
    let stdout = ran.ok();
    let (message, rest) = stdout.split_once('\n').unwrap();
    let message: String = serde_json::from_str(message).unwrap();
    assert!(is_type_name(&message), "the error is not a bare type name: {message:?}");
    assert!(!stdout.contains("/srv/secret") && !stdout.contains("pid"), "host details leaked: {stdout}");
    assert_eq!(rest, "{\"sum\":3}\n", "the session did not survive the error");
}

fn a_crashed_server_reaches_the_code_as_a_type_name_only() {
    if !support::sandbox_available() {
        return;
    }
    let code = "import json\ntry:\n    await crash()\n    print('no error')\nexcept ToolError as e:\n    \
                print(json.dumps(str(e)))";
    let ran = run(&["--deadline", "20"], code, &[]);
    let stdout = ran.ok();
    let message: String = serde_json::from_str(stdout.trim()).unwrap();
    assert!(is_type_name(&message), "the error is not a bare type name: {message:?}");
    assert!(message.contains("Transport"), "{message}");
    let server = support::test_server();
    assert!(!stdout.contains(server.to_str().unwrap()), "host details leaked: {stdout}");
}

fn a_tools_own_failure_reaches_the_code_cut_to_500_characters() {
    if !support::sandbox_available() {
        return;
    }
    let code = "import json\ntry:\n    await fail(message='y' * 2000)\n    print('no error')\nexcept ToolError as e:\n    \
                print(json.dumps(str(e)))";
    let stdout = run(&["--deadline", "20"], code, &[]).ok().to_string();
    let message: String = serde_json::from_str(stdout.trim()).unwrap();
    let chars = message.chars().count();
    assert!((400..=500).contains(&chars), "{chars} characters: {message}");
    assert!(message.starts_with("fail failed: yyyy"), "{message}");
}

// ---------------------------------------------------------------------------
// The catalog
// ---------------------------------------------------------------------------

fn awkward_tool_names_become_identifiers_that_hide_nothing() {
    if !support::sandbox_available() {
        return;
    }
    let log = support::log_path("awkward");
    let code = r#"import json
names = ["get_weather", "class_", "print_", "__init___", "_9lives", "ToolError_", "search_tools_", "TOOLS_",
         "with_dots", "na_ve"]
print(json.dumps({
    "missing": [n for n in names if n not in TOOLS or n not in globals()],
    "class": await class_({}),
    "print": await print_({}),
    "nine": await _9lives(),
    "weather": await get_weather(city="Oslo"),
    "helpers": [type(TOOLS).__name__, type(search_tools("x")).__name__, issubclass(ToolError, Exception)],
    "tools_is_dict": isinstance(TOOLS, dict),
}))
print("print still works")"#;
    let ran = run(&["--deadline", "20"], code, &["--log", log.to_str().unwrap()]);
    let stdout = ran.ok();
    let (first, second) = stdout.split_once('\n').unwrap();
    assert_eq!(second, "print still works\n");
    let seen: Value = serde_json::from_str(first).unwrap();
    assert_eq!(seen["missing"], serde_json::json!([]));
    assert_eq!(seen["class"], "ok class");
    assert_eq!(seen["print"], "ok print");
    assert_eq!(seen["nine"], "ok 9lives");
    assert_eq!(seen["weather"], "ok get-weather");
    assert_eq!(seen["helpers"], serde_json::json!(["ToolStubs", "dict", true]));
    // TOOLS is a dict (a subclass whose missing keys name the closest tools).
    assert!(seen["tools_is_dict"].as_bool().unwrap());
    assert_eq!(
        support::logged_calls(&log),
        vec!["tools/call class", "tools/call print", "tools/call 9lives", "tools/call get-weather"]
    );
}

fn search_tools_returns_names_with_summaries_best_first_by_the_words_of_names_descriptions_and_parameters() {
    if !support::sandbox_available() {
        return;
    }
    let code = r#"import json
print(json.dumps([
    search_tools("echo text back", limit=1),
    list(search_tools("bravo")),
    list(search_tools("bravo", limit=2)),
    list(search_tools("how many times to repeat"))[:1],
    list(search_tools("weather in Oslo"))[:1],
    list(search_tools("a number of seconds to wait"))[:1],
    list(search_tools("echo bravo")),
    search_tools("zzzz"),
    len(search_tools("tool")),
]))"#;
    let seen = json_stdout(&run(&["--deadline", "20"], code, &["--many", "30"]));
    // The name and the one-line summary (parameters, what it does).
    assert_eq!(seen[0], serde_json::json!({"echo": "(text: str, repeat: int = 1)  Echo text back."}));
    // A word of the descriptions only: equal scores keep catalog order.
    assert_eq!(seen[1], serde_json::json!(["extra_tool_0001", "extra_tool_0011", "extra_tool_0021"]));
    assert_eq!(seen[2], serde_json::json!(["extra_tool_0001", "extra_tool_0011"]));
    // A parameter's own description; a kebab-case name (`get-weather`); a
    // parameter's name and a stemmed word ("seconds", "Sleep for the given
    // number of seconds").
    assert_eq!(seen[3], serde_json::json!(["echo"]));
    assert_eq!(seen[4], serde_json::json!(["get_weather"]));
    assert_eq!(seen[5], serde_json::json!(["sleep"]));
    // A word in the name outranks the same word in descriptions.
    assert_eq!(seen[6][0], "echo");
    assert_eq!(seen[6].as_array().unwrap().len(), 5, "five by default: {}", seen[6]);
    assert_eq!(seen[7], serde_json::json!({}));
    assert_eq!(seen[8], 5);
}

fn discovery_never_reaches_the_server_nor_uses_the_call_budget() {
    if !support::sandbox_available() {
        return;
    }
    let log = support::log_path("discovery");
    let code = format!(
        "{ATTEMPT}
for _ in range(200):
    hits = search_tools('bravo charlie')
    stubs = [TOOLS[name] for name in hits]
    everything = list(TOOLS.items())
print(len(hits), len(everything) > 30)
print(await attempt(add(a=1, b=2)))
print(await attempt(add(a=1, b=2)))"
    );
    let ran = run(&["--deadline", "20", "--max-calls", "1"], &code, &["--many", "30", "--log", log.to_str().unwrap()]);
    let lines: Vec<&str> = ran.ok().lines().collect();
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert_eq!(lines[0], "5 True");
    assert_eq!(lines[1], r#"ok: {"sum":3}"#, "discovery used up the budget");
    assert!(lines[2].contains("used all of its 1 tool calls"), "the budget of 1 was not enforced: {}", lines[2]);
    assert_eq!(support::logged_calls(&log), vec!["tools/call add"]);
}

fn long_descriptions_are_cut_in_the_stubs() {
    if !support::sandbox_available() {
        return;
    }
    let code = r#"import json
stub = TOOLS["long_desc_tool"]
print(json.dumps([len(stub), len(TOOLS["echo"]), "A tool with a very long description" in stub]))"#;
    let seen = json_stdout(&run(&["--deadline", "20"], code, &["--long-descriptions"]));
    let long = seen[0].as_u64().unwrap();
    let echo = seen[1].as_u64().unwrap();
    assert!((2048..4096).contains(&long), "the 50,000-character description gave a {long}-character stub");
    assert!((2048..4096).contains(&echo), "the 10,000-character description gave a {echo}-character stub");
    assert_eq!(seen[2], true, "the description's start is not in the stub");
}

fn hostile_schemas_are_left_out_or_bounded() {
    if !support::sandbox_available() {
        return;
    }
    let code = r#"import json
hostile = TOOLS.get("hostile_schema", "")
print(json.dumps({
    "deep": "deep" in TOOLS or "deep" in globals(),
    "bad_schema": "bad_schema" in TOOLS or "bad_schema" in globals(),
    "hostile_len": len(hostile),
    "more": "more parameters" in hostile,
    "add": await add(a=2, b=2),
}))"#;
    let seen = json_stdout(&run(&["--deadline", "20"], code, &["--deep-schema"]));
    assert_eq!(seen["deep"], false, "the too-deep schema's tool was kept");
    assert_eq!(seen["bad_schema"], false, "the invalid schema's tool was kept");
    let hostile = seen["hostile_len"].as_u64().unwrap();
    assert!((1..40_000).contains(&hostile), "hostile_schema's stub is {hostile} characters");
    assert_eq!(seen["more"], true);
    assert_eq!(seen["add"], r#"{"sum":4}"#);
}

fn a_name_clash_stops_startup_naming_both_tools() {
    if !support::sandbox_available() {
        return;
    }
    let output = support::command(&["--deadline", "20"], "print(1)", &["--clash"]).output().expect("code-mode runs");
    assert!(!output.status.success(), "code-mode started despite the clash");
    assert!(output.stdout.is_empty(), "a report was printed: {}", String::from_utf8_lossy(&output.stdout));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("a-b") && stderr.contains("a_b"), "both tools are not named: {stderr}");
}

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------

fn a_traceback_shows_only_the_cells_own_frames() {
    if !support::sandbox_available() {
        return;
    }
    let code = "def divide():\n    return 1 / 0\n\ndivide()\n";
    let ran = run(&["--deadline", "20"], code, &[]);
    assert!(!ran.stopped());
    let error = ran.error().expect("the cell raised");
    assert!(error.ends_with("ZeroDivisionError: division by zero"), "{error}");
    assert!(error.contains("File \"<cell>\", line 2, in divide"), "{error}");
    assert!(!error.contains("runner.py") && !error.contains("/opt/code-mode"), "runner frames shown: {error}");
}

// ---------------------------------------------------------------------------
// The matrix: every test above runs under each runtime
// ---------------------------------------------------------------------------

/// `runc::<test>` and `runsc::<test>` for each test named in `both`, and
/// `packages_runc::<test>` and `packages_runsc::<test>` on the data-science
/// image ([`crate::support::under_packages`]);
/// `runc_only` tests say in their doc comment why they do not apply to the
/// other runtime. A test function left out of the lists is dead code, which
/// the lints refuse.
macro_rules! matrix {
    (both: [$($both:ident),* $(,)?], runc_only: [$($runc:ident),* $(,)?] $(,)?) => {
        mod runc {
            $(#[test] fn $both() { crate::support::under(super::Runtime::Runc, super::$both) })*
            $(#[test] fn $runc() { crate::support::under(super::Runtime::Runc, super::$runc) })*
        }
        mod runsc {
            $(#[test] fn $both() { crate::support::under(super::Runtime::Runsc, super::$both) })*
        }
        /// The same on a sandbox image with packages (numpy, pandas,
        /// matplotlib): more code inside, no new way out.
        mod packages_runc {
            $(#[test] fn $both() {
                crate::support::under_packages(super::Runtime::Runc, crate::support::data_science(), super::$both)
            })*
        }
        mod packages_runsc {
            $(#[test] fn $both() {
                crate::support::under_packages(super::Runtime::Runsc, crate::support::data_science(), super::$both)
            })*
        }
    };
}

matrix! {
    both: [
        nothing_from_the_hosts_environment_reaches_the_code,
        no_secret_from_the_host_is_inside_the_sandbox,
        neither_this_project_nor_an_mcp_client_is_installed,
        the_wrapped_server_gets_only_the_variables_it_is_given,
        the_sandbox_has_no_network_and_its_loopback_is_its_own,
        the_root_filesystem_is_read_only_and_tmp_cannot_run_programs,
        the_code_runs_as_nobody_with_no_capabilities_and_a_seccomp_filter,
        io_uring_and_user_namespaces_are_refused_by_seccomp,
        a_program_written_to_an_anonymous_memory_file_cannot_run,
        device_nodes_cannot_be_made_and_no_tun_or_fuse_device_opens,
        the_posture_check_passes_under_this_runtime,
        a_fork_bomb_is_stopped_at_the_deadline,
        an_endless_loop_is_stopped_at_the_deadline,
        a_gigabyte_allocation_is_stopped_for_running_out_of_memory,
        the_process_limit_holds,
        open_files_are_limited,
        printed_output_is_cut_to_8192_bytes_its_head_and_its_tail,
        an_output_flood_is_stopped_long_before_the_deadline,
        printed_protocol_lines_stay_plain_output_and_make_no_call,
        garbage_on_the_protocol_pipe_ends_the_cell_as_a_violation,
        an_over_long_line_on_the_protocol_pipe_ends_the_cell_as_a_violation,
        forged_calls_to_unknown_tools_are_refused_before_the_server_sees_them,
        content_forged_past_the_bound_ends_the_cell_as_a_violation_and_reaches_nobody,
        a_request_code_may_not_make_is_refused_without_reaching_the_bridge,
        the_allowlist_keeps_other_tools_out_of_the_code,
        arguments_outside_the_schema_never_reach_the_server,
        oversized_arguments_are_refused_naming_the_limit,
        calls_past_the_budget_are_refused,
        a_call_refused_for_its_arguments_still_counts_against_the_budget,
        a_slow_tool_times_out_and_the_session_survives,
        an_oversized_result_is_refused_not_cut,
        a_server_protocol_error_reaches_the_code_as_a_type_name_only,
        a_crashed_server_reaches_the_code_as_a_type_name_only,
        a_tools_own_failure_reaches_the_code_cut_to_500_characters,
        awkward_tool_names_become_identifiers_that_hide_nothing,
        search_tools_returns_names_with_summaries_best_first_by_the_words_of_names_descriptions_and_parameters,
        discovery_never_reaches_the_server_nor_uses_the_call_budget,
        long_descriptions_are_cut_in_the_stubs,
        hostile_schemas_are_left_out_or_bounded,
        a_name_clash_stops_startup_naming_both_tools,
        a_traceback_shows_only_the_cells_own_frames,
    ],
    runc_only: [the_dynamic_loader_cannot_load_a_program_from_tmp],
}
