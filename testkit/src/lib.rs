//! Test harness: compile small C programs against the simulated `libamdhip64.so` and run them
//! under the real dynamic loader (optionally with `LD_AUDIT`), the way a workload meets the hook.
//!
//! ```no_run
//! let fixture = testkit::Fixture::from_source(
//!     "malloc_once",
//!     r#"#include "fixture.h"
//!        int main(void) { void *p; CHECK_HIP(hipMalloc(&p, 1 << 20)); return 0; }"#,
//! )
//! .compile()
//! .unwrap();
//! let out = fixture.run().env("HIPSIM_VRAM", "1g").output();
//! out.assert_success();
//! ```
//!
//! # Libraries
//! [`libs()`] locates `target/<profile>` from `std::env::current_exe()` (a test binary lives in
//! `target/<profile>/deps/`) and, once per test process, runs `cargo build -p hipsim` with the
//! same profile and `CARGO_TARGET_DIR`, so `libamdhip64.so` is fresh; [`amvgpu()`] (used by
//! [`Run::audit`]) does the same for `cargo build -p libamvgpu` on first use. This works from inside `cargo test`: cargo releases the build-directory
//! lock before it runs test binaries (checked by `tests/nested_build.rs`). Set
//! `TESTKIT_NO_BUILD=1` to skip the build (for example when the tree is read-only); a missing
//! library then fails with the instruction to run `cargo build --workspace` first.
//!
//! # Headers
//! Fixtures include `fixture.h` (CHECK macros that print the failing expression and exit 1) which
//! includes `hip_sim_api.h`, a small hand-written declaration of the HIP API in the **ROCm 6 ABI**
//! that hipsim implements by default. Debian's `/usr/include/hip` headers compile with plain
//! `cc -D__HIP_PLATFORM_AMD__`, but they are ROCm 5.2 (no R0600 properties, no
//! hipGetProcAddress, another hipMemAllocationProp layout), so fixtures do not use them.
//!
//! # Several processes
//! [`Run::spawn`] starts a fixture and returns at once with line-based pipes
//! ([`Running::read_line`], [`Running::write_line`], [`Running::finish`]), so a test can drive
//! processes in lock-step (no sleeps); [`SharedState`] gives them one `HIPSIM_STATE` file.
//! [`hipsim_for_abi`] builds the simulator with ROCm 5 or 7 symbol versions for
//! [`Fixture::hip_dir`].
//!
//! # Environment of a run
//! A run starts from the test's environment minus every `HIPSIM_*`, `HIP_*`, `HSA_*`,
//! `ROCR_*`, `LD_AUDIT`, `LD_PRELOAD`, `LD_BIND_NOW` and `AMD_*` variable, then gets
//! `LD_LIBRARY_PATH=<target/profile>`, `HIPSIM_STATE=<fresh temp dir>/state` (unless a
//! [`SharedState`] or [`Run::no_state`] says otherwise), and whatever [`Run::env`] adds.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub use hip_sys::RocmAbi;
pub use tempfile::TempDir;

/// Where the test binary's cargo output lives.
#[derive(Debug, Clone)]
pub struct TargetLayout {
    /// `CARGO_TARGET_DIR` (the directory holding `CACHEDIR.TAG`).
    pub root: PathBuf,
    /// `root/<profile>` or `root/<triple>/<profile>`.
    pub profile_dir: PathBuf,
    /// The profile's directory name (`debug`, `release`, or a custom profile).
    pub profile: String,
    /// `--target` triple if the build was cross-targeted.
    pub triple: Option<String>,
}

/// Finds `target/<profile>` from the running test executable.
pub fn target_layout() -> Result<TargetLayout, String> {
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let mut dir = exe
        .parent()
        .ok_or("test executable has no parent directory")?
        .to_path_buf();
    if matches!(
        dir.file_name().and_then(OsStr::to_str),
        Some("deps" | "examples")
    ) {
        dir.pop();
    }
    let profile = dir
        .file_name()
        .and_then(OsStr::to_str)
        .ok_or_else(|| format!("{}: no profile directory name", dir.display()))?
        .to_string();
    let parent = dir.parent().ok_or("profile directory has no parent")?;
    if is_target_root(parent) {
        return Ok(TargetLayout {
            root: parent.to_path_buf(),
            profile_dir: dir,
            profile,
            triple: None,
        });
    }
    let grand = parent
        .parent()
        .ok_or("no target root above the profile directory")?;
    if is_target_root(grand) {
        let triple = parent
            .file_name()
            .and_then(OsStr::to_str)
            .map(str::to_string);
        return Ok(TargetLayout {
            root: grand.to_path_buf(),
            profile_dir: dir,
            profile,
            triple,
        });
    }
    Err(format!(
        "{}: not inside a cargo target directory (no CACHEDIR.TAG or .rustc_info.json above it)",
        exe.display()
    ))
}

/// Cargo marks a target directory with `CACHEDIR.TAG`, but only when it creates the directory
/// itself; `.rustc_info.json` is written on every build, so either one identifies it.
fn is_target_root(dir: &Path) -> bool {
    dir.join("CACHEDIR.TAG").exists() || dir.join(".rustc_info.json").exists()
}

/// The workspace root (where `Cargo.toml` lists hipsim and libamvgpu).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("testkit lives in the workspace")
        .to_path_buf()
}

/// The freshly built simulator.
#[derive(Debug, Clone)]
pub struct Libs {
    pub layout: TargetLayout,
    /// Directory holding `libamdhip64.so` (the profile directory).
    pub dir: PathBuf,
    pub hipsim: PathBuf,
}

impl Libs {
    /// `libamvgpu.so`, built (once per test process) on first use.
    pub fn amvgpu(&self) -> &'static Path {
        amvgpu()
    }
}

fn cargo_command(layout: &TargetLayout) -> Command {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.arg("build")
        .arg("--quiet")
        .arg("--manifest-path")
        .arg(workspace_root().join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", &layout.root);
    match layout.profile.as_str() {
        "debug" => {}
        "release" => {
            cmd.arg("--release");
        }
        other => {
            cmd.args(["--profile", other]);
        }
    }
    if let Some(triple) = &layout.triple {
        cmd.args(["--target", triple]);
    }
    cmd
}

/// Runs a cargo build with a deadline; cargo blocked on a lock is reported, not waited on forever.
fn run_cargo(mut cmd: Command, what: &str) -> Result<(), String> {
    let out = run_with_timeout(&mut cmd, Duration::from_secs(900))
        .map_err(|e| format!("{what}: cannot run cargo: {e}"))?;
    if out.timed_out {
        return Err(format!(
            "{what}: cargo did not finish within 900 s (stderr: {}); if it waits for a lock, run \
             `cargo build --workspace` first and set TESTKIT_NO_BUILD=1",
            out.stderr.trim()
        ));
    }
    if !out.status.success() {
        return Err(format!("{what} failed:\n{}", out.stderr));
    }
    Ok(())
}

fn build_package(package: &str, file: &str) -> Result<(TargetLayout, PathBuf), String> {
    let layout = target_layout()?;
    if std::env::var_os("TESTKIT_NO_BUILD").is_none() {
        let mut cmd = cargo_command(&layout);
        cmd.args(["-p", package]);
        run_cargo(cmd, &format!("cargo build -p {package}"))?;
    }
    let path = layout.profile_dir.join(file);
    if !path.exists() {
        return Err(format!(
            "{} is missing: run `cargo build --workspace` (same profile) first",
            path.display()
        ));
    }
    Ok((layout, path))
}

/// The simulator, built once per test process (see the crate docs).
pub fn libs() -> &'static Libs {
    static LIBS: OnceLock<Result<Libs, String>> = OnceLock::new();
    let result = LIBS.get_or_init(|| {
        let (layout, hipsim) = build_package("hipsim", "libamdhip64.so")?;
        Ok(Libs {
            dir: layout.profile_dir.clone(),
            layout,
            hipsim,
        })
    });
    match result {
        Ok(libs) => libs,
        Err(why) => panic!("testkit: {why}"),
    }
}

/// `libamvgpu.so`, built once per test process. Separate from [`libs()`] so that the
/// simulator's own tests do not depend on the hook compiling.
pub fn amvgpu() -> &'static Path {
    static AMVGPU: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match AMVGPU.get_or_init(|| build_package("libamvgpu", "libamvgpu.so").map(|(_, p)| p)) {
        Ok(path) => path,
        Err(why) => panic!("testkit: {why}"),
    }
}

/// A directory holding `libamdhip64.so` built for `abi` (ROCm 5, 6 or 7 symbol versions).
///
/// The default build is ROCm 6; the others are built with `HIPSIM_ABI=<n>` into their own
/// target directory (`<target root>/hipsim-abi<n>`), so they never disturb the main build.
pub fn hipsim_for_abi(abi: RocmAbi) -> PathBuf {
    static DIRS: OnceLock<std::sync::Mutex<BTreeMap<u32, Result<PathBuf, String>>>> =
        OnceLock::new();
    let libs = libs();
    let mut dirs = DIRS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let result = dirs.entry(abi.major()).or_insert_with(|| {
        let mut layout = libs.layout.clone();
        layout.root = libs.layout.root.join(format!("hipsim-abi{}", abi.major()));
        let mut cmd = cargo_command(&layout);
        cmd.args(["-p", "hipsim"])
            .env("HIPSIM_ABI", abi.major().to_string());
        run_cargo(
            cmd,
            &format!("HIPSIM_ABI={} cargo build -p hipsim", abi.major()),
        )?;
        let mut dir = layout.root.clone();
        if let Some(t) = &layout.triple {
            dir.push(t);
        }
        dir.push(&layout.profile);
        Ok(dir)
    });
    match result {
        Ok(dir) => dir.clone(),
        Err(why) => panic!("testkit: {why}"),
    }
}

/// A fresh temporary directory (removed when dropped).
pub fn temp_dir() -> TempDir {
    tempfile::Builder::new()
        .prefix("testkit-")
        .tempdir()
        .expect("create a temporary directory")
}

/// One `HIPSIM_STATE` file for several (possibly concurrent) runs: they share device usage.
#[derive(Debug)]
pub struct SharedState {
    dir: TempDir,
}

impl SharedState {
    pub fn new() -> SharedState {
        SharedState { dir: temp_dir() }
    }

    /// The state file path (created by the first process that uses it).
    pub fn path(&self) -> PathBuf {
        self.dir.path().join("hipsim-state")
    }

    /// The directory, for other per-test files.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Default for SharedState {
    fn default() -> Self {
        SharedState::new()
    }
}

/// 64-bit FNV-1a: a stable content hash for the fixture cache.
fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for &b in part.iter().chain(&[0xff]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// A C program to compile.
#[derive(Debug, Clone)]
pub struct Fixture {
    name: String,
    source: String,
    cflags: Vec<String>,
    libs: Vec<String>,
    link_hip: bool,
    hip_dir: Option<PathBuf>,
}

impl Fixture {
    /// A fixture from C source text; `name` names the binary (letters, digits, `_`, `-`).
    pub fn from_source(name: &str, source: &str) -> Fixture {
        Fixture {
            name: name.to_string(),
            source: source.to_string(),
            cflags: Vec::new(),
            libs: Vec::new(),
            link_hip: true,
            hip_dir: None,
        }
    }

    /// A fixture from a C file.
    pub fn from_path(path: impl AsRef<Path>) -> Fixture {
        let path = path.as_ref();
        let source = std::fs::read_to_string(path)
            .unwrap_or_else(|e| panic!("testkit: cannot read fixture {}: {e}", path.display()));
        let name = path
            .file_stem()
            .and_then(OsStr::to_str)
            .unwrap_or("fixture")
            .to_string();
        Fixture::from_source(&name, &source)
    }

    /// An extra compiler flag placed before the source (e.g. `-fno-plt`, `-DFOO=1`, `-O0`).
    pub fn cflag(mut self, flag: &str) -> Fixture {
        self.cflags.push(flag.to_string());
        self
    }

    /// An extra flag placed after the source and HIP library (e.g. `-ldl`, `-pthread`,
    /// `-Wl,-z,now`).
    pub fn link_flag(mut self, flag: &str) -> Fixture {
        self.libs.push(flag.to_string());
        self
    }

    /// Do not link `libamdhip64` (the fixture must define `FIXTURE_NO_HIP` or not use HIP).
    pub fn without_hip(mut self) -> Fixture {
        self.link_hip = false;
        self
    }

    /// Link against the `libamdhip64.so` in `dir` (see [`hipsim_for_abi`]) instead of the
    /// default build.
    pub fn hip_dir(mut self, dir: impl Into<PathBuf>) -> Fixture {
        self.hip_dir = Some(dir.into());
        self
    }

    /// Compiles (or reuses a cached binary with the same inputs) into
    /// `target/<profile>/fixtures/`.
    pub fn compile(&self) -> Result<Compiled, String> {
        let libs = libs();
        let hip_dir = self.hip_dir.clone().unwrap_or_else(|| libs.dir.clone());
        let include = Path::new(env!("CARGO_MANIFEST_DIR")).join("c");
        let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
        let mut args: Vec<String> = vec![
            "-std=gnu11".into(),
            "-g".into(),
            "-O1".into(),
            "-Wall".into(),
            "-Wextra".into(),
            "-Werror".into(),
            "-Wno-unused-parameter".into(),
            format!("-I{}", include.display()),
        ];
        args.extend(self.cflags.iter().cloned());
        let mut after: Vec<String> = Vec::new();
        let mut hip_stamp = Vec::new();
        if self.link_hip {
            after.push(format!("-L{}", hip_dir.display()));
            after.push(format!("-Wl,-rpath,{}", hip_dir.display()));
            after.push("-lamdhip64".into());
            // Relink when the library changes (its exported versions may differ per ABI).
            let meta = std::fs::metadata(hip_dir.join("libamdhip64.so"))
                .map_err(|e| format!("{}/libamdhip64.so: {e}", hip_dir.display()))?;
            hip_stamp = format!("{:?}{}", meta.modified().ok(), meta.len()).into_bytes();
        }
        after.extend(self.libs.iter().cloned());
        let headers: Vec<Vec<u8>> = ["fixture.h", "hip_sim_api.h"]
            .iter()
            .map(|h| std::fs::read(include.join(h)).unwrap_or_default())
            .collect();
        let all_args = [args.join("\0"), after.join("\0")].join("\n");
        let hash = fnv1a(&[
            self.source.as_bytes(),
            all_args.as_bytes(),
            cc.as_bytes(),
            &headers[0],
            &headers[1],
            &hip_stamp,
        ]);
        let dir = libs.dir.join("fixtures");
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let exe = dir.join(format!("{}-{hash:016x}", self.name));
        if !exe.exists() {
            // Concurrent tests (threads and processes) may compile the same fixture: each
            // writes and builds under a unique private name, then renames atomically.
            static BUILDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            let unique = format!(
                "{}.{}",
                std::process::id(),
                BUILDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            );
            let src = dir.join(format!(".{}-{hash:016x}.{unique}.c", self.name));
            std::fs::write(&src, &self.source).map_err(|e| format!("{}: {e}", src.display()))?;
            let tmp = dir.join(format!(".{}-{hash:016x}.{unique}", self.name));
            let final_src = dir.join(format!("{}-{hash:016x}.c", self.name));
            // CHECK messages print __FILE__: make it the name the source keeps.
            let file_map = format!(
                "-fmacro-prefix-map={}={}",
                src.display(),
                final_src.display()
            );
            let out = Command::new(&cc)
                .args(&args)
                .arg(&file_map)
                .arg("-o")
                .arg(&tmp)
                .arg(&src)
                .args(&after)
                .output()
                .map_err(|e| format!("cannot run {cc}: {e}"))?;
            if !out.status.success() {
                return Err(format!(
                    "compiling fixture {} failed ({cc} {} -o {} {} {}):\n{}",
                    self.name,
                    args.join(" "),
                    tmp.display(),
                    src.display(),
                    after.join(" "),
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
            std::fs::rename(&tmp, &exe).map_err(|e| format!("{}: {e}", exe.display()))?;
            // Keep the source beside the binary, for reading a failing fixture.
            let _ = std::fs::rename(&src, &final_src);
        }
        Ok(Compiled { exe, hip_dir })
    }
}

/// A compiled fixture.
#[derive(Debug, Clone)]
pub struct Compiled {
    pub exe: PathBuf,
    hip_dir: PathBuf,
}

impl Compiled {
    /// A run of this fixture (configure, then call [`Run::output`]).
    pub fn run(&self) -> Run {
        Run {
            exe: self.exe.clone(),
            lib_dir: self.hip_dir.clone(),
            env: Vec::new(),
            args: Vec::new(),
            timeout: Duration::from_secs(60),
            state: StateChoice::Fresh,
            stdin: None,
        }
    }
}

#[derive(Debug)]
enum StateChoice {
    Fresh,
    Path(PathBuf),
    None,
}

const SCRUBBED_PREFIXES: &[&str] = &["HIPSIM_", "HIP_", "HSA_", "ROCR_", "AMD_"];
const SCRUBBED_NAMES: &[&str] = &["LD_AUDIT", "LD_PRELOAD", "LD_BIND_NOW", "LD_LIBRARY_PATH"];

/// One execution of a fixture.
#[derive(Debug)]
pub struct Run {
    exe: PathBuf,
    lib_dir: PathBuf,
    env: Vec<(OsString, OsString)>,
    args: Vec<OsString>,
    timeout: Duration,
    state: StateChoice,
    stdin: Option<Vec<u8>>,
}

impl Run {
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Run {
        self.env
            .push((key.as_ref().to_owned(), value.as_ref().to_owned()));
        self
    }

    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Run {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    pub fn args<I, S>(mut self, args: I) -> Run
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// Kill the process (group) and report a timeout after `timeout` (default 60 s).
    pub fn timeout(mut self, timeout: Duration) -> Run {
        self.timeout = timeout;
        self
    }

    /// Load the audit hook: `LD_AUDIT=<target/profile>/libamvgpu.so`.
    pub fn audit(self) -> Run {
        self.env("LD_AUDIT", amvgpu())
    }

    /// Share device usage with other runs through `state`.
    pub fn state(mut self, state: &SharedState) -> Run {
        self.state = StateChoice::Path(state.path());
        self
    }

    /// No `HIPSIM_STATE`: the simulator keeps usage process-local.
    pub fn no_state(mut self) -> Run {
        self.state = StateChoice::None;
        self
    }

    pub fn stdin(mut self, bytes: impl Into<Vec<u8>>) -> Run {
        self.stdin = Some(bytes.into());
        self
    }

    /// The command this run would execute (environment already applied).
    fn command(&self, fresh_state: Option<&Path>) -> Command {
        let mut cmd = Command::new(&self.exe);
        for (key, _) in std::env::vars_os() {
            let k = key.to_string_lossy();
            if SCRUBBED_PREFIXES.iter().any(|p| k.starts_with(p))
                || SCRUBBED_NAMES.contains(&k.as_ref())
            {
                cmd.env_remove(&key);
            }
        }
        cmd.env("LD_LIBRARY_PATH", &self.lib_dir);
        match (&self.state, fresh_state) {
            (StateChoice::Path(p), _) => {
                cmd.env("HIPSIM_STATE", p);
            }
            (StateChoice::Fresh, Some(p)) => {
                cmd.env("HIPSIM_STATE", p);
            }
            _ => {}
        }
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd.args(&self.args);
        cmd
    }

    /// Starts the program and returns at once, with pipes to its stdin and stdout, so a test can
    /// drive several processes in lock-step (the program prints a line, the test answers on its
    /// stdin). Stderr is collected for [`Running::finish`].
    pub fn spawn(self) -> Running {
        let fresh = matches!(self.state, StateChoice::Fresh).then(temp_dir);
        let fresh_path = fresh.as_ref().map(|d| d.path().join("hipsim-state"));
        let mut cmd = self.command(fresh_path.as_deref());
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("testkit: cannot run {}: {e}", self.exe.display()));
        let stdout = std::io::BufReader::new(child.stdout.take().expect("piped"));
        let mut err_pipe = child.stderr.take().expect("piped");
        let stderr = std::thread::spawn(move || {
            let mut text = Vec::new();
            let _ = err_pipe.read_to_end(&mut text);
            String::from_utf8_lossy(&text).into_owned()
        });
        // Watchdog: a child that never prints would block read_line forever; kill its group at
        // the deadline unless the test has already collected it.
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let deadline = Instant::now() + self.timeout;
        {
            let done = done.clone();
            let pgid = child.id() as libc::pid_t;
            std::thread::spawn(move || {
                while Instant::now() < deadline {
                    if done.load(std::sync::atomic::Ordering::Acquire) {
                        return;
                    }
                    // Deadline polling, not synchronisation.
                    std::thread::sleep(Duration::from_millis(20));
                }
                if !done.load(std::sync::atomic::Ordering::Acquire) {
                    // SAFETY: kill(2) on the process group created for this child.
                    unsafe { libc::kill(-pgid, libc::SIGKILL) };
                }
            });
        }
        Running {
            exe: self.exe,
            deadline,
            done,
            stdin: child.stdin.take(),
            child,
            stdout,
            seen: String::new(),
            stderr: Some(stderr),
            _fresh: fresh,
        }
    }

    /// Runs to completion (or timeout) and collects the result.
    pub fn output(self) -> Output {
        let fresh = matches!(self.state, StateChoice::Fresh).then(temp_dir);
        let fresh_path = fresh.as_ref().map(|d| d.path().join("hipsim-state"));
        let mut cmd = self.command(fresh_path.as_deref());
        let out = run_with_input(&mut cmd, self.stdin.as_deref(), self.timeout)
            .unwrap_or_else(|e| panic!("testkit: cannot run {}: {e}", self.exe.display()));
        Output {
            exe: self.exe,
            ..out
        }
    }
}

/// A program started by [`Run::spawn`].
#[derive(Debug)]
pub struct Running {
    exe: PathBuf,
    deadline: Instant,
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    stdout: std::io::BufReader<std::process::ChildStdout>,
    seen: String,
    stderr: Option<std::thread::JoinHandle<String>>,
    _fresh: Option<TempDir>,
}

impl Running {
    /// The next line the program prints (without the newline). Panics, with everything the
    /// program printed so far, if it closes stdout first. Blocks until the line comes: pair it
    /// with a fixture that prints before it waits.
    pub fn read_line(&mut self) -> String {
        use std::io::BufRead;
        let mut line = String::new();
        let n = self
            .stdout
            .read_line(&mut line)
            .expect("read the fixture's stdout");
        if n == 0 {
            let timed_out = Instant::now() >= self.deadline;
            let out = self.kill_and_collect(timed_out);
            panic!("{}", out.describe("expected another line on stdout"));
        }
        self.seen.push_str(&line);
        line.trim_end_matches('\n').to_string()
    }

    /// Writes `line` and a newline to the program's stdin.
    pub fn write_line(&mut self, line: &str) {
        use std::io::Write;
        let pipe = self.stdin.as_mut().expect("stdin still open");
        writeln!(pipe, "{line}").expect("write to the fixture's stdin");
        pipe.flush().expect("flush the fixture's stdin");
    }

    fn kill_and_collect(&mut self, timed_out: bool) -> Output {
        // SAFETY: kill(2) on the process group created for this child; no memory involved.
        unsafe { libc::kill(-(self.child.id() as libc::pid_t), libc::SIGKILL) };
        self.collect(timed_out)
    }

    fn collect(&mut self, timed_out: bool) -> Output {
        self.stdin.take();
        let status = self.child.wait().expect("wait for the fixture");
        self.done.store(true, std::sync::atomic::Ordering::Release);
        // The watchdog's kill shows up as SIGKILL after the deadline.
        let timed_out = timed_out
            || (status.signal() == Some(libc::SIGKILL) && Instant::now() >= self.deadline);
        let mut rest = String::new();
        let _ = self.stdout.read_to_string(&mut rest);
        self.seen.push_str(&rest);
        let stderr = self
            .stderr
            .take()
            .map(|t| t.join().unwrap_or_default())
            .unwrap_or_default();
        Output {
            exe: self.exe.clone(),
            status,
            timed_out,
            stdout: std::mem::take(&mut self.seen),
            stderr,
        }
    }

    /// Closes stdin, waits for exit (killing the group at the run's deadline) and returns what
    /// the program printed (including lines already read).
    pub fn finish(mut self) -> Output {
        self.stdin.take();
        loop {
            match self.child.try_wait().expect("poll the fixture") {
                Some(_) => return self.collect(false),
                None if Instant::now() >= self.deadline => return self.kill_and_collect(true),
                // Polling interval of the deadline check; try_wait decides.
                None => std::thread::sleep(Duration::from_millis(5)),
            }
        }
    }
}

/// What a run produced.
#[derive(Debug)]
pub struct Output {
    pub exe: PathBuf,
    pub status: ExitStatus,
    /// True if the run was killed for exceeding its timeout.
    pub timed_out: bool,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    pub fn code(&self) -> Option<i32> {
        self.status.code()
    }

    pub fn success(&self) -> bool {
        !self.timed_out && self.status.success()
    }

    /// Panics with the program's output unless it exited 0 in time.
    pub fn assert_success(&self) -> &Output {
        assert!(self.success(), "{}", self.describe("expected success"));
        self
    }

    /// Panics unless the program exited with `code` in time.
    pub fn assert_code(&self, code: i32) -> &Output {
        assert!(
            !self.timed_out && self.status.code() == Some(code),
            "{}",
            self.describe(&format!("expected exit code {code}"))
        );
        self
    }

    pub fn describe(&self, expectation: &str) -> String {
        let how = if self.timed_out {
            "timed out and was killed".to_string()
        } else if let Some(sig) = self.status.signal() {
            format!("killed by signal {sig}")
        } else {
            format!("exited with {:?}", self.status.code())
        };
        format!(
            "{}: {expectation}, but it {how}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.exe.display(),
            self.stdout,
            self.stderr
        )
    }
}

fn run_with_timeout(cmd: &mut Command, timeout: Duration) -> std::io::Result<Output> {
    run_with_input(cmd, None, timeout)
}

/// Spawns `cmd` in its own process group, feeds `stdin`, drains both pipes on threads (so a
/// chatty child cannot block), and kills the whole group when `timeout` passes.
fn run_with_input(
    cmd: &mut Command,
    stdin: Option<&[u8]>,
    timeout: Duration,
) -> std::io::Result<Output> {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    cmd.process_group(0);
    let mut child = cmd.spawn()?;
    if let (Some(bytes), Some(mut pipe)) = (stdin, child.stdin.take()) {
        use std::io::Write;
        let _ = pipe.write_all(bytes);
    }
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut text);
            }
            String::from_utf8_lossy(&text).into_owned()
        })
    };
    let out_thread = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err_thread = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let deadline = Instant::now() + timeout;
    let mut timed_out = false;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if Instant::now() >= deadline {
            timed_out = true;
            // SAFETY: kill(2) on the process group we created (pgid = child pid); no memory is
            // involved.
            unsafe { libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL) };
            break child.wait()?;
        }
        // Polling interval of the deadline check, not synchronisation: try_wait decides.
        std::thread::sleep(Duration::from_millis(5));
    };
    // Descendants that outlive the child keep the pipes open; they die with the group on timeout.
    let stdout = out_thread.join().unwrap_or_default();
    let stderr = err_thread.join().unwrap_or_default();
    Ok(Output {
        exe: PathBuf::new(),
        status,
        timed_out,
        stdout,
        stderr,
    })
}

/// Runs an arbitrary tool (objdump, readelf, ...) with a timeout and returns its stdout, or a
/// description of the failure.
pub fn tool_output(program: &str, args: &[&OsStr]) -> Result<String, String> {
    let mut cmd = Command::new(program);
    cmd.args(args);
    let out = run_with_timeout(&mut cmd, Duration::from_secs(60))
        .map_err(|e| format!("cannot run {program}: {e}"))?;
    if !out.success() {
        return Err(format!("{program} {args:?} failed: {}", out.stderr));
    }
    Ok(out.stdout)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_hash_separates_parts() {
        assert_ne!(fnv1a(&[b"ab", b"c"]), fnv1a(&[b"a", b"bc"]));
        assert_eq!(fnv1a(&[b"x"]), fnv1a(&[b"x"]));
    }

    #[test]
    fn layout_is_found_from_the_test_binary() {
        let layout = target_layout().unwrap();
        assert!(layout.profile_dir.starts_with(&layout.root));
        assert!(is_target_root(&layout.root));
    }

    #[test]
    fn timeouts_kill_and_report() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo started; sleep 30"]);
        let start = Instant::now();
        let out = run_with_timeout(&mut cmd, Duration::from_millis(300)).unwrap();
        assert!(out.timed_out);
        assert!(start.elapsed() < Duration::from_secs(10));
        assert_eq!(out.stdout, "started\n");
    }
}
