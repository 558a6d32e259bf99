//! Sandbox images with packages (`--requirements`, `--apt`, `--wheels`),
//! built for real: from PyPI, from the Debian mirror on the offline base,
//! and refused or stopped, naming the package, when a requirement is not
//! pinned, does not exist or does not match its hash. An uncached build
//! takes about half a minute; nextest gives these tests longer.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use code_mode_sandbox_runner::image::{self, Packages};

use crate::support;

/// A requirements file holding `text`, in a fresh directory.
fn requirements(text: &str) -> (code_mode_core::testing::TempDir, PathBuf) {
    let dir = code_mode_core::testing::TempDir::new("requirements");
    let file = dir.0.join("requirements.txt");
    std::fs::write(&file, text).unwrap();
    (dir, file)
}

/// `code-mode build-image ARGS`.
fn build_image(args: &[&str]) -> Output {
    Command::new(support::code_mode()).arg("build-image").args(args).output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The packages the image's label names (as the runner reads them).
fn installed(tag: &str) -> Vec<String> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let docker = code_mode_sandbox_runner::connect_docker().await.unwrap();
        image::installed_packages(&docker, tag).await.unwrap()
    })
}

#[test]
fn a_pure_python_and_a_compiled_package_from_pypi_are_imported_by_a_cell() {
    if !support::sandbox_available() {
        return;
    }
    let (_dir, file) = requirements("tabulate==0.9.0\nnumpy==2.2.6  # a cp311 wheel\n");
    let built = build_image(&["--requirements", path(&file)]);
    assert!(built.status.success(), "{}", text(&built.stderr));
    let tag = text(&built.stdout).trim().to_string();
    assert!(tag.starts_with("code-mode-sandbox:p-"), "{tag}");
    let packages = Packages { requirements: Some(file.clone()), ..Default::default() };
    assert_eq!(image::packages_tag(&packages).unwrap(), tag, "the command and the library agree on the tag");
    assert_eq!(installed(&tag), ["numpy==2.2.6", "tabulate==0.9.0"]);
    holds_only_the_packages(&tag);

    let code = "import numpy, tabulate\n\
                table = tabulate.tabulate([['sum', int(numpy.arange(5).sum())]], tablefmt='plain')\n\
                print(table, sorted(PACKAGES.items()))";
    let ran = support::run(&["--requirements", path(&file)], code, &[]);
    assert_eq!(ran.ok(), "sum  10 [('numpy', '2.2.6'), ('tabulate', '0.9.0')]\n");
}

/// The image with packages has none of the builder's tools and the
/// default image's user, working directory and entrypoint.
fn holds_only_the_packages(tag: &str) {
    let probe = "import importlib.util, os, shutil\n\
                 found = [p for p in ('/build', '/wheels', '/etc/ssl/certs/ca-certificates.crt') if os.path.exists(p)]\n\
                 found += [t for t in ('gcc', 'cc', 'pip', 'pip3') if shutil.which(t)]\n\
                 found += ['pip module'] if importlib.util.find_spec('pip') else []\n\
                 print(os.getuid(), os.getcwd(), found)";
    let out = Command::new("docker")
        .args(["run", "--rm", "--network", "none", "--entrypoint", "python3", tag, "-c", probe])
        .output()
        .expect("docker runs");
    assert_eq!(text(&out.stdout), "65534 /tmp []\n", "{}", text(&out.stderr));
    let format = "{{json .Config.Entrypoint}} {{.Config.User}}";
    let config = |image: &str| {
        text(&Command::new("docker").args(["inspect", "-f", format, image]).output().expect("docker runs").stdout)
    };
    assert_eq!(config(tag), config(&image::default_image_tag()));
}

#[test]
fn a_debian_package_on_the_offline_base_is_imported_by_a_cell() {
    if !support::sandbox_available() {
        return;
    }
    let code = "import numpy\nprint(numpy.linalg.det(numpy.eye(3)), dict(PACKAGES))";
    let ran = support::run(&["--apt", "python3-numpy"], code, &[]);
    let out = ran.ok();
    assert!(out.starts_with("1.0 {'numpy': '1."), "bookworm's numpy 1.24: {out}");
    let tag = image::packages_tag(&Packages { apt: vec!["python3-numpy".into()], ..Default::default() }).unwrap();
    assert!(installed(&tag).iter().any(|p| p.starts_with("numpy==1.")), "{:?}", installed(&tag));
    holds_only_the_packages(&tag);
}

#[test]
fn an_unpinned_requirement_stops_the_build_naming_the_file_line_and_package() {
    // Checked before Docker is asked anything: no engine needed.
    let (_dir, file) = requirements("numpy==2.2.6\n\npandas>=2\n");
    let out = build_image(&["--requirements", path(&file)]);
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    let expected = format!("{}:3: \"pandas>=2\" is not pinned: write pandas==VERSION", file.display());
    assert!(stderr.contains(&expected), "{stderr}");
    assert!(out.stdout.is_empty());
}

#[test]
fn a_missing_package_stops_the_runner_at_startup_naming_the_package_and_the_tag() {
    if !support::sandbox_available() {
        return;
    }
    let (_dir, file) = requirements("no-such-package-xyz==1.0\n");
    let tag = image::packages_tag(&Packages { requirements: Some(file.clone()), ..Default::default() }).unwrap();
    let out = support::command(&["--requirements", path(&file)], "print(1)", &[]).output().unwrap();
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!("the sandbox image {tag} of these packages is missing and could not be built"))
            && stderr.contains("pip could not install no-such-package-xyz==1.0: No matching distribution found"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty(), "no report when the runner could not start");
}

#[test]
fn a_hash_mismatch_stops_the_build_naming_the_package() {
    if !support::sandbox_available() {
        return;
    }
    let zeros = "0".repeat(64);
    let (_dir, file) = requirements(&format!("tabulate==0.9.0 \\\n    --hash=sha256:{zeros}\n"));
    let out = build_image(&["--requirements", path(&file)]);
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("pip could not install tabulate==0.9.0: THESE PACKAGES DO NOT MATCH THE HASHES")
            && stderr.contains(&format!("Expected sha256 {zeros}")),
        "{stderr}"
    );
}

#[test]
fn building_the_same_set_twice_does_nothing_the_second_time() {
    if !support::sandbox_available() {
        return;
    }
    let (_dir, file) = requirements("tabulate==0.9.0\n");
    let first = build_image(&["--requirements", path(&file)]);
    assert!(first.status.success(), "{}", text(&first.stderr));
    // The same set written differently is the same set.
    let (_dir2, again) = requirements("# the table printer\nTabulate == 0.9.0\n");
    let started = Instant::now();
    let second = build_image(&["--requirements", path(&again)]);
    let took = started.elapsed();
    assert!(second.status.success(), "{}", text(&second.stderr));
    assert_eq!(text(&first.stdout), text(&second.stdout));
    assert!(text(&second.stderr).contains("already exists"), "{}", text(&second.stderr));
    assert!(took < Duration::from_secs(3), "a no-op took {took:?}");
    let (_dir3, other) = requirements("tabulate==0.8.10\n");
    let packages = Packages { requirements: Some(other), ..Default::default() };
    assert_ne!(image::packages_tag(&packages).unwrap(), text(&first.stdout).trim(), "another set, another tag");
}

#[test]
fn no_packages_give_the_default_image_and_its_tag() {
    if !support::sandbox_available() {
        return;
    }
    let out = build_image(&["--if-missing"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), image::default_image_tag());
    assert_eq!(image::packages_tag(&Packages::default()).unwrap(), image::default_image_tag());
    assert!(installed(&image::default_image_tag()).is_empty());
}

#[test]
fn an_image_and_packages_together_are_refused_and_apt_needs_the_offline_base() {
    let out = support::command(&["--image", "some:image", "--apt", "python3-numpy"], "print(1)", &[]).output().unwrap();
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("give one or the other"), "{}", text(&out.stderr));
    if !support::sandbox_available() {
        return;
    }
    let out = build_image(&["--base", "registry", "--apt", "python3-numpy"]);
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(stderr.contains("--apt needs the offline debootstrap base") && stderr.contains("python3.11"), "{stderr}");
}

/// A pure-Python wheel made by hand (a zip with the package, METADATA,
/// WHEEL and RECORD), written by the host's python3 into `dir`; the same
/// bytes every time (its contents are part of the image's tag).
fn make_wheel(dir: &Path, version: &str) {
    let script = r#"
import base64, hashlib, sys, zipfile
out, version = sys.argv[1], sys.argv[2]
info = f"codemode_hello-{version}.dist-info"
files = {
    "codemode_hello/__init__.py": "def hello():\n    return 'hello from a local wheel'\n",
    f"{info}/METADATA": f"Metadata-Version: 2.1\nName: codemode-hello\nVersion: {version}\n",
    f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
record = []
for name, text in files.items():
    digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
    record.append(f"{name},sha256={digest},{len(text.encode())}")
files[f"{info}/RECORD"] = "\n".join(record + [f"{info}/RECORD,,"]) + "\n"
with zipfile.ZipFile(f"{out}/codemode_hello-{version}-py3-none-any.whl", "w") as z:
    for name, text in files.items():
        # A fixed time: the same wheel byte for byte, so the same tag.
        z.writestr(zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0)), text)
"#;
    let status = Command::new("python3").arg("-c").arg(script).arg(dir).arg(version).status().unwrap();
    assert!(status.success());
}

#[test]
fn a_wheel_from_a_local_directory_is_installed_without_a_package_index() {
    if !support::sandbox_available() {
        return;
    }
    let wheels = code_mode_core::testing::TempDir::new("wheels");
    make_wheel(&wheels.0, "1.0");
    let (_dir, file) = requirements("codemode-hello==1.0\n");
    let args = ["--requirements", path(&file), "--wheels", path(&wheels.0)];
    let ran = support::run(&args, "import codemode_hello\nprint(codemode_hello.hello(), dict(PACKAGES))", &[]);
    assert_eq!(ran.ok(), "hello from a local wheel {'codemode-hello': '1.0'}\n");
    // A version the directory lacks is not looked for anywhere else.
    let (_dir2, other) = requirements("codemode-hello==2.0\n");
    let out = build_image(&["--requirements", path(&other), "--wheels", path(&wheels.0)]);
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(stderr.contains("pip could not install codemode-hello==2.0: No matching distribution found"), "{stderr}");
}

/// The untagged (`<none>`) images of the engine, by full id.
fn dangling_images() -> std::collections::BTreeSet<String> {
    let out = Command::new("docker").args(["images", "-q", "--no-trunc", "-f", "dangling=true"]).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout).lines().map(str::to_string).collect()
}

/// The requirements file a build stage copied in, read from `image` (a
/// container created from it and never started, then removed); `None`
/// when it has none.
fn requirements_in(image: &str) -> Option<String> {
    let created = Command::new("docker").args(["create", image, "true"]).output().unwrap();
    if !created.status.success() {
        return None;
    }
    let container = text(&created.stdout).trim().to_string();
    let copied = Command::new("docker").args(["cp", &format!("{container}:/build/requirements.txt"), "-"]).output();
    let _ = Command::new("docker").args(["rm", "-f", &container]).output();
    let copied = copied.ok().filter(|o| o.status.success())?;
    // `docker cp ... -` writes a tar archive: the file's text is in it.
    Some(String::from_utf8_lossy(&copied.stdout).into_owned())
}

#[test]
fn a_package_image_build_leaves_no_untagged_builder_image_behind() {
    if !support::sandbox_available() {
        return;
    }
    // A set no build has made yet (a version of its own), from a local
    // wheel: the build runs every step of both stages.
    let version =
        format!("1.{}", std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos());
    let wheels = code_mode_core::testing::TempDir::new("wheels-dangling");
    make_wheel(&wheels.0, &version);
    let pinned = format!("codemode-hello=={version}");
    let (_dir, file) = requirements(&format!("{pinned}\n"));
    let before = dangling_images();
    let built = build_image(&["--requirements", path(&file), "--wheels", path(&wheels.0)]);
    assert!(built.status.success(), "{}", text(&built.stderr));
    let tag = text(&built.stdout).trim().to_string();
    // Only the untagged images this build made are looked at (other
    // builds share the engine): those holding its requirements file.
    let ours: Vec<String> = dangling_images()
        .difference(&before)
        .filter(|id| requirements_in(id).is_some_and(|r| r.contains(&pinned)))
        .cloned()
        .collect();
    let _ = Command::new("docker").args(["rmi", &tag]).output();
    assert!(ours.is_empty(), "the build left its builder stage's image behind, untagged: {ours:?}");
}
