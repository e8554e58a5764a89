//! Finding the shared libraries amvgpu hands to jobs: the hook (`libamvgpu.so`) and, for
//! the demo, the simulated runtime (`libamdhip64.so`).
//!
//! Search order: an explicit path, then the directory of the amvgpu executable (where cargo
//! puts every artifact of a profile, `target/<profile>/`, and where an install puts them
//! side by side), then `../lib` and `../lib/amvgpu` of that directory (an FHS install).

use std::fmt;
use std::path::{Path, PathBuf};

pub const HOOK_LIB: &str = "libamvgpu.so";
pub const HIP_LIB: &str = "libamdhip64.so";

/// A library that could not be found, with where it was looked for and how to build it.
#[derive(Debug)]
pub struct NotFound {
    pub library: &'static str,
    pub looked_in: Vec<PathBuf>,
    pub build_hint: String,
}

impl fmt::Display for NotFound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cannot find {}; looked in:", self.library)?;
        for dir in &self.looked_in {
            write!(f, "\n  {}", dir.display())?;
        }
        write!(f, "\nbuild it with: {}", self.build_hint)
    }
}

impl std::error::Error for NotFound {}

/// The directory of the running executable.
pub fn exe_dir() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let exe = exe.canonicalize().unwrap_or(exe);
    exe.parent().map(Path::to_path_buf)
}

/// The cargo command that builds every artifact into the directory amvgpu runs from.
pub fn build_command(exe_dir: Option<&Path>) -> String {
    let release = exe_dir
        .and_then(Path::file_name)
        .is_some_and(|name| name == "release");
    if release {
        "cargo build --release --workspace".into()
    } else {
        "cargo build --workspace".into()
    }
}

/// Directories to search for a library, best first.
pub fn search_dirs(exe_dir: Option<&Path>) -> Vec<PathBuf> {
    let Some(dir) = exe_dir else {
        return Vec::new();
    };
    let mut dirs = vec![dir.to_path_buf()];
    // Test harnesses and examples run from target/<profile>/deps or /examples.
    if dir
        .file_name()
        .is_some_and(|n| n == "deps" || n == "examples")
    {
        if let Some(profile_dir) = dir.parent() {
            dirs.push(profile_dir.to_path_buf());
        }
    }
    if let Some(prefix) = dir.parent() {
        dirs.push(prefix.join("lib"));
        dirs.push(prefix.join("lib/amvgpu"));
    }
    dirs
}

/// Finds `library`, returning an absolute path (LD_AUDIT and dlopen must not depend on the
/// job's working directory).
pub fn find(
    library: &'static str,
    explicit: Option<&Path>,
    exe_dir: Option<&Path>,
) -> Result<PathBuf, NotFound> {
    if let Some(path) = explicit {
        return match path.canonicalize() {
            Ok(abs) if abs.is_file() => Ok(abs),
            _ => Err(NotFound {
                library,
                looked_in: vec![path.to_path_buf()],
                build_hint: format!("{} (or pass an existing file)", build_command(exe_dir)),
            }),
        };
    }
    let dirs = search_dirs(exe_dir);
    for dir in &dirs {
        let candidate = dir.join(library);
        if candidate.is_file() {
            return Ok(candidate.canonicalize().unwrap_or(candidate));
        }
    }
    Err(NotFound {
        library,
        looked_in: dirs,
        build_hint: build_command(exe_dir),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_library_next_to_the_binary_first() {
        let dir = tempfile::tempdir().unwrap();
        let bin_dir = dir.path().join("release");
        std::fs::create_dir_all(&bin_dir).unwrap();
        std::fs::write(bin_dir.join(HOOK_LIB), b"").unwrap();
        let found = find(HOOK_LIB, None, Some(&bin_dir)).unwrap();
        assert_eq!(found, bin_dir.join(HOOK_LIB).canonicalize().unwrap());
        assert!(found.is_absolute());
    }

    #[test]
    fn missing_library_says_where_it_looked_and_how_to_build() {
        let dir = tempfile::tempdir().unwrap();
        let bin_dir = dir.path().join("release");
        std::fs::create_dir_all(&bin_dir).unwrap();
        let err = find(HIP_LIB, None, Some(&bin_dir)).unwrap_err().to_string();
        assert!(err.contains("cannot find libamdhip64.so"), "{err}");
        assert!(err.contains(&bin_dir.display().to_string()), "{err}");
        assert!(err.contains("cargo build --release --workspace"), "{err}");
    }

    #[test]
    fn explicit_path_must_exist() {
        let err = find(HOOK_LIB, Some(Path::new("/no/such/libamvgpu.so")), None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("/no/such/libamvgpu.so"), "{err}");
    }
}
