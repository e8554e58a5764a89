//! Starting real `amvgpu` jobs on the simulated runtime, each test in its own state
//! directory and simulator state.

#![allow(dead_code)] // each test file uses a different part

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Output, Stdio};

pub const AMVGPU: &str = env!("CARGO_BIN_EXE_amvgpu");
pub const WORKLOAD: &str = env!("CARGO_BIN_EXE_amvgpu-demo-workload");

/// `target/<profile>`, where cargo leaves the binaries and the two shared libraries.
pub fn profile_dir() -> PathBuf {
    Path::new(AMVGPU)
        .parent()
        .expect("the binary lives in a directory")
        .to_path_buf()
}

pub fn hook() -> PathBuf {
    libraries();
    testkit::amvgpu().to_path_buf()
}

/// Builds (once per test process, through testkit, which runs `cargo build` for the same
/// profile and target directory) the hook and the simulator, so both are fresh and sit next
/// to the `amvgpu` binary, where `amvgpu run` and `amvgpu demo` look for them.
pub fn libraries() {
    let hipsim = testkit::libs();
    let hook = testkit::amvgpu();
    assert_eq!(
        hipsim.dir,
        profile_dir(),
        "testkit builds into the profile directory of the amvgpu binary"
    );
    assert_eq!(hook.parent(), Some(profile_dir().as_path()));
}

/// A private world: state directory, simulator state, environment.
pub struct World {
    pub dir: tempfile::TempDir,
    pub devices: u32,
}

impl World {
    pub fn new() -> World {
        World::with_devices(1)
    }

    /// A simulated host with `devices` identical MI300X GPUs.
    pub fn with_devices(devices: u32) -> World {
        libraries();
        World {
            dir: tempfile::tempdir().expect("temp dir"),
            devices,
        }
    }

    pub fn state_dir(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    pub fn hipsim_state(&self) -> PathBuf {
        self.dir.path().join("hipsim-state")
    }

    /// `amvgpu <args>` with `--state-dir` and the simulated GPU's environment.
    pub fn amvgpu(&self, args: &[&str]) -> Command {
        let mut command = Command::new(AMVGPU);
        // Before the subcommand: after it, `run` would pass it on to the job's command.
        command.arg("--state-dir").arg(self.state_dir());
        command.args(args);
        self.configure(&mut command);
        command
    }

    pub fn configure(&self, command: &mut Command) {
        command
            .env("AMVGPU_TOPOLOGY", "hipsim")
            .env("HIPSIM_DEVICES", self.devices.to_string())
            .env("HIPSIM_ARCH", "gfx942")
            .env("HIPSIM_CUS", "304")
            .env("HIPSIM_VRAM", "64g")
            .env("HIPSIM_STATE", self.hipsim_state())
            .env("LD_LIBRARY_PATH", profile_dir())
            .env_remove("LD_AUDIT")
            .env_remove("HSA_CU_MASK")
            .env_remove("ROCR_VISIBLE_DEVICES")
            .env_remove("AMVGPU_STATE_DIR");
    }

    /// `amvgpu run <flags> -- <command>` with the hook, stdin and stdout piped.
    pub fn start(&self, flags: &[&str], command: &[&str]) -> Job {
        let hook = hook();
        let mut args = vec!["run", "--lib", hook.to_str().unwrap()];
        args.extend_from_slice(flags);
        args.push("--");
        args.extend_from_slice(command);
        let mut child = self
            .amvgpu(&args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("amvgpu starts");
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().expect("piped"));
        Job {
            child,
            stdin,
            stdout,
        }
    }

    /// Runs to completion.
    pub fn output(&self, args: &[&str]) -> Output {
        self.amvgpu(args)
            .stdin(Stdio::null())
            .output()
            .expect("amvgpu runs")
    }

    /// `status --json`, parsed.
    pub fn status_json(&self) -> serde_json::Value {
        let out = self.output(&["status", "--json"]);
        assert!(out.status.success(), "status failed: {}", text(&out.stderr));
        serde_json::from_slice(&out.stdout).expect("status --json prints JSON")
    }
}

/// A running job: the command holds until its stdin closes.
pub struct Job {
    pub child: Child,
    pub stdin: Option<ChildStdin>,
    pub stdout: BufReader<ChildStdout>,
}

impl Job {
    /// The next line the command prints; panics with the job's stderr if it ended instead.
    pub fn line(&mut self) -> String {
        let mut line = String::new();
        let n = self.stdout.read_line(&mut line).expect("read stdout");
        if n == 0 {
            let status = self.child.wait().expect("wait");
            let mut err = String::new();
            if let Some(mut stderr) = self.child.stderr.take() {
                let _ = stderr.read_to_string(&mut err);
            }
            panic!("job ended ({status}) before printing; stderr:\n{err}");
        }
        line.trim_end().to_string()
    }

    /// Reads lines until one starts with `prefix`; returns it and the lines before.
    pub fn until(&mut self, prefix: &str) -> (String, Vec<String>) {
        let mut before = Vec::new();
        loop {
            let line = self.line();
            if line.starts_with(prefix) {
                return (line, before);
            }
            before.push(line);
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Closes stdin and returns the exit code.
    pub fn finish(mut self) -> Option<i32> {
        drop(self.stdin.take());
        self.child.wait().expect("wait").code()
    }
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The CU set of GPU 0 in an `HSA_CU_MASK` value.
pub fn gpu0_set(mask: &str) -> cumask::CuSet {
    gpu_set(mask, 0)
}

/// The CU set of (job-local) GPU `gpu` in an `HSA_CU_MASK` value.
pub fn gpu_set(mask: &str, gpu: usize) -> cumask::CuSet {
    let parsed = cumask::HsaCuMask::parse(mask)
        .unwrap_or_else(|e| panic!("HSA_CU_MASK={mask:?} does not parse: {e}"));
    *parsed
        .get(gpu)
        .unwrap_or_else(|| panic!("GPU {gpu} is not masked in {mask:?}"))
}
