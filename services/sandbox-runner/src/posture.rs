//! The posture check behind `code-mode doctor`: is the isolation we claim
//! really there, on this host, under this runtime?
//!
//! [`check`] asks the engine (reachable, version, runtimes registered, runc
//! against known escapes, the sandbox image present), then starts one
//! throwaway container with the real [`Lockdown`] of the runtime, running
//! `image/posture_probe.py` in place of the runner. The probe reports what
//! the code can see and do (who it runs as, what it can write, run, open
//! and start); while it waits, the host reads the limits back from the
//! container's cgroup. [`judge`] turns those facts into one [`Check`] per
//! control, each a pass, a warning or a failure. Nothing here decides a
//! limit: the expected values come from the lockdown itself, so the check
//! follows whatever the runner enforces.
//!
//! The probe's container is labelled like every sandbox container, removed
//! on every path, and reaped by the next runner if this process dies.

use std::time::Duration;

use bollard::Docker;
use bollard::container::LogOutput;
use bollard::query_parameters::StatsOptionsBuilder;
use futures::StreamExt;
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;

use crate::container::{Container, Lockdown, Runtime, check_runtime};
use crate::image::{self, RUNNER_FILES};

/// The probe script run in the container.
pub const PROBE_PY: &str = include_str!("../image/posture_probe.py");

/// How long the probe may take to report (the process test starts up to 200
/// processes; gVisor starts slower).
const PROBE_TIMEOUT: Duration = Duration::from_secs(90);

/// The outcome of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// The control holds.
    Pass,
    /// Worth fixing, but the isolation does not depend on it.
    Warn,
    /// A required control does not hold.
    Fail,
}

/// One line of the report.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    /// A stable identifier (`seccomp`, `tmp-noexec`, ...).
    pub name: &'static str,
    /// The outcome.
    pub verdict: Verdict,
    /// What was seen, and for a warning or failure, what to do.
    pub detail: String,
}

/// Every check of one runtime, in order.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The runtime checked.
    pub runtime: Runtime,
    /// The image probed.
    pub image: String,
    /// The checks.
    pub checks: Vec<Check>,
}

impl Report {
    /// True when no required check failed.
    pub fn passed(&self) -> bool {
        self.checks.iter().all(|c| c.verdict != Verdict::Fail)
    }

    /// The check named `name`.
    pub fn get(&self, name: &str) -> Option<&Check> {
        self.checks.iter().find(|c| c.name == name)
    }

    fn push(&mut self, name: &'static str, verdict: Verdict, detail: impl Into<String>) {
        self.checks.push(Check { name, verdict, detail: detail.into() });
    }

    fn pass_if(&mut self, name: &'static str, holds: bool, detail: impl Into<String>) {
        self.push(name, if holds { Verdict::Pass } else { Verdict::Fail }, detail);
    }
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "code-mode doctor: runtime {}, image {}", self.runtime, self.image)?;
        for c in &self.checks {
            let verdict = match c.verdict {
                Verdict::Pass => "ok  ",
                Verdict::Warn => "warn",
                Verdict::Fail => "FAIL",
            };
            writeln!(f, "{verdict} {:<18} {}", c.name, c.detail)?;
        }
        let failed = self.checks.iter().filter(|c| c.verdict == Verdict::Fail).count();
        let warned = self.checks.iter().filter(|c| c.verdict == Verdict::Warn).count();
        write!(f, "{} checks: {failed} failed, {warned} warnings", self.checks.len())
    }
}

/// What the probe container reported, and what the host read meanwhile.
#[derive(Debug, Default)]
pub struct Observed {
    /// The probe's first line: facts from inside.
    pub facts: Value,
    /// The probe's second line (how the memory-hungry child ended), if the
    /// container lived to print it.
    pub memory: Option<Value>,
    /// `pids.max` of the container's cgroup, read through the engine.
    pub cgroup_pids: Option<u64>,
    /// The memory limit of the container's cgroup.
    pub cgroup_memory: Option<u64>,
    /// `(exit code, OOM-killed)` once the container stopped.
    pub exit: Option<(i64, bool)>,
    /// The host's [`KERNEL_SETTINGS`] as read where doctor runs, by their
    /// key (`None`: unreadable).
    pub host_kernel: Vec<(&'static str, Option<i64>)>,
}

/// A host setting that decides what a cell can learn about the kernel.
#[derive(Debug, Clone, Copy)]
pub struct KernelSetting {
    /// The check's name.
    pub check: &'static str,
    /// The key under `/proc/sys/kernel/` (`kernel.<key>` to sysctl).
    pub key: &'static str,
    /// The weakest value that is not weak.
    pub at_least: i64,
    /// What a weaker value lets unprivileged code (a cell under runc) do.
    pub exposes: &'static str,
}

/// The settings doctor reports, each with the value to set.
pub const KERNEL_SETTINGS: [KernelSetting; 4] = [
    KernelSetting {
        check: "kptr-restrict",
        key: "kptr_restrict",
        at_least: 1,
        exposes: "kernel addresses in /proc/kallsyms and elsewhere reach processes without CAP_SYSLOG once \
                  perf_event_paranoid is 1 or less (a KASLR bypass)",
    },
    KernelSetting {
        check: "perf-paranoid",
        key: "perf_event_paranoid",
        at_least: 2,
        exposes: "unprivileged processes may profile the kernel, and with kptr_restrict 0 read kernel addresses",
    },
    KernelSetting {
        check: "dmesg-restrict",
        key: "dmesg_restrict",
        at_least: 1,
        exposes: "unprivileged processes may read the kernel log (addresses, other containers' events)",
    },
    KernelSetting {
        check: "unprivileged-bpf",
        key: "unprivileged_bpf_disabled",
        at_least: 1,
        exposes: "unprivileged processes may load BPF programs (our seccomp filter refuses bpf() to the code; this \
                  is the host's line behind it)",
    },
];

/// The host's value of each of [`KERNEL_SETTINGS`], from `/proc/sys`.
pub fn host_kernel_settings() -> Vec<(&'static str, Option<i64>)> {
    KERNEL_SETTINGS
        .iter()
        .map(|s| {
            let read = std::fs::read_to_string(format!("/proc/sys/kernel/{}", s.key)).ok();
            (s.key, read.and_then(|v| v.split_whitespace().next().and_then(|n| n.parse().ok())))
        })
        .collect()
}

/// One kernel setting: the host's value next to what the sandbox reads
/// (`inside`, and `kallsyms`: what /proc/kallsyms showed it); a warning on
/// a weak or unreadable host value, saying what to set.
pub fn judge_kernel_setting(
    setting: &KernelSetting,
    host: Option<i64>,
    inside: &Value,
    kallsyms: &Value,
    runtime: Runtime,
) -> (Verdict, String) {
    let whose = if runtime == Runtime::Runsc { "the sandbox (gVisor's own kernel)" } else { "the sandbox" };
    let mut seen = match inside.as_i64() {
        Some(v) => format!("{whose} reads {v}"),
        None => format!("{whose} cannot read it"),
    };
    if setting.key == "kptr_restrict" {
        let shows = match kallsyms.as_str() {
            Some("addresses") => "shows it real addresses".to_string(),
            Some("zeroed") => "shows it every address zeroed".to_string(),
            Some(refused) => format!("gives it {refused}"),
            None => "was not read".to_string(),
        };
        seen.push_str(&format!(", /proc/kallsyms {shows}"));
    }
    let sysctl = format!("kernel.{}", setting.key);
    match host {
        None => (
            Verdict::Warn,
            format!("{sysctl} could not be read on this host; {seen}: check it is {} or more", setting.at_least),
        ),
        Some(v) if v < setting.at_least => (
            Verdict::Warn,
            format!(
                "host {sysctl} = {v}, {seen}: {}; set it to {} (`sysctl -w {sysctl}={}`, and in /etc/sysctl.d/ to \
                 keep it)",
                setting.exposes, setting.at_least, setting.at_least
            ),
        ),
        Some(v) => (Verdict::Pass, format!("host {sysctl} = {v}, {seen}")),
    }
}

/// Run every check for `runtime` with the sandbox image `image`.
pub async fn check(runtime: Runtime, image: &str) -> Report {
    let mut report = Report { runtime, image: image.to_string(), checks: Vec::new() };
    let docker = match crate::connect_docker().await {
        Ok(docker) => docker,
        Err(e) => {
            report.push("engine", Verdict::Fail, e.to_string());
            return report;
        }
    };
    let version = docker.version().await.ok();
    let engine = version.as_ref().and_then(|v| v.version.clone()).unwrap_or_else(|| "unknown".into());
    let api = version.as_ref().and_then(|v| v.api_version.clone()).unwrap_or_else(|| "?".into());
    report.push("engine", Verdict::Pass, format!("Docker {engine} (API {api}) answers"));

    let mut runtime_ok = false;
    let others = Runtime::ALL.into_iter().filter(|r| *r != runtime);
    for r in std::iter::once(runtime).chain(others) {
        let name = if r == runtime { "runtime" } else { "other-runtime" };
        match check_runtime(&docker, r).await {
            Ok(()) => {
                runtime_ok |= r == runtime;
                let args = r.required_args().join(" ");
                let with = if args.is_empty() { String::new() } else { format!(" with {args}") };
                report.push(name, Verdict::Pass, format!("{r} is registered{with}"));
            }
            // Only the runtime asked for is required.
            Err(e) => report.push(name, if r == runtime { Verdict::Fail } else { Verdict::Warn }, e.to_string()),
        }
    }
    let runc =
        version.as_ref().and_then(|v| v.components.as_ref()).and_then(|c| c.iter().find(|c| c.name == "runc")).map(
            |c| {
                let build = c.details.as_ref().and_then(|d| d.get("GitCommit")).cloned().unwrap_or_default();
                (c.version.clone(), build)
            },
        );
    let (verdict, detail) = match runc {
        Some((version, build)) => judge_runc(&version, &build),
        None => (Verdict::Warn, "the engine does not report a runc version".to_string()),
    };
    report.push("runc-version", verdict, detail);

    match image::image_exists(&docker, image).await {
        Ok(true) => report.push("image", Verdict::Pass, format!("{image} is present")),
        Ok(false) => {
            report.push("image", Verdict::Fail, format!("{image} is missing: build it with `code-mode build-image`"));
            return report;
        }
        Err(e) => {
            report.push("image", Verdict::Fail, e.to_string());
            return report;
        }
    }
    if !runtime_ok {
        return report;
    }
    let lockdown = Lockdown { image: image.to_string(), ..Lockdown::for_runtime(runtime) };
    match observe(&docker, &lockdown).await {
        Ok(observed) => judge(&mut report, &lockdown, &observed),
        Err(e) => report.push("probe", Verdict::Fail, format!("the probe container did not report: {e}")),
    }
    report
}

/// Known runc escapes: `(CVE, first fixed version as (major, minor, patch,
/// release candidate or MAX for a release), that version written out, what
/// the escape does)`.
const RUNC_ESCAPES: [(&str, [u64; 4], &str, &str); 2] = [
    (
        "CVE-2019-5736",
        [1, 0, 0, 7],
        "1.0.0-rc7",
        "a container overwrites the host's runc binary through /proc/self/exe",
    ),
    (
        "CVE-2024-21626",
        [1, 1, 12, u64::MAX],
        "1.1.12",
        "a leaked host directory descriptor becomes the container's working directory",
    ),
];

/// Distribution builds that carry a fix below the upstream version, by the
/// build the engine reports: `(build, CVE)`. Debian's changelog of
/// 1.1.5+ds1-1+deb12u1 names CVE-2024-21626.
const RUNC_BACKPORTS: [(&str, &str); 1] = [("1.1.5+ds1-1+deb12u1", "CVE-2024-21626")];

/// `1.0.0-rc6` as `[1, 0, 0, 6]`, `1.1.5+ds1` as `[1, 1, 5, MAX]` (a release
/// sorts after its candidates).
fn runc_version_key(version: &str) -> Option<[u64; 4]> {
    let trimmed = version.trim_start_matches('v');
    let core: String = trimmed.chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
    let numbers: Vec<u64> = core.split('.').map(|n| n.parse().ok()).collect::<Option<_>>()?;
    if numbers.len() < 2 || numbers.len() > 3 {
        return None;
    }
    let rest = &trimmed[core.len()..];
    let rc = match rest.strip_prefix("-rc") {
        Some(n) => n.chars().take_while(char::is_ascii_digit).collect::<String>().parse().ok()?,
        None => u64::MAX,
    };
    Some([numbers[0], numbers[1], numbers.get(2).copied().unwrap_or(0), rc])
}

/// runc's version against the known escapes. A warning, not a failure: the
/// lockdown (no capabilities, uid 65534, read-only root) narrows both, and
/// under runsc runc is not on the path of the code at all.
pub fn judge_runc(version: &str, build: &str) -> (Verdict, String) {
    let Some(key) = runc_version_key(version) else {
        return (Verdict::Warn, format!("runc {version}: cannot read the version to check it against known escapes"));
    };
    let mut open = Vec::new();
    let mut backported = Vec::new();
    for (cve, fixed, fixed_name, what) in RUNC_ESCAPES {
        if key >= fixed {
            continue;
        }
        if RUNC_BACKPORTS.iter().any(|(b, c)| *b == build && *c == cve) {
            backported.push(cve);
        } else {
            open.push(format!("{cve} ({what}; fixed in {fixed_name})"));
        }
    }
    let build_note = if build.is_empty() || build == version { String::new() } else { format!(" (build {build})") };
    if !open.is_empty() {
        return (
            Verdict::Warn,
            format!(
                "runc {version}{build_note} is open to {}: upgrade runc (or the engine package that ships it) to \
                 1.1.12 or later",
                open.join(", ")
            ),
        );
    }
    let note = if backported.is_empty() {
        String::new()
    } else {
        format!("; older than upstream's fix, but this build carries the fix of {}", backported.join(", "))
    };
    (Verdict::Pass, format!("runc {version}{build_note}: no known escape{note}"))
}

/// Start the probe container, read its report and its cgroup, let it try
/// the memory limit, remove it.
pub async fn observe(docker: &Docker, lockdown: &Lockdown) -> Result<Observed, crate::error::SandboxError> {
    let entrypoint =
        vec!["python3".to_string(), "-I".into(), "-c".into(), PROBE_PY.into(), lockdown.memory_bytes.to_string()];
    let (container, mut output, mut input) =
        Container::start_with(docker, lockdown, "posture-probe", Some(entrypoint)).await?;
    let result = async {
        let mut observed = Observed { host_kernel: host_kernel_settings(), ..Observed::default() };
        let mut buffer = Vec::new();
        let first = tokio::time::timeout(PROBE_TIMEOUT, next_line(&mut output, &mut buffer))
            .await
            .map_err(|_| probe_error(format!("no report within {PROBE_TIMEOUT:?}")))?
            .ok_or_else(|| probe_error(format!("it ended without a report: {}", String::from_utf8_lossy(&buffer))))?;
        observed.facts =
            serde_json::from_str(&first).map_err(|e| probe_error(format!("its report is not JSON ({e}): {first}")))?;
        let options = StatsOptionsBuilder::new().stream(false).one_shot(true).build();
        if let Some(Ok(stats)) = docker.stats(container.id(), Some(options)).next().await {
            observed.cgroup_pids = stats.pids_stats.and_then(|p| p.limit);
            observed.cgroup_memory = stats.memory_stats.and_then(|m| m.limit);
        }
        // End of input lets the probe go on to the memory test.
        let _ = input.shutdown().await;
        drop(input);
        if let Ok(Some(line)) = tokio::time::timeout(PROBE_TIMEOUT, next_line(&mut output, &mut buffer)).await {
            observed.memory = serde_json::from_str(&line).ok();
        }
        // The stream ends when the container does.
        let _ = tokio::time::timeout(Duration::from_secs(10), async { while output.next().await.is_some() {} }).await;
        for _ in 0..50 {
            observed.exit = container.exit_state().await;
            if observed.exit.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(observed)
    }
    .await;
    container.remove().await;
    result
}

fn probe_error(reason: String) -> crate::error::SandboxError {
    crate::error::SandboxError::Probe { reason }
}

/// The next line of the container's stdout (stderr is kept in `buffer`
/// only for the error of a probe that never reports).
async fn next_line(output: &mut crate::container::Output, buffer: &mut Vec<u8>) -> Option<String> {
    loop {
        if let Some(end) = buffer.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buffer.drain(..=end).collect();
            return Some(String::from_utf8_lossy(&line).trim().to_string());
        }
        match output.next().await? {
            Ok(LogOutput::StdOut { message }) => buffer.extend_from_slice(&message),
            Ok(LogOutput::StdErr { message }) => {
                tracing::debug!(stderr = %String::from_utf8_lossy(&message), "posture probe");
            }
            Ok(_) => {}
            Err(_) => return None,
        }
    }
}

/// Judge what the probe saw against the lockdown it ran under.
pub fn judge(report: &mut Report, lockdown: &Lockdown, observed: &Observed) {
    let facts = &observed.facts;
    let runsc = lockdown.runtime == Runtime::Runsc;
    let s = |v: &Value| match v {
        Value::String(s) => s.clone(),
        Value::Null => "nothing".into(),
        other => other.to_string(),
    };

    let uid = &facts["uid"];
    let want_uid: i64 = lockdown.user.split(':').next().and_then(|u| u.parse().ok()).unwrap_or(65534);
    report.pass_if(
        "uid",
        uid[0] == want_uid && uid[1] == want_uid,
        format!("the code runs as uid {} (effective {}), expected {want_uid}", s(&uid[0]), s(&uid[1])),
    );

    let status = &facts["status"];
    let caps: Vec<String> =
        ["CapInh", "CapPrm", "CapEff", "CapBnd"].iter().map(|k| format!("{k} {}", s(&status[*k]))).collect();
    let no_caps = ["CapInh", "CapPrm", "CapEff", "CapBnd"].iter().all(|k| status[*k] == "0000000000000000");
    report.pass_if("capabilities", no_caps, caps.join(", "));

    report.pass_if(
        "no-new-privileges",
        facts["no_new_privs"] == 1,
        format!(
            "prctl(PR_GET_NO_NEW_PRIVS) = {} (status line: {})",
            s(&facts["no_new_privs"]),
            s(&status["NoNewPrivs"])
        ),
    );

    let filter = facts["seccomp_mode"] == 2 && status["Seccomp"] == "2";
    let how = if runsc { "inside gVisor's kernel (--oci-seccomp)" } else { "in the host kernel" };
    report.pass_if(
        "seccomp",
        filter,
        format!(
            "seccomp mode {} (2 is a filter) {how}; /proc/self/status Seccomp: {}",
            s(&facts["seccomp_mode"]),
            s(&status["Seccomp"])
        ),
    );

    report.pass_if(
        "read-only-root",
        facts["root_write"] == "EROFS",
        format!("writing /var/tmp (mode 1777 in the image): {}", s(&facts["root_write"])),
    );

    let tmp_mount = s(&facts["tmp_mount"]);
    report.pass_if(
        "tmp-noexec",
        facts["tmp_exec"] == "EACCES" && tmp_mount.split(',').any(|o| o == "noexec"),
        format!("running a script written to /tmp: {}; /tmp mounted {tmp_mount}", s(&facts["tmp_exec"])),
    );

    // runc: no /dev/shm at all (--ipc none). gVisor always has one in its
    // own /dev: the control is that the code cannot write to it.
    let shm = s(&facts["dev_shm"]);
    let shm_ok = if runsc { shm == "absent" || shm == "EACCES" || shm == "EROFS" } else { shm == "absent" };
    report.pass_if("no-dev-shm", shm_ok, format!("/dev/shm: {shm}"));

    let interfaces = &facts["interfaces"];
    report.pass_if(
        "network",
        *interfaces == serde_json::json!(["lo"]),
        format!("network interfaces: {}", s(interfaces)),
    );

    let processes = &facts["processes"];
    let started = processes["started"].as_u64().unwrap_or(u64::MAX);
    let pids_ok = started < lockdown.pids as u64 && processes["refused"] == "EAGAIN";
    let where_limit = if runsc {
        format!("RLIMIT_NPROC {} inside gVisor; host pids cgroup {}", lockdown.pids, show(observed.cgroup_pids))
    } else {
        format!("pids cgroup {}", show(observed.cgroup_pids))
    };
    let want_pids = if runsc { crate::container::RUNSC_HOST_PIDS } else { lockdown.pids } as u64;
    report.pass_if(
        "pids-limit",
        pids_ok && observed.cgroup_pids == Some(want_pids),
        format!("{started} processes started, then {} ({where_limit})", s(&processes["refused"])),
    );

    let child = observed.memory.as_ref().map(|m| m["memory_child"].clone());
    let oom_killed = observed.exit.is_some_and(|(_, oom)| oom);
    let killed = child.as_ref().is_some_and(|c| *c == -9) || oom_killed;
    let how = match (&child, oom_killed) {
        (Some(c), _) => format!("a child allocating twice the limit ended with {}", s(c)),
        (None, true) => "allocating twice the limit got the whole sandbox OOM-killed".into(),
        (None, false) => "the memory test did not report".into(),
    };
    report.pass_if(
        "memory-limit",
        killed && observed.cgroup_memory == Some(lockdown.memory_bytes as u64),
        format!("cgroup limit {} (expected {}); {how}", show(observed.cgroup_memory), lockdown.memory_bytes),
    );

    report.pass_if("io-uring", facts["io_uring"] == "EPERM", format!("io_uring_setup: {}", s(&facts["io_uring"])));
    report.pass_if(
        "memfd",
        facts["memfd"] == "EPERM",
        format!("running a program written to memfd_create: {}", s(&facts["memfd"])),
    );
    report.pass_if(
        "namespaces",
        facts["unshare_user"] == "EPERM" && facts["clone3"] == "ENOSYS",
        format!("unshare(CLONE_NEWUSER): {}; clone3: {}", s(&facts["unshare_user"]), s(&facts["clone3"])),
    );
    let devices = &facts["devices"];
    let devices_closed = devices.as_object().is_some_and(|d| d.values().all(|v| v != "ok"));
    report.pass_if(
        "devices",
        facts["mknod_device"] == "EPERM" && devices_closed,
        format!("mknod of a device: {}; opening {}", s(&facts["mknod_device"]), s(devices)),
    );

    let image = &facts["image"];
    // The runner's files, each as this build of code-mode holds it.
    let ours: serde_json::Map<String, serde_json::Value> = RUNNER_FILES
        .iter()
        .map(|(name, text)| (name.to_string(), format!("{:x}", Sha256::digest(text.as_bytes())).into()))
        .collect();
    let runner_ours = image["files_sha256"] == serde_json::Value::Object(ours);
    let opt_files: Vec<String> = RUNNER_FILES.iter().map(|(name, _)| format!("/opt/code-mode/{name}")).collect();
    let packages: Option<std::collections::BTreeMap<String, String>> =
        serde_json::from_value(image["packages"].clone()).ok().flatten();
    // An image with packages holds their list beside the runner (and the
    // packages under /opt/code-mode/packages, which the probe leaves out).
    let mut expected_opt = opt_files;
    if packages.is_some() {
        expected_opt.push("/opt/code-mode/packages.json".into());
    }
    expected_opt.sort();
    let only_runner = image["opt"] == serde_json::json!(expected_opt);
    let clean = image["mcp"] == false && image["tools"] == serde_json::json!([]);
    let (verdict, detail) = judge_packages(packages.as_ref());
    report.push("packages", verdict, detail);
    report.pass_if(
        "image-contents",
        runner_ours && only_runner && clean,
        format!(
            "Python {}; runner.py and the search files it loads {}; /opt holds {}; mcp importable: {}; tools found: {}",
            s(&image["python"]),
            if runner_ours { "are ours" } else { "differ from ours" },
            s(&image["opt"]),
            s(&image["mcp"]),
            s(&image["tools"])
        ),
    );
    report.push("kernel", Verdict::Pass, format!("the code sees kernel {}", s(&facts["kernel"])));

    for setting in &KERNEL_SETTINGS {
        let host = observed.host_kernel.iter().find(|(key, _)| *key == setting.key).and_then(|(_, v)| *v);
        let inside = &facts["kernel_settings"][setting.key];
        let (verdict, detail) = judge_kernel_setting(setting, host, inside, &facts["kallsyms"], lockdown.runtime);
        report.push(setting.check, verdict, detail);
    }
}

/// Packages known to open network connections or run programs as their
/// job, and what they do. In the sandbox they find no network and run as
/// nobody with no capabilities, so those calls fail; a package of the list
/// is worth a look (is it needed at all?), not a refusal.
const REACHING_PACKAGES: &[(&str, &str)] = &[
    ("aiohttp", "opens network connections"),
    ("boto3", "opens network connections"),
    ("botocore", "opens network connections"),
    ("docker", "talks to a Docker engine's socket"),
    ("fabric", "opens SSH connections and runs programs"),
    ("gitpython", "runs the git program"),
    ("grpcio", "opens network connections"),
    ("httpx", "opens network connections"),
    ("invoke", "runs programs"),
    ("paramiko", "opens SSH connections"),
    ("pexpect", "runs programs"),
    ("plumbum", "runs programs"),
    ("pycurl", "opens network connections"),
    ("requests", "opens network connections"),
    ("sh", "runs programs"),
    ("urllib3", "opens network connections"),
    ("websocket-client", "opens network connections"),
    ("websockets", "opens network connections"),
];

/// The `packages` check: what the image holds beyond the standard library,
/// by name and version; a warning naming each package known to reach out.
fn judge_packages(packages: Option<&std::collections::BTreeMap<String, String>>) -> (Verdict, String) {
    let Some(packages) = packages.filter(|p| !p.is_empty()) else {
        return (Verdict::Pass, "none beyond the standard library".into());
    };
    let listed: Vec<String> = packages.iter().map(|(name, version)| format!("{name} {version}")).collect();
    let reaching: Vec<String> = packages
        .keys()
        .filter_map(|name| {
            let key = name.to_ascii_lowercase().replace('_', "-");
            REACHING_PACKAGES.iter().find(|(known, _)| *known == key).map(|(_, what)| format!("{name} {what}"))
        })
        .collect();
    let mut detail = format!("{}: {}", listed.len(), listed.join(", "));
    if reaching.is_empty() {
        return (Verdict::Pass, detail);
    }
    detail.push_str(&format!(
        "; {}: in the sandbox there is no network and the code runs as nobody, so those calls fail (is the package \
         needed?)",
        reaching.join(", ")
    ));
    (Verdict::Warn, detail)
}

fn show(value: Option<u64>) -> String {
    value.map_or_else(|| "unreadable".into(), |v| v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setting(check: &str) -> &'static KernelSetting {
        KERNEL_SETTINGS.iter().find(|s| s.check == check).unwrap()
    }

    #[test]
    fn a_weak_host_kernel_setting_warns_saying_what_to_set_and_shows_what_the_sandbox_reads() {
        let kptr = setting("kptr-restrict");
        let (verdict, detail) =
            judge_kernel_setting(kptr, Some(0), &serde_json::json!(0), &serde_json::json!("zeroed"), Runtime::Runc);
        assert_eq!(verdict, Verdict::Warn, "{detail}");
        assert!(detail.starts_with("host kernel.kptr_restrict = 0, the sandbox reads 0"), "{detail}");
        assert!(
            detail.contains("every address zeroed") && detail.contains("sysctl -w kernel.kptr_restrict=1"),
            "{detail}"
        );

        let perf = setting("perf-paranoid");
        let (verdict, detail) = judge_kernel_setting(perf, Some(1), &serde_json::json!(1), &Value::Null, Runtime::Runc);
        assert_eq!(verdict, Verdict::Warn);
        assert!(detail.contains("set it to 2") && !detail.contains("kallsyms"), "{detail}");

        for (check, weak) in [("dmesg-restrict", 0), ("unprivileged-bpf", 0)] {
            let (verdict, detail) =
                judge_kernel_setting(setting(check), Some(weak), &serde_json::json!(weak), &Value::Null, Runtime::Runc);
            assert_eq!(verdict, Verdict::Warn, "{check}: {detail}");
            assert!(detail.contains("set it to 1"), "{detail}");
        }
    }

    #[test]
    fn a_strict_host_setting_passes_and_an_unreadable_one_warns() {
        for (check, strict) in [
            ("kptr-restrict", 1),
            ("kptr-restrict", 2),
            ("perf-paranoid", 3),
            ("dmesg-restrict", 1),
            ("unprivileged-bpf", 2),
        ] {
            let (verdict, detail) = judge_kernel_setting(
                setting(check),
                Some(strict),
                &serde_json::json!(strict),
                &serde_json::json!("zeroed"),
                Runtime::Runc,
            );
            assert_eq!(verdict, Verdict::Pass, "{check}: {detail}");
        }
        let (verdict, detail) =
            judge_kernel_setting(setting("dmesg-restrict"), None, &Value::Null, &Value::Null, Runtime::Runsc);
        assert_eq!(verdict, Verdict::Warn);
        assert!(detail.contains("could not be read") && detail.contains("gVisor's own kernel"), "{detail}");
    }

    #[test]
    fn every_kernel_setting_is_read_from_this_host_and_judged_in_the_report() {
        let host = host_kernel_settings();
        assert_eq!(host.len(), KERNEL_SETTINGS.len());
        assert!(host.iter().all(|(_, v)| v.is_some()), "this Linux host has them all: {host:?}");
        let facts = serde_json::json!({"kernel_settings": {"kptr_restrict": 1, "perf_event_paranoid": 2,
            "dmesg_restrict": 1, "unprivileged_bpf_disabled": 2}, "kallsyms": "zeroed"});
        let observed = Observed { facts, host_kernel: host, ..Observed::default() };
        let mut report = Report { runtime: Runtime::Runc, image: "i".into(), checks: Vec::new() };
        judge(&mut report, &Lockdown::default(), &observed);
        for s in &KERNEL_SETTINGS {
            let check = report.get(s.check).unwrap_or_else(|| panic!("no {} check: {report}", s.check));
            assert_ne!(check.verdict, Verdict::Fail, "a kernel setting only warns: {report}");
            assert!(check.detail.contains(&format!("kernel.{}", s.key)), "{}", check.detail);
        }
    }

    #[test]
    fn runc_older_than_a_fix_warns_naming_the_cve_and_the_fix() {
        let (verdict, detail) = judge_runc("1.0.0-rc6", "");
        assert_eq!(verdict, Verdict::Warn);
        assert_eq!(judge_runc("1.0.0-rc95", "").0, Verdict::Warn, "1.0.0-rc95 predates 1.1.12");
        assert!(!judge_runc("1.0.0-rc95", "").1.contains("CVE-2019-5736"));
        assert!(detail.contains("CVE-2019-5736") && detail.contains("CVE-2024-21626"), "{detail}");
        assert!(detail.contains("upgrade runc"), "{detail}");
        let (verdict, detail) = judge_runc("1.1.11", "v1.1.11-0-g4bccb38");
        assert_eq!(verdict, Verdict::Warn);
        assert!(detail.contains("CVE-2024-21626") && !detail.contains("CVE-2019-5736"), "{detail}");
    }

    #[test]
    fn a_fixed_runc_or_a_known_backport_passes() {
        assert_eq!(judge_runc("1.1.12", "v1.1.12-0-g51d5e94").0, Verdict::Pass);
        assert_eq!(judge_runc("v1.2.0", "").0, Verdict::Pass);
        let (verdict, detail) = judge_runc("1.1.5+ds1", "1.1.5+ds1-1+deb12u1");
        assert_eq!(verdict, Verdict::Pass, "{detail}");
        assert!(detail.contains("carries the fix of CVE-2024-21626"), "{detail}");
        assert_eq!(judge_runc("1.1.5+ds1", "1.1.5+ds1-1").0, Verdict::Warn, "the unpatched Debian build");
        assert_eq!(judge_runc("garbage", "").0, Verdict::Warn);
    }

    #[test]
    fn the_packages_check_lists_each_package_and_warns_for_one_known_to_reach_out() {
        assert_eq!(judge_packages(None), (Verdict::Pass, "none beyond the standard library".into()));
        let mut packages = std::collections::BTreeMap::new();
        packages.insert("numpy".to_string(), "2.2.6".to_string());
        let (verdict, detail) = judge_packages(Some(&packages));
        assert_eq!((verdict, detail.as_str()), (Verdict::Pass, "1: numpy 2.2.6"));
        packages.insert("Requests".to_string(), "2.32.3".to_string());
        let (verdict, detail) = judge_packages(Some(&packages));
        assert_eq!(verdict, Verdict::Warn);
        assert!(detail.starts_with("2: Requests 2.32.3, numpy 2.2.6; Requests opens network connections"), "{detail}");
    }

    #[test]
    fn a_report_fails_when_any_required_check_fails_but_not_on_a_warning() {
        let mut report = Report { runtime: Runtime::Runc, image: "i".into(), checks: Vec::new() };
        report.push("a", Verdict::Pass, "");
        report.push("b", Verdict::Warn, "");
        assert!(report.passed());
        report.pass_if("c", false, "broken");
        assert!(!report.passed());
        let text = report.to_string();
        assert!(text.contains("FAIL c") && text.contains("1 failed, 1 warnings"), "{text}");
    }

    #[test]
    fn a_probe_that_saw_holes_fails_each_of_them() {
        // What runsc without --oci-seccomp and without our mounts showed.
        let facts = serde_json::json!({
            "uid": [65534, 65534], "status": {"CapInh": "0000000000000000", "CapPrm": "0000000000000000",
            "CapEff": "0000000000000000", "CapBnd": "0000000000000000", "Seccomp": "0"},
            "no_new_privs": 1, "seccomp_mode": 0, "root_write": "EROFS", "tmp_exec": "EACCES",
            "tmp_mount": "rw,noexec,size=16m", "dev_shm": "EACCES", "interfaces": ["lo"],
            "processes": {"started": 63, "refused": "EAGAIN"}, "io_uring": "ok", "memfd": 0,
            "unshare_user": "ok", "clone3": "ENOSYS", "mknod_device": "ok",
            "devices": {"/dev/net/tun": "ok", "/dev/fuse": "ok"},
            "image": {"python": "3.11.2", "files_sha256": {"runner.py": "x"}, "opt": [], "mcp": false, "tools": []}
        });
        let lockdown = Lockdown::for_runtime(Runtime::Runsc);
        let observed = Observed {
            facts,
            memory: Some(serde_json::json!({"memory_child": -9})),
            cgroup_pids: Some(crate::container::RUNSC_HOST_PIDS as u64),
            cgroup_memory: Some(lockdown.memory_bytes as u64),
            exit: Some((0, false)),
            host_kernel: vec![],
        };
        let mut report = Report { runtime: Runtime::Runsc, image: "i".into(), checks: Vec::new() };
        judge(&mut report, &lockdown, &observed);
        let failed: Vec<&str> = report.checks.iter().filter(|c| c.verdict == Verdict::Fail).map(|c| c.name).collect();
        assert_eq!(failed, ["seccomp", "io-uring", "memfd", "namespaces", "devices", "image-contents"]);
        for name in
            ["uid", "capabilities", "no-new-privileges", "tmp-noexec", "no-dev-shm", "pids-limit", "memory-limit"]
        {
            assert_eq!(report.get(name).unwrap().verdict, Verdict::Pass, "{name}: {report}");
        }
    }
}
