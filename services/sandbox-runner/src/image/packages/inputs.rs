//! Everything that goes into an image with packages, read and checked
//! once, and the image's tag: a hash of all of it, so two package sets
//! never share a tag and the same set built again does nothing.

use std::path::Path;

use sha2::{Digest, Sha256};

use super::requirements::{Requirements, is_debian_name};
use super::{LIST_PACKAGES_PY, PACKAGES_DOCKERFILE, Packages, PackagesError};
use crate::error::StartError;
use crate::image::{IMAGE_REPOSITORY, default_image_tag};

/// Everything that goes into an image with packages, read and checked once.
#[derive(Debug, Clone)]
pub(super) struct Inputs {
    pub(super) requirements: Option<Requirements>,
    pub(super) apt: Vec<String>,
    pub(super) wheels: Vec<(String, Vec<u8>)>,
}

impl Inputs {
    pub(super) fn read(p: &Packages) -> Result<Inputs, PackagesError> {
        let requirements = match &p.requirements {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|e| PackagesError::Unreadable {
                    path: path.display().to_string(),
                    reason: e.to_string(),
                })?;
                Some(Requirements::parse(&path.display().to_string(), &text)?)
            }
            None => None,
        };
        let mut apt = Vec::new();
        for name in &p.apt {
            if !is_debian_name(name) {
                return Err(PackagesError::AptName { name: name.clone() });
            }
            apt.push(name.clone());
        }
        apt.sort();
        apt.dedup();
        let wheels = match &p.wheels {
            Some(dir) if requirements.is_none() => {
                return Err(PackagesError::Wheels {
                    dir: dir.display().to_string(),
                    reason: "give --requirements too: the wheels are what it is installed from".into(),
                });
            }
            Some(dir) => read_wheels(dir)?,
            None => Vec::new(),
        };
        Ok(Inputs { requirements, apt, wheels })
    }

    pub(super) fn requirements_text(&self) -> String {
        self.requirements.as_ref().map(Requirements::normalized).unwrap_or_default()
    }

    /// The tag: a hash of the default image's tag (Dockerfile and runner),
    /// this build's files and every input.
    pub(super) fn tag(&self, wheels_dir: bool) -> String {
        let mut hash = Sha256::new();
        let mut part = |label: &str, bytes: &[u8]| {
            hash.update(label.as_bytes());
            hash.update((bytes.len() as u64).to_le_bytes());
            hash.update(bytes);
        };
        part("image", default_image_tag().as_bytes());
        part("dockerfile", PACKAGES_DOCKERFILE.as_bytes());
        part("lister", LIST_PACKAGES_PY.as_bytes());
        part("requirements", self.requirements_text().as_bytes());
        for name in &self.apt {
            part("apt", name.as_bytes());
        }
        part("wheels-dir", if wheels_dir { b"1" } else { b"0" });
        for (name, bytes) in &self.wheels {
            part("wheel-name", name.as_bytes());
            part("wheel", bytes);
        }
        let hex: String = hash.finalize().iter().take(6).map(|b| format!("{b:02x}")).collect();
        format!("{IMAGE_REPOSITORY}:p-{hex}")
    }

    /// What the image was built from, for its [`INPUTS_LABEL`].
    pub(super) fn summary(&self) -> String {
        let wheels: Vec<serde_json::Value> = self
            .wheels
            .iter()
            .map(|(name, bytes)| {
                let sum: String = Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect();
                serde_json::json!({ "file": name, "sha256": sum })
            })
            .collect();
        serde_json::json!({
            "image": default_image_tag(),
            "requirements": self.requirements_text().lines().collect::<Vec<_>>(),
            "apt": self.apt,
            "wheels": wheels,
        })
        .to_string()
    }
}

/// The wheels and source archives of `dir` (not its subdirectories), by
/// name.
fn read_wheels(dir: &Path) -> Result<Vec<(String, Vec<u8>)>, PackagesError> {
    let shown = dir.display().to_string();
    let unreadable = |e: std::io::Error| PackagesError::Wheels { dir: shown.clone(), reason: e.to_string() };
    let mut wheels = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(unreadable)? {
        let entry = entry.map_err(unreadable)?;
        let Ok(name) = entry.file_name().into_string() else { continue };
        let archive = [".whl", ".tar.gz", ".zip"].iter().any(|s| name.ends_with(s));
        if !archive || !entry.file_type().map_err(unreadable)?.is_file() {
            continue;
        }
        wheels.push((name, std::fs::read(entry.path()).map_err(unreadable)?));
    }
    if wheels.is_empty() {
        return Err(PackagesError::Wheels { dir: shown, reason: "holds no .whl, .tar.gz or .zip file".into() });
    }
    wheels.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(wheels)
}

/// The tag of the image holding `p`: `code-mode-sandbox:p-<12 hex>`, a
/// SHA-256 over the default image's tag, the packages Dockerfile, the
/// normalized requirements, the sorted Debian names and the wheels' names
/// and contents; the default tag for no packages. Reads and checks the
/// files (a bad requirement is the error).
pub fn packages_tag(p: &Packages) -> Result<String, StartError> {
    if p.is_empty() {
        return Ok(default_image_tag());
    }
    Ok(Inputs::read(p)?.tag(p.wheels.is_some()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tag_of(dir: &Path, text: &str, apt: &[&str]) -> String {
        let file = dir.join(format!("r-{}.txt", uuid::Uuid::new_v4().simple()));
        std::fs::write(&file, text).unwrap();
        let p = Packages { requirements: Some(file), apt: apt.iter().map(|s| s.to_string()).collect(), wheels: None };
        packages_tag(&p).unwrap()
    }

    #[test]
    fn different_sets_get_different_tags_and_the_same_set_the_same() {
        let dir = std::env::temp_dir().join(format!("code-mode-tags-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        let a = tag_of(&dir, "tabulate==0.9.0\nnumpy==2.2.6\n", &[]);
        assert!(a.starts_with("code-mode-sandbox:p-") && a.len() == "code-mode-sandbox:p-".len() + 12, "{a}");
        assert_eq!(a, tag_of(&dir, "numpy==2.2.6\n# again\ntabulate == 0.9.0\n", &[]));
        assert_ne!(a, tag_of(&dir, "tabulate==0.9.0\nnumpy==2.2.5\n", &[]));
        assert_ne!(a, tag_of(&dir, "tabulate==0.9.0\nnumpy==2.2.6\n", &["python3-numpy"]));
        let apt = |names: &[&str]| {
            packages_tag(&Packages { apt: names.iter().map(|s| s.to_string()).collect(), ..Default::default() })
                .unwrap()
        };
        assert_eq!(apt(&["b-pkg", "a-pkg"]), apt(&["a-pkg", "b-pkg", "a-pkg"]));
        assert_eq!(packages_tag(&Packages::default()).unwrap(), default_image_tag());
        let err = packages_tag(&Packages { apt: vec!["Bad".into()], ..Default::default() }).unwrap_err();
        assert!(err.to_string().contains("--apt \"Bad\" is not a Debian package name"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn wheel_contents_are_part_of_the_tag() {
        let dir = std::env::temp_dir().join(format!("code-mode-wheels-{}", uuid::Uuid::new_v4().simple()));
        let wheels = dir.join("wheels");
        std::fs::create_dir_all(&wheels).unwrap();
        let file = dir.join("requirements.txt");
        std::fs::write(&file, "x==1.0\n").unwrap();
        let p = Packages { requirements: Some(file.clone()), apt: vec![], wheels: Some(wheels.clone()) };
        assert!(packages_tag(&p).unwrap_err().to_string().contains("holds no .whl"));
        std::fs::write(wheels.join("x-1.0-py3-none-any.whl"), b"one").unwrap();
        let one = packages_tag(&p).unwrap();
        std::fs::write(wheels.join("x-1.0-py3-none-any.whl"), b"two").unwrap();
        assert_ne!(one, packages_tag(&p).unwrap());
        let alone = Packages { requirements: None, ..p };
        assert!(packages_tag(&alone).unwrap_err().to_string().contains("give --requirements too"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
