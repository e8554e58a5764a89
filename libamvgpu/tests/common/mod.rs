//! Shared harness of the hook's integration tests.
//!
//! Every test describes a HIP workload as a list of `hipdrive` steps (see
//! `fixtures/hipdrive.c`), runs it under `LD_AUDIT=<abs>/libamvgpu.so` against the simulated
//! runtime, and asserts on the per-step result lines and on the simulator's own bookkeeping
//! (`hipsimGetUsage`, printed by the `usage:D` step). Fixtures are compiled through `testkit`,
//! which also builds the hook and the simulator fresh; the processes themselves are started
//! here, because the tests need what a plain run does not give: the pid (log prefix), SIGKILL
//! at a chosen moment, lock-step stdin, another user id. Each [`Sandbox`] owns a fresh temporary
//! directory holding the ledger file and the simulator's shared state, so tests never see each
//! other and never touch the default `/tmp/amvgpu/<uid>/ledger`.
#![allow(dead_code)] // each test binary uses a different part of the harness

use std::collections::BTreeMap;
use std::fmt;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

pub const KIB: u64 = 1 << 10;
pub const MIB: u64 = 1 << 20;
pub const GIB: u64 = 1 << 30;

/// hipSuccess, hipErrorInvalidValue, hipErrorOutOfMemory, hipErrorInvalidDevice.
pub const HIP_SUCCESS: i64 = 0;
pub const HIP_INVALID_VALUE: i64 = 1;
pub const HIP_OUT_OF_MEMORY: i64 = 2;
pub const HIP_INVALID_DEVICE: i64 = 101;

/// VRAM of every simulated device unless a test says otherwise: large enough that a container
/// limit, not the device, is what refuses an allocation.
pub const DEFAULT_VRAM: u64 = 4 * GIB;

/// How long one fixture run may take before the harness calls it hung.
pub const RUN_TIMEOUT: Duration = Duration::from_secs(60);

/// The real ROCm 5.2 runtime from Debian.
pub const REAL_RUNTIME: &str = "/usr/lib/x86_64-linux-gnu/libamdhip64.so.5";

// ---------------------------------------------------------------------------------------------
// Artifacts
// ---------------------------------------------------------------------------------------------

/// Absolute path of the audit module under test, freshly built by testkit.
pub fn hook_path() -> PathBuf {
    testkit::amvgpu().to_path_buf()
}

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Which runtime a fixture is linked against.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Runtime {
    /// The simulated runtime (`hipsim`).
    Sim,
    /// Debian's real ROCm 5.2 runtime.
    Real,
}

/// How a fixture binds its HIP calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Binding {
    Lazy,
    /// Linked with `-z now`: every PLT slot resolved at start-up.
    Now,
    /// Compiled with `-fno-plt`: calls go through GLOB_DAT GOT slots, filled at start-up.
    NoPlt,
}

/// Compiles `fixtures/<name>.c` through testkit (cached by content) and returns the executable.
///
/// The fixture uses Debian's ROCm 5.2 headers plus weak declarations of the newer entry points,
/// so the same source links against the simulator and the real runtime.
pub fn fixture(name: &str, runtime: Runtime, binding: Binding) -> PathBuf {
    let mut f = testkit::Fixture::from_path(fixtures_dir().join(format!("{name}.c")))
        .cflag("-D__HIP_PLATFORM_AMD__");
    match runtime {
        Runtime::Real => f = f.without_hip().link_flag(REAL_RUNTIME),
        Runtime::Sim => f = f.cflag("-DHIPDRIVE_SIM"),
    }
    match binding {
        Binding::Lazy => {}
        Binding::Now => f = f.link_flag("-Wl,-z,now"),
        Binding::NoPlt => f = f.cflag("-fno-plt"),
    }
    f = f.link_flag("-pthread").link_flag("-ldl");
    f.compile().unwrap_or_else(|e| panic!("{e}")).exe
}

/// Directory of the simulated `libamdhip64.so` (for LD_LIBRARY_PATH).
pub fn hipsim_dir() -> PathBuf {
    testkit::libs().dir.clone()
}

// ---------------------------------------------------------------------------------------------
// Sandbox: one test's private temp dir, simulator and hook configuration
// ---------------------------------------------------------------------------------------------

/// A private directory plus the environment every process of one test shares.
pub struct Sandbox {
    dir: PathBuf,
    env: BTreeMap<String, String>,
    runtime: Runtime,
    binding: Binding,
    hooked: bool,
    uid: Option<u32>,
    /// Only the sandbox that created the directory removes it.
    owns_dir: bool,
}

impl Sandbox {
    /// A sandbox named after the test, with `devices` simulated devices of [`DEFAULT_VRAM`].
    pub fn new(test: &str, devices: u32) -> Sandbox {
        static SEQ: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "amvgpu-hooktests-{}-{}-{test}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create sandbox dir");
        let mut sb = Sandbox {
            dir,
            env: BTreeMap::new(),
            runtime: Runtime::Sim,
            binding: Binding::Lazy,
            hooked: true,
            uid: None,
            owns_dir: true,
        };
        let ledger = sb.path("ledger");
        let state = sb.path("hipsim-state");
        sb.env.insert(
            "HIP_DEVICE_MEMORY_SHARED_CACHE".into(),
            ledger.display().to_string(),
        );
        sb.env
            .insert("HIPSIM_STATE".into(), state.display().to_string());
        sb.env.insert("HIPSIM_DEVICES".into(), devices.to_string());
        sb.env
            .insert("HIPSIM_VRAM".into(), DEFAULT_VRAM.to_string());
        sb
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    pub fn ledger_path(&self) -> PathBuf {
        PathBuf::from(&self.env["HIP_DEVICE_MEMORY_SHARED_CACHE"])
    }

    /// Sets (or replaces) one environment variable of every later run.
    pub fn env(mut self, key: &str, value: &str) -> Sandbox {
        self.env.insert(key.to_string(), value.to_string());
        self
    }

    pub fn remove_env(mut self, key: &str) -> Sandbox {
        self.env.remove(key);
        self
    }

    /// `HIP_DEVICE_MEMORY_LIMIT`.
    pub fn limit(self, value: &str) -> Sandbox {
        self.env("HIP_DEVICE_MEMORY_LIMIT", value)
    }

    /// `HIP_DEVICE_MEMORY_LIMIT_<device>`.
    pub fn device_limit(self, device: u32, value: &str) -> Sandbox {
        self.env(&format!("HIP_DEVICE_MEMORY_LIMIT_{device}"), value)
    }

    pub fn vram(self, bytes: u64) -> Sandbox {
        self.env("HIPSIM_VRAM", &bytes.to_string())
    }

    pub fn runtime(mut self, runtime: Runtime) -> Sandbox {
        self.runtime = runtime;
        self
    }

    pub fn binding(mut self, binding: Binding) -> Sandbox {
        self.binding = binding;
        self
    }

    /// A copy that runs the same workload without the hook (the reference behaviour).
    pub fn unhooked(&self) -> Sandbox {
        let mut copy = self.clone_config();
        copy.hooked = false;
        copy
    }

    /// Another hooked configuration over the same directory (ledger and simulator state), to
    /// be changed without touching this one.
    pub fn sibling(&self) -> Sandbox {
        let mut copy = self.clone_config();
        copy.hooked = true;
        copy
    }

    /// Runs later processes under another user id (root ignores file modes).
    pub fn run_as_uid(mut self, uid: u32) -> Sandbox {
        self.uid = Some(uid);
        self
    }

    fn clone_config(&self) -> Sandbox {
        Sandbox {
            dir: self.dir.clone(),
            env: self.env.clone(),
            runtime: self.runtime,
            binding: self.binding,
            hooked: self.hooked,
            uid: self.uid,
            owns_dir: false,
        }
    }

    fn command(&self, steps: &[&str]) -> Command {
        let mut exe = fixture("hipdrive", self.runtime, self.binding);
        let mut hook = hook_path();
        if self.uid.is_some() {
            // Another user may not be able to reach the build directory (a checkout under
            // /root): give it copies in the sandbox, found through LD_LIBRARY_PATH, which the
            // loader searches before the fixture's RUNPATH.
            let bin = self.path("bin");
            std::fs::create_dir_all(&bin).expect("create sandbox bin dir");
            let copy = |from: &Path| {
                let to = bin.join(from.file_name().expect("file name"));
                std::fs::copy(from, &to).unwrap_or_else(|e| panic!("copy {}: {e}", from.display()));
                to
            };
            copy(&hipsim_dir().join("libamdhip64.so"));
            exe = copy(&exe);
            hook = copy(&hook);
        }
        let mut cmd = Command::new(exe);
        cmd.args(steps)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .current_dir(&self.dir);
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        if self.hooked {
            cmd.env("LD_AUDIT", hook);
        }
        if self.binding == Binding::Now {
            cmd.env("LD_BIND_NOW", "1");
        }
        if let Some(uid) = self.uid {
            use std::os::unix::process::CommandExt;
            cmd.env("LD_LIBRARY_PATH", self.path("bin"))
                .uid(uid)
                .gid(uid);
        }
        cmd
    }

    /// Runs `hipdrive` with these steps to completion and returns its output.
    pub fn run(&self, steps: &[&str]) -> Run {
        let mut child = self
            .command(steps)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn_retrying_busy_text()
            .expect("spawn hipdrive");
        let pid = child.id();
        let out = drain(child.stdout.take().unwrap());
        let err = drain(child.stderr.take().unwrap());
        let status = wait_with_deadline(&mut child, RUN_TIMEOUT)
            .unwrap_or_else(|| panic!("hipdrive {steps:?} hung for {RUN_TIMEOUT:?}"));
        let run = Run::new(steps, status, pid, join(out), join(err));
        self.check_hook_loaded(&run);
        run
    }

    /// The loader ignores an audit module it cannot load (with one line on stderr) and runs the
    /// program anyway: every hooked run checks that this did not happen.
    fn check_hook_loaded(&self, run: &Run) {
        if self.hooked {
            assert!(
                !run.stderr.contains("cannot be loaded as audit interface"),
                "the loader refused libamvgpu.so\n{run}"
            );
        }
    }

    /// Starts `hipdrive` with piped stdin/stdout so that the test can wait for a `ready`
    /// line, release a `wait` step (by closing stdin) or kill it.
    pub fn spawn(&self, steps: &[&str]) -> Running {
        let child = self
            .command(steps)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn_retrying_busy_text()
            .expect("spawn hipdrive");
        let mut running = Running::new(child, steps);
        running.hooked = self.hooked;
        running
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        // A failing test keeps its directory for inspection.
        if self.owns_dir && !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

fn drain<R: Read + Send + 'static>(mut r: R) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = r.read_to_end(&mut buf);
        buf
    })
}

fn join(h: std::thread::JoinHandle<Vec<u8>>) -> String {
    String::from_utf8_lossy(&h.join().expect("reader thread")).into_owned()
}

/// Waits for the child, killing it after `limit` (a hang is a failure, reported by the caller).
fn wait_with_deadline(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return Some(status);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        // Polling interval of a watchdog, not synchronisation: the result does not depend on it.
        std::thread::sleep(Duration::from_millis(5));
    }
}

// ---------------------------------------------------------------------------------------------
// Results
// ---------------------------------------------------------------------------------------------

/// One `<index> <op> <rc> [values]` line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    pub index: usize,
    pub op: String,
    pub rc: i64,
    pub vals: Vec<u64>,
}

fn parse_step(line: &str) -> Option<Step> {
    let mut it = line.split_ascii_whitespace();
    let index = it.next()?.parse().ok()?;
    let op = it.next()?.to_string();
    let rc = it.next()?.parse().ok()?;
    let vals = it.map(|v| v.parse().ok()).collect::<Option<Vec<u64>>>()?;
    Some(Step {
        index,
        op,
        rc,
        vals,
    })
}

/// A finished run of `hipdrive`.
pub struct Run {
    pub steps_given: Vec<String>,
    pub status: ExitStatus,
    pub pid: u32,
    pub stdout: String,
    pub stderr: String,
    pub results: BTreeMap<usize, Step>,
}

impl Run {
    fn new(steps: &[&str], status: ExitStatus, pid: u32, stdout: String, stderr: String) -> Run {
        let results = stdout
            .lines()
            .filter_map(parse_step)
            .map(|s| (s.index, s))
            .collect();
        Run {
            steps_given: steps.iter().map(|s| s.to_string()).collect(),
            status,
            pid,
            stdout,
            stderr,
            results,
        }
    }

    /// The result of step `i`; panics with the whole run if the step printed nothing.
    pub fn step(&self, i: usize) -> &Step {
        self.results
            .get(&i)
            .unwrap_or_else(|| panic!("step {i} printed no result\n{self}"))
    }

    pub fn rc(&self, i: usize) -> i64 {
        self.step(i).rc
    }

    pub fn val(&self, i: usize, k: usize) -> u64 {
        let s = self.step(i);
        *s.vals
            .get(k)
            .unwrap_or_else(|| panic!("step {i} has no value #{k}\n{self}"))
    }

    /// Asserts step `i` returned `rc`, naming the step and showing the run otherwise.
    #[track_caller]
    pub fn expect_rc(&self, i: usize, rc: i64) -> &Run {
        let got = self.rc(i);
        assert_eq!(
            got, rc,
            "step {i} `{}` returned {got}, expected {rc}\n{self}",
            self.steps_given[i]
        );
        self
    }

    #[track_caller]
    pub fn expect_ok(&self, i: usize) -> &Run {
        self.expect_rc(i, HIP_SUCCESS)
    }

    #[track_caller]
    pub fn expect_oom(&self, i: usize) -> &Run {
        self.expect_rc(i, HIP_OUT_OF_MEMORY)
    }

    /// Asserts the process exited with status 0.
    #[track_caller]
    pub fn expect_clean_exit(&self) -> &Run {
        assert!(
            self.status.success(),
            "hipdrive did not exit cleanly: {:?}\n{self}",
            self.status
        );
        self
    }

    /// `(live, peak)` from a `usage:D` step.
    pub fn usage(&self, i: usize) -> (u64, u64) {
        let s = self.step(i);
        assert_eq!(s.op, "usage", "step {i} is not a usage step\n{self}");
        assert_eq!(s.rc, 0, "hipsimGetUsage failed at step {i}\n{self}");
        (s.vals[0], s.vals[1])
    }

    /// `(free, total)` from a `meminfo` step, asserting it succeeded.
    #[track_caller]
    pub fn meminfo(&self, i: usize) -> (u64, u64) {
        self.expect_ok(i);
        (self.val(i, 0), self.val(i, 1))
    }

    /// Lines of stderr written by the hook.
    pub fn hook_lines(&self) -> Vec<&str> {
        self.stderr
            .lines()
            .filter(|l| l.starts_with("[amvgpu"))
            .collect()
    }
}

impl fmt::Display for Run {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "--- steps: {:?}", self.steps_given)?;
        writeln!(f, "--- status: {:?}", self.status)?;
        writeln!(f, "--- stdout:\n{}", self.stdout)?;
        write!(f, "--- stderr:\n{}", self.stderr)
    }
}

/// A `hipdrive` process the test steers while it runs.
pub struct Running {
    child: Child,
    stdin: Option<std::process::ChildStdin>,
    lines: std::sync::mpsc::Receiver<String>,
    seen: Vec<String>,
    stderr: Option<std::thread::JoinHandle<Vec<u8>>>,
    steps: Vec<String>,
    hooked: bool,
}

impl Running {
    fn new(mut child: Child, steps: &[&str]) -> Running {
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().unwrap();
        let stderr = drain(child.stderr.take().unwrap());
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                match line {
                    Ok(l) => {
                        if tx.send(l).is_err() {
                            break;
                        }
                    }
                    Err(_) => break,
                }
            }
        });
        Running {
            child,
            stdin,
            lines: rx,
            seen: Vec::new(),
            stderr: Some(stderr),
            steps: steps.iter().map(|s| s.to_string()).collect(),
            hooked: false,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Blocks until the process prints the result of step `index` and returns it.
    pub fn wait_step(&mut self, index: usize) -> Step {
        let deadline = Instant::now() + RUN_TIMEOUT;
        loop {
            if let Some(s) = self
                .seen
                .iter()
                .filter_map(|l| parse_step(l))
                .find(|s| s.index == index)
            {
                return s;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) => self.seen.push(l),
                Err(_) => {
                    let _ = self.child.kill();
                    panic!(
                        "step {index} of {:?} never reported; output so far:\n{}",
                        self.steps,
                        self.seen.join("\n")
                    );
                }
            }
        }
    }

    /// Writes one line to stdin, which lets one `waitline` step return.
    pub fn send_line(&mut self) {
        let stdin = self.stdin.as_mut().expect("stdin already closed");
        stdin.write_all(b"go\n").expect("write to stdin");
        stdin.flush().expect("flush stdin");
    }

    /// Closes stdin, which lets a `wait` step return.
    pub fn release(&mut self) {
        self.stdin.take();
    }

    pub fn kill(&mut self) {
        self.child.kill().expect("SIGKILL");
    }

    /// Waits for the end and returns the run (stdout holds every line seen).
    pub fn finish(mut self) -> Run {
        self.release();
        let status = wait_with_deadline(&mut self.child, RUN_TIMEOUT)
            .unwrap_or_else(|| panic!("{:?} hung for {RUN_TIMEOUT:?}", self.steps));
        while let Ok(l) = self.lines.recv_timeout(Duration::from_secs(5)) {
            self.seen.push(l);
        }
        let stderr = join(self.stderr.take().unwrap());
        let steps: Vec<&str> = self.steps.iter().map(String::as_str).collect();
        let mut stdout = self.seen.join("\n");
        stdout.push('\n');
        let run = Run::new(&steps, status, self.child.id(), stdout, stderr);
        if self.hooked {
            assert!(
                !run.stderr.contains("cannot be loaded as audit interface"),
                "the loader refused libamvgpu.so\n{run}"
            );
        }
        run
    }
}

/// Writes `bytes` to `path`, creating parent directories.
pub fn write_file(path: &Path, bytes: &[u8]) {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("create parent dir");
    }
    let mut f = std::fs::File::create(path).expect("create file");
    f.write_all(bytes).expect("write file");
}

/// Spawning a binary this test process has just copied can fail with ETXTBSY: a sibling test
/// thread that forked while the copy's write descriptor was open keeps that descriptor until
/// its own exec. The condition clears by itself within milliseconds, so retry a bounded number
/// of times instead of failing the test for a race that is not the hook's.
pub trait SpawnRetryingBusyText {
    fn spawn_retrying_busy_text(&mut self) -> std::io::Result<std::process::Child>;
}

impl SpawnRetryingBusyText for Command {
    fn spawn_retrying_busy_text(&mut self) -> std::io::Result<std::process::Child> {
        let mut attempts = 0;
        loop {
            match self.spawn() {
                Err(e) if e.raw_os_error() == Some(ETXTBSY) && attempts < 100 => {
                    attempts += 1;
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                other => return other,
            }
        }
    }
}

/// Linux's "text file busy" errno (`ErrorKind::ExecutableFileBusy` needs a newer Rust than the MSRV).
const ETXTBSY: i32 = 26;
