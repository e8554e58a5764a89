//! Compiles `tests/c/two_slices.c` against `include/cumask.h` and the static library,
//! runs it, and checks what a C (or cgo) caller gets: two disjoint, balanced 25 % slices
//! of a 304-CU gfx942.
//!
//! The static library is built by a nested `cargo build -p cumask-ffi` into this test's
//! own target directory and profile (found from `current_exe()`: `target/<profile>/deps`):
//! the crate has no `rlib` output (it would collide with the `cumask` crate's), so cargo
//! does not build `libcumask.a` for integration tests by itself. Linking statically means
//! the program needs no library path at run time.

use std::path::{Path, PathBuf};
use std::process::Command;

use cumask_core::{parse_cu_list, Topology};

/// `target/<profile>` of this test binary.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    exe.parent()
        .and_then(Path::parent)
        .expect("test binary lives in target/<profile>/deps")
        .to_path_buf()
}

fn build_static_lib(profile_dir: &Path) -> PathBuf {
    let target_dir = profile_dir.parent().expect("target dir");
    let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") => "dev".to_string(),
        Some(other) => other.to_string(),
        None => panic!("no profile directory name in {}", profile_dir.display()),
    };
    let status = Command::new(env!("CARGO"))
        .args([
            "build",
            "--lib",
            "-p",
            "cumask-ffi",
            "--profile",
            &profile,
            "--manifest-path",
        ])
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"))
        .arg("--target-dir")
        .arg(target_dir)
        .status()
        .expect("run cargo");
    assert!(status.success(), "cargo build -p cumask-ffi failed");
    let lib = profile_dir.join("libcumask.a");
    assert!(lib.exists(), "{} missing after build", lib.display());
    lib
}

fn field<'a>(output: &'a str, key: &str) -> &'a str {
    let prefix = format!("{key}=");
    output
        .lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .unwrap_or_else(|| panic!("no {key}= line in:\n{output}"))
}

#[test]
fn c_program_allocates_two_disjoint_quarter_slices_of_mi300x() {
    let profile_dir = profile_dir();
    let lib = build_static_lib(&profile_dir);
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let exe = profile_dir.join("cumask-ffi-two-slices");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let status = Command::new(&cc)
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic", "-I"])
        .arg(manifest.join("include"))
        .arg(manifest.join("tests/c/two_slices.c"))
        .arg(&lib)
        .args([
            "-lgcc_s",
            "-lutil",
            "-lrt",
            "-lpthread",
            "-lm",
            "-ldl",
            "-lc",
            "-o",
        ])
        .arg(&exe)
        .status()
        .expect("run the C compiler");
    assert!(status.success(), "{cc} failed to build the C test program");

    let run = Command::new(&exe).output().expect("run the C program");
    let stdout = String::from_utf8(run.stdout).expect("utf8");
    assert!(
        run.status.success(),
        "C program failed: {}\n{stdout}",
        String::from_utf8_lossy(&run.stderr)
    );

    let topo = Topology::from_target("gfx942", 304).unwrap();
    assert_eq!(field(&stdout, "booked"), "76");
    assert_eq!(field(&stdout, "rounded"), "72");
    let first = parse_cu_list(field(&stdout, "first"), 304).unwrap();
    let second = parse_cu_list(field(&stdout, "second"), 304).unwrap();
    assert!(first.is_disjoint(&second), "{first} overlaps {second}");
    for slice in [first, second] {
        assert_eq!(slice.len(), 72, "{slice}");
        // Every XCD gets exactly 9 CUs: none runs unmasked, none is starved.
        for xcd in 0..8 {
            assert_eq!(
                slice.iter().filter(|&cu| topo.xcd_of(cu) == xcd).count(),
                9,
                "{slice}"
            );
        }
    }
    assert_eq!(
        field(&stdout, "needed"),
        (first.to_string().len() + 1).to_string()
    );
    assert_eq!(field(&stdout, "HSA_CU_MASK"), format!("0:{second}"));
    assert_eq!(field(&stdout, "validate_first"), "0");
    assert_eq!(
        field(&stdout, "validate_0_3"),
        "4 CU list \"0-3\": XCD 4 of 8 gets no CU from the mask and would run unmasked"
    );
    assert_eq!(field(&stdout, "null_target"), "1");
    assert_eq!(field(&stdout, "null_count"), "1");
}
