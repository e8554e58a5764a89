//! `amvgpu demo`: two HIP workloads side by side in two slices of one simulated GPU.
//!
//! Everything it shows is measured, not narrated: the masks and memory totals are what the
//! workloads print from inside their jobs, the refusals are the HIP return codes they got,
//! the table is `status` read while both hold their memory. It uses a private state
//! directory and simulator state, so it neither sees nor disturbs real jobs.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};

use crate::locate::{self, HIP_LIB, HOOK_LIB};
use crate::slices;
use crate::Failure;

const WORKLOAD: &str = "amvgpu-demo-workload";
const VRAM: &str = "64G";
const CUS: u32 = 304;

struct Job {
    name: &'static str,
    memory: &'static str,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Vec<String>,
    stderr_path: PathBuf,
}

impl Job {
    fn line_starting(&self, prefix: &str) -> Option<&str> {
        self.lines
            .iter()
            .find_map(|l| l.strip_prefix(prefix))
            .map(str::trim)
    }
}

/// A private directory removed when the demo ends.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn demo(verbose: bool) -> Result<(), Failure> {
    let exe_dir = locate::exe_dir();
    let need = |library: &'static str| {
        locate::find(library, None, exe_dir.as_deref()).map_err(|e| {
            Failure::environment(format!("the demo needs {library} from this build: {e}"))
        })
    };
    let hip = need(HIP_LIB)?;
    let hook = need(HOOK_LIB)?;
    let build_dir = hip.parent().map(Path::to_path_buf).unwrap_or_default();
    let workload = exe_dir
        .as_deref()
        .map(|d| d.join(WORKLOAD))
        .filter(|p| p.is_file())
        .ok_or_else(|| {
            Failure::environment(format!(
                "cannot find {WORKLOAD} next to amvgpu; build it with: {}",
                locate::build_command(exe_dir.as_deref())
            ))
        })?;
    let workload_dir = workload.parent().map(Path::to_path_buf).unwrap_or_default();
    let amvgpu = std::env::current_exe()
        .map_err(|e| Failure::environment(format!("cannot locate amvgpu itself: {e}")))?;

    let scratch = Scratch(std::env::temp_dir().join(format!("amvgpu-demo-{}", std::process::id())));
    let _ = std::fs::remove_dir_all(&scratch.0);
    std::fs::create_dir_all(&scratch.0)
        .map_err(|e| Failure::environment(format!("cannot create {}: {e}", scratch.0.display())))?;
    let state_dir = scratch.0.join("state");
    let library_path = match std::env::var_os("LD_LIBRARY_PATH") {
        Some(old) if !old.is_empty() => {
            let mut joined = build_dir.clone().into_os_string();
            joined.push(":");
            joined.push(old);
            joined
        }
        _ => build_dir.clone().into_os_string(),
    };
    let path = match std::env::var_os("PATH") {
        Some(old) if !old.is_empty() => {
            let mut joined = workload_dir.clone().into_os_string();
            joined.push(":");
            joined.push(old);
            joined
        }
        _ => workload_dir.clone().into_os_string(),
    };
    let configure = |command: &mut Command| {
        command
            .env("PATH", &path)
            .env("AMVGPU_TOPOLOGY", "hipsim")
            .env("HIPSIM_DEVICES", "1")
            .env("HIPSIM_ARCH", "gfx942")
            .env("HIPSIM_CUS", CUS.to_string())
            .env("HIPSIM_VRAM", VRAM)
            .env("HIPSIM_STATE", scratch.0.join("hipsim-state"))
            .env("LD_LIBRARY_PATH", &library_path)
            .env_remove("LD_AUDIT")
            .env_remove("HSA_CU_MASK");
    };

    println!("amvgpu demo: two jobs share one simulated MI300X (gfx942, {CUS} CUs, {} GiB VRAM); no GPU needed.", VRAM.trim_end_matches('G'));
    if verbose {
        println!("  simulator {}", hip.display());
        println!("  hook      {}", hook.display());
        println!("  state     {}", state_dir.display());
    }
    // The same workload without amvgpu: no hook, no limit, no mask. What the jobs below see
    // differs from this only because of the hook and the slice.
    println!("baseline: {WORKLOAD} fill 512M   (no amvgpu run, no hook: the whole card)");
    let mut plain = Command::new(&workload);
    plain
        .args(["fill", "512M"])
        .stdin(Stdio::null())
        .stderr(Stdio::inherit());
    configure(&mut plain);
    let plain = plain
        .output()
        .map_err(|e| Failure::environment(format!("cannot start {}: {e}", workload.display())))?;
    let baseline: Vec<String> = String::from_utf8_lossy(&plain.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    for line in &baseline {
        println!("  [-] {line}");
    }
    let baseline_total = baseline
        .iter()
        .find_map(|l| l.strip_prefix("hipMemGetInfo: total "))
        .and_then(|t| t.split(" MiB").next())
        .and_then(|t| t.trim().parse::<u64>().ok());
    let baseline_held = baseline
        .iter()
        .find_map(|l| l.strip_prefix("holding"))
        .and_then(|t| t.trim().parse::<u64>().ok());

    let mut jobs = Vec::new();
    for (name, memory) in [("A", "2G"), ("B", "3G")] {
        let args = ["run", "--cores", "25", "--memory", memory, "--lib"];
        println!("job {name}: amvgpu run --cores 25 --memory {memory} -- {WORKLOAD} fill 512M");
        // The hook reports refusals on stderr; shown with the job's own lines below.
        let stderr_path = scratch.0.join(format!("job-{name}.stderr"));
        let stderr_file = std::fs::File::create(&stderr_path).map_err(|e| {
            Failure::environment(format!("cannot create {}: {e}", stderr_path.display()))
        })?;
        let mut command = Command::new(&amvgpu);
        command
            .args(args)
            .arg(&hook)
            .arg("--state-dir")
            .arg(&state_dir)
            .args(["--", WORKLOAD, "fill", "512M"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr_file.try_clone().map_err(|e| {
                Failure::environment(format!("cannot share {}: {e}", stderr_path.display()))
            })?);
        configure(&mut command);
        let mut child = command
            .spawn()
            .map_err(|e| Failure::environment(format!("cannot start {}: {e}", amvgpu.display())))?;
        let stdin = child.stdin.take();
        jobs.push(Job {
            name,
            memory,
            child,
            stdin,
            lines: Vec::new(),
            stderr_path,
        });
    }

    // Each workload prints what it saw, then "holding ..." once it has all its memory.
    for job in &mut jobs {
        let stdout = job.child.stdout.take().expect("stdout was piped");
        let mut reader = BufReader::new(stdout);
        let mut line = String::new();
        loop {
            line.clear();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            let text = line.trim_end().to_string();
            println!("  [{}] {text}", job.name);
            let done = text.starts_with("holding");
            job.lines.push(text);
            if done {
                break;
            }
        }
        // Everything the job wrote on stderr came before "holding" (same thread, in order).
        let stderr = std::fs::read_to_string(&job.stderr_path).unwrap_or_default();
        for line in stderr.lines() {
            println!("  [{}] stderr: {line}", job.name);
        }
        if job.line_starting("holding").is_none() {
            let status = job.child.wait();
            return Err(Failure::environment(format!(
                "job {} stopped before holding its memory ({status:?}); its stderr is shown above",
                job.name
            )));
        }
    }

    println!("\namvgpu status, while both jobs hold their memory:");
    let mut status = Command::new(&amvgpu);
    status
        .arg("status")
        .arg("--state-dir")
        .arg(&state_dir)
        .stdin(Stdio::null());
    configure(&mut status);
    let status = status
        .output()
        .map_err(|e| Failure::environment(format!("cannot start {}: {e}", amvgpu.display())))?;
    for line in String::from_utf8_lossy(&status.stdout).lines() {
        println!("  {line}");
    }

    println!("\njob C: amvgpu run --cores 75 -- true   (75% of the CUs while 50% are taken)");
    let mut third = Command::new(&amvgpu);
    third
        .args(["run", "--cores", "75", "--lib"])
        .arg(&hook)
        .arg("--state-dir")
        .arg(&state_dir)
        .args(["--", "true"])
        .stdin(Stdio::null());
    configure(&mut third);
    let third = third
        .output()
        .map_err(|e| Failure::environment(format!("cannot start {}: {e}", amvgpu.display())))?;
    for line in String::from_utf8_lossy(&third.stderr).lines() {
        println!("  [C] {line}");
    }
    println!("  [C] exit status {}", third.status.code().unwrap_or(-1));

    for job in &mut jobs {
        drop(job.stdin.take()); // lets the workload free its memory and exit
        let _ = job.child.wait();
    }

    // The verdicts, each from the evidence above.
    println!("\nchecks:");
    let mut all_good = true;
    let mut check = |ok: bool, what: String| {
        all_good &= ok;
        println!("  [{}] {what}", if ok { "ok" } else { "FAILED" });
    };
    let card_mib = VRAM.trim_end_matches('G').parse::<u64>().unwrap_or(0) * 1024;
    check(
        baseline_total == Some(card_mib) && baseline_held.is_some_and(|held| held > 3 << 30),
        format!(
            "without the hook the same workload sees the whole card ({card_mib} MiB) and gets past every slice's limit"
        ),
    );
    let masks: Vec<String> = jobs
        .iter()
        .map(|j| j.line_starting("HSA_CU_MASK=").unwrap_or("").to_string())
        .collect();
    check(
        slices::masks_disjoint(&masks, CUS),
        format!(
            "the two CU masks are disjoint ({} and {})",
            masks[0], masks[1]
        ),
    );
    for job in &jobs {
        let total = job
            .line_starting("hipMemGetInfo: total ")
            .and_then(|t| t.split(" MiB").next())
            .and_then(|t| t.parse::<u64>().ok());
        let limit_mib = job.memory.trim_end_matches('G').parse::<u64>().unwrap_or(0) * 1024;
        check(
            total == Some(limit_mib),
            format!(
                "job {}: hipMemGetInfo total is its {} slice, not the card",
                job.name, job.memory
            ),
        );
        // Refused exactly at the limit, not because the simulated card ran out.
        let refused = job
            .lines
            .iter()
            .any(|l| l.contains("returned hipErrorOutOfMemory"));
        let held = job
            .line_starting("holding")
            .and_then(|t| t.parse::<u64>().ok());
        check(
            refused && held == Some(limit_mib << 20),
            format!(
                "job {}: the allocation past {} was refused with hipErrorOutOfMemory",
                job.name, job.memory
            ),
        );
    }
    check(
        third.status.code() == Some(i32::from(crate::EXIT_DOES_NOT_FIT)),
        "job C was refused before starting (exit 3: does not fit)".into(),
    );
    let _ = std::io::stdout().flush();
    drop(scratch);
    if all_good {
        Ok(())
    } else {
        Err(Failure::environment(
            "the demo did not show what it should (see FAILED above)".into(),
        ))
    }
}
