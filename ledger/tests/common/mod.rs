//! Helpers shared by the integration tests: scratch directories and
//! re-executing the current test binary in a child role.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

/// A fresh directory unique to this process and `name`.
pub fn scratch_dir(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("amvgpu-ledger-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create scratch dir");
    dir
}

pub const ROLE_VAR: &str = "AMVGPU_LEDGER_TEST_ROLE";

/// Starts this test binary again, running only the ignored `child_entry`
/// test, with `role` and `args` in the environment. Stdin and stdout are
/// piped so the parent can release and observe the child without sleeping.
pub fn spawn_child(role: &str, args: &[(&str, String)]) -> Command {
    let mut cmd = Command::new(std::env::current_exe().expect("test binary path"));
    cmd.args([
        "--ignored",
        "--exact",
        "child_entry",
        "--nocapture",
        "--test-threads=1",
        "-q",
    ])
    .env(ROLE_VAR, role)
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .stderr(Stdio::inherit());
    for (k, v) in args {
        cmd.env(k, v);
    }
    cmd
}

pub fn arg(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("child needs {name}"))
}

/// Reads lines from the child's stdout until one starts with `prefix`.
pub fn read_until(child: &mut Child, prefix: &str) -> String {
    use std::io::BufRead;
    let out = child.stdout.as_mut().expect("piped stdout");
    let mut reader = std::io::BufReader::new(out);
    let mut line = String::new();
    loop {
        line.clear();
        let n = reader.read_line(&mut line).expect("read child stdout");
        assert!(n > 0, "child exited before printing {prefix:?}");
        if line.starts_with(prefix) {
            return line.trim_end().to_string();
        }
    }
}

/// Blocks until the parent writes a line to our stdin.
pub fn wait_for_parent() -> String {
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).expect("read stdin");
    line.trim_end().to_string()
}
