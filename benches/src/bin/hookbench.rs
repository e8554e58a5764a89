//! hookbench: what `libamvgpu.so` costs a HIP program, measured side by side in one run.
//!
//! ```text
//! cargo run --release -p benches --bin hookbench [hot] [startup] [memory]
//! ```
//!
//! Every figure comes from C fixtures (`benches/hook/*.c`) linked against the simulated
//! runtime, run alternately without and with `LD_AUDIT` several times; the report gives medians
//! and the difference, and says PASS or MISS against each target. It is a report, not a test:
//! it exits 0 whatever it measured (and non-zero only when it could not measure).
//!
//! - (a) a hipMalloc+hipFree pair, one thread (target: <= 60 ns added), and two threads at once
//!   (target: added cost per thread <= 2x the one-thread figure);
//! - (b) hipGetDevicePropertiesR0600 and hipMemGetInfo (target: <= 30 ns added each);
//! - (c) start-up of a program binding 20,000 functions of a generated library, lazily and with
//!   `-z now` (target: <= 5% slower: the hook must leave unrelated bindings alone), for the
//!   first process of a container (it creates the shared ledger file) and for a process
//!   joining one (the file exists);
//! - (d) resident bytes per live allocation in the hook's tracker, and the hook's own resident
//!   size.
//!
//! Timing happens inside the fixtures: thread CPU time and wall time around the loop
//! (`clock_gettime`), and for start-up the CPU time (`wait4` rusage) and wall time of the whole
//! process, taken by the small `cputime` launcher. Verdicts use CPU time, which the load of a
//! shared machine barely moves; wall figures are printed beside them. "noise" is half the
//! interquartile range of the plain runs: a difference below it means nothing, and the report
//! says so. Set `HOOKBENCH_QUICK=1` for a fast smoke run.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

const LIMIT: &str = "8g";
const LIMIT_BYTES: u64 = 8 << 30;
const VRAM: u64 = 16 << 30;

struct Bench {
    work: PathBuf,
    hook: PathBuf,
    hipsim_dir: PathBuf,
    quick: bool,
}

fn main() {
    let bench = match Bench::prepare() {
        Ok(b) => b,
        Err(e) => {
            eprintln!("hookbench: {e}");
            std::process::exit(1);
        }
    };
    println!("hookbench: hook {}", bench.hook.display());
    println!(
        "hookbench: simulated runtime {}/libamdhip64.so",
        bench.hipsim_dir.display()
    );
    println!(
        "hookbench: plain = no LD_AUDIT; hooked = LD_AUDIT with HIP_DEVICE_MEMORY_LIMIT={LIMIT}; \
         medians of alternating runs\n"
    );
    let started = Instant::now();
    // Sections to run: all by default, or those named on the command line.
    let wanted: Vec<String> = std::env::args().skip(1).collect();
    for name in &wanted {
        if !["hot", "startup", "memory"].contains(&name.as_str()) {
            eprintln!("hookbench: unknown section {name:?} (hot, startup, memory)");
            std::process::exit(2);
        }
    }
    let run = |name: &str| wanted.is_empty() || wanted.iter().any(|w| w == name);
    let result = (if run("hot") {
        bench.hot_paths()
    } else {
        Ok(())
    })
    .and_then(|_| {
        if run("startup") {
            bench.startup()
        } else {
            Ok(())
        }
    })
    .and_then(|_| {
        if run("memory") {
            bench.memory()
        } else {
            Ok(())
        }
    });
    if let Err(e) = result {
        eprintln!("hookbench: {e}");
        std::process::exit(1);
    }
    println!(
        "\nhookbench: done in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// Which start-up comparison to run.
#[derive(Clone, Copy)]
enum Variant<'a> {
    /// The hooked process creates the ledger file (the first process of a container).
    First,
    /// The hooked process finds the ledger file (a process joining a container).
    Join,
    /// Not the hook but this audit module, without any limit.
    NullModule(&'a Path),
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "PASS"
    } else {
        "MISS"
    }
}

/// One measurement: wall time and CPU time (same unit).
#[derive(Clone, Copy, Debug)]
struct Timing {
    wall: f64,
    cpu: f64,
}

/// Medians of plain and hooked runs, and the noise of the plain ones.
#[derive(Debug)]
struct Comparison {
    plain: Timing,
    hooked: Timing,
    cpu_noise: f64,
}

impl Comparison {
    fn new(plain: &[Timing], hooked: &[Timing]) -> Comparison {
        let pick = |v: &[Timing], f: fn(&Timing) -> f64| -> Vec<f64> { v.iter().map(f).collect() };
        let (mut pw, mut pc) = (pick(plain, |t| t.wall), pick(plain, |t| t.cpu));
        let (mut hw, mut hc) = (pick(hooked, |t| t.wall), pick(hooked, |t| t.cpu));
        Comparison {
            plain: Timing {
                wall: median(&mut pw),
                cpu: median(&mut pc),
            },
            hooked: Timing {
                wall: median(&mut hw),
                cpu: median(&mut hc),
            },
            cpu_noise: noise(&mut pc),
        }
    }

    fn added_cpu(&self) -> f64 {
        self.hooked.cpu - self.plain.cpu
    }

    /// The added CPU time, but never less than the noise: a figure below the noise is not
    /// known to be smaller than it, so a target derived from it must not be either.
    fn added_cpu_resolved(&self) -> f64 {
        self.added_cpu().max(self.cpu_noise)
    }

    /// One report line; the verdict compares the added CPU time with `target`.
    fn print(&self, label: &str, unit: &str, target: f64) {
        let added = self.added_cpu();
        let within_noise = added.abs() < self.cpu_noise;
        println!(
            "{label}: CPU plain {:9.1} hooked {:9.1} added {added:8.1} {unit} (noise +-{:.1}) \
             | wall added {:8.1} {unit} | target <= {target:.1} {unit}  {}",
            self.plain.cpu,
            self.hooked.cpu,
            self.cpu_noise,
            self.hooked.wall - self.plain.wall,
            verdict(added <= target),
        );
        if within_noise {
            println!("    ^ the difference is within the run-to-run noise: not resolved");
        }
    }
}

/// Half the interquartile range: the run-to-run noise a difference must beat to mean anything.
fn noise(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).expect("no NaN timings"));
    let q = |f: f64| v[((v.len() - 1) as f64 * f).round() as usize];
    (q(0.75) - q(0.25)) / 2.0
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).expect("no NaN timings"));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

impl Bench {
    /// Builds the hook and the simulator for this profile, and compiles the fixtures.
    fn prepare() -> Result<Bench, String> {
        let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
        let profile_dir = exe
            .parent()
            .ok_or("binary has no parent directory")?
            .to_path_buf();
        let release = profile_dir.file_name().is_some_and(|n| n == "release");
        let hook = profile_dir.join("libamvgpu.so");
        let hipsim_dir = profile_dir.clone();
        // `cargo run` sets CARGO; build the two libraries the bench loads (a no-op when fresh).
        if let Some(cargo) = std::env::var_os("CARGO") {
            let mut build = Command::new(cargo);
            build.args(["build", "-p", "libamvgpu", "-p", "hipsim"]);
            if release {
                build.arg("--release");
            }
            let status = build
                .status()
                .map_err(|e| format!("run cargo build: {e}"))?;
            if !status.success() {
                return Err("cargo build -p libamvgpu -p hipsim failed".into());
            }
        }
        for needed in [hook.clone(), hipsim_dir.join("libamdhip64.so")] {
            if !needed.is_file() {
                return Err(format!(
                    "{} missing: run `cargo build{} -p libamvgpu -p hipsim`",
                    needed.display(),
                    if release { " --release" } else { "" }
                ));
            }
        }
        let work = profile_dir.join("hookbench-work");
        std::fs::create_dir_all(&work).map_err(|e| format!("create {}: {e}", work.display()))?;
        let quick = std::env::var_os("HOOKBENCH_QUICK").is_some();
        Ok(Bench {
            work,
            hook,
            hipsim_dir,
            quick,
        })
    }

    fn fixture_src(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("hook")
            .join(format!("{name}.c"))
    }

    /// `cc` with the simulated runtime on the link line and in the rpath.
    fn cc(&self, sources: &[&Path], out: &Path, extra: &[&str]) -> Result<(), String> {
        let output = Command::new("cc")
            .args(["-O2", "-D__HIP_PLATFORM_AMD__"])
            .args(sources)
            .arg("-o")
            .arg(out)
            .args(extra)
            .arg(format!("-L{}", self.hipsim_dir.display()))
            .arg(format!("-Wl,-rpath,{}", self.hipsim_dir.display()))
            .args(["-lamdhip64", "-lpthread"])
            .output()
            .map_err(|e| format!("run cc: {e}"))?;
        if output.status.success() {
            Ok(())
        } else {
            Err(format!(
                "cc {:?} failed:\n{}",
                sources,
                String::from_utf8_lossy(&output.stderr)
            ))
        }
    }

    fn compile_fixture(&self, name: &str) -> Result<PathBuf, String> {
        let out = self.work.join(name);
        self.cc(&[&Self::fixture_src(name)], &out, &[])?;
        Ok(out)
    }

    /// The environment of one run: a private ledger and simulator state, and the hook if asked.
    fn command(&self, exe: &Path, hooked: bool, tag: &str) -> Command {
        let state_dir = self.work.join(format!(
            "state-{tag}-{}",
            if hooked { "hooked" } else { "plain" }
        ));
        let _ = std::fs::remove_dir_all(&state_dir);
        let _ = std::fs::create_dir_all(&state_dir);
        let mut cmd = Command::new(exe);
        cmd.env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HIPSIM_DEVICES", "1")
            .env("HIPSIM_VRAM", VRAM.to_string())
            .env("HIPSIM_STATE", state_dir.join("hipsim-state"))
            .env("HIP_DEVICE_MEMORY_SHARED_CACHE", state_dir.join("ledger"));
        if hooked {
            cmd.env("LD_AUDIT", &self.hook)
                .env("HIP_DEVICE_MEMORY_LIMIT", LIMIT);
        }
        cmd
    }

    fn run(&self, cmd: &mut Command, what: &str) -> Result<String, String> {
        let out = cmd
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("{what}: spawn: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "{what}: {:?}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// One hotloop run: (wall, thread CPU) ns per iteration, averaged over its threads. Checks
    /// that the hook was really in the path (hipMemGetInfo's total is the limit only under it).
    fn hotloop(
        &self,
        exe: &Path,
        mode: &str,
        iters: u64,
        threads: u32,
        hooked: bool,
    ) -> Result<Timing, String> {
        let what = format!(
            "hotloop {mode} x{threads} ({})",
            if hooked { "hooked" } else { "plain" }
        );
        let mut cmd = self.command(exe, hooked, "hot");
        cmd.args([mode, &iters.to_string(), &threads.to_string()]);
        let out = self.run(&mut cmd, &what)?;
        let mut total = None;
        let mut per_thread = Vec::new();
        for line in out.lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            match fields.as_slice() {
                ["total", v] => total = v.parse::<u64>().ok(),
                ["ns", wall, cpu] => {
                    let parse = |v: &str| v.parse::<f64>().map_err(|e| format!("{what}: {e}"));
                    per_thread.push(Timing {
                        wall: parse(wall)?,
                        cpu: parse(cpu)?,
                    });
                }
                _ => {}
            }
        }
        let expected_total = if hooked { LIMIT_BYTES } else { VRAM };
        if total != Some(expected_total) {
            return Err(format!(
                "{what}: hipMemGetInfo total {total:?}, expected {expected_total}: \
                 the hook is {} in the path",
                if hooked { "not" } else { "unexpectedly" }
            ));
        }
        if per_thread.len() != threads as usize {
            return Err(format!("{what}: expected {threads} timings, got {out:?}"));
        }
        let n = per_thread.len() as f64;
        Ok(Timing {
            wall: per_thread.iter().map(|t| t.wall).sum::<f64>() / n,
            cpu: per_thread.iter().map(|t| t.cpu).sum::<f64>() / n,
        })
    }

    /// Runs `measure(hooked)` alternately without and with the hook, `rounds` times each.
    fn side_by_side(
        &self,
        rounds: usize,
        mut measure: impl FnMut(bool) -> Result<Timing, String>,
    ) -> Result<Comparison, String> {
        let mut plain = Vec::new();
        let mut hooked = Vec::new();
        for _ in 0..rounds {
            plain.push(measure(false)?);
            hooked.push(measure(true)?);
        }
        Ok(Comparison::new(&plain, &hooked))
    }

    /// (a) and (b).
    fn hot_paths(&self) -> Result<(), String> {
        let exe = self.compile_fixture("hotloop")?;
        let rounds = if self.quick { 3 } else { 15 };
        let pair_iters = if self.quick { 5_000 } else { 50_000 };
        let query_iters = if self.quick { 50_000 } else { 500_000 };

        let one = self.side_by_side(rounds, |h| self.hotloop(&exe, "pair", pair_iters, 1, h))?;
        let two = self.side_by_side(rounds, |h| self.hotloop(&exe, "pair", pair_iters, 2, h))?;
        one.print("(a) hipMalloc+hipFree, 1 thread ", "ns", 60.0);
        two.print(
            "(a) hipMalloc+hipFree, 2 threads",
            "ns",
            2.0 * one.added_cpu_resolved(),
        );
        println!(
            "    (2-thread target: per-thread added CPU <= 2 x the 1-thread figure, taken as \
             max(added, noise) = {:.1} ns)",
            one.added_cpu_resolved()
        );
        for (mode, name) in [
            ("props", "(b) hipGetDevicePropertiesR0600"),
            ("meminfo", "(b) hipMemGetInfo              "),
        ] {
            let c = self.side_by_side(rounds, |h| self.hotloop(&exe, mode, query_iters, 1, h))?;
            c.print(name, "ns", 30.0);
        }
        Ok(())
    }

    /// Builds (once) a library of `functions` tiny functions and a program calling each once,
    /// linked lazily and with `-z now`. Generated as assembly: `as` takes well under a second
    /// for what takes cc a minute.
    fn build_bindmany(&self, functions: usize) -> Result<(PathBuf, PathBuf), String> {
        let lib_s = self.work.join(format!("bindmany{functions}_lib.S"));
        let calls_s = self.work.join(format!("bindmany{functions}_calls.S"));
        let main_c = self.work.join("bindmany_main.c");
        let lib = self.work.join(format!("libbindmany{functions}.so"));
        let lazy = self.work.join(format!("bindmany{functions}_lazy"));
        let now = self.work.join(format!("bindmany{functions}_now"));
        if lib.is_file() && lazy.is_file() && now.is_file() {
            return Ok((lazy, now));
        }
        let mut lib_src = String::from("    .text\n");
        let mut calls_src = String::from(
            "    .text\n    .globl bindmany_call_all\n    .type bindmany_call_all,@function\n\
             bindmany_call_all:\n    push %rbx\n    xor %ebx, %ebx\n",
        );
        for i in 0..functions {
            lib_src.push_str(&format!(
                "    .globl bindmany_{i}\n    .type bindmany_{i},@function\nbindmany_{i}:\n\
                 \x20   lea {i}(%rdi), %eax\n    ret\n"
            ));
            calls_src.push_str(&format!(
                "    mov $1, %edi\n    call bindmany_{i}@PLT\n    add %eax, %ebx\n"
            ));
        }
        lib_src.push_str("    .section .note.GNU-stack,\"\",@progbits\n");
        calls_src.push_str(
            "    mov %ebx, %eax\n    pop %rbx\n    ret\n    .section .note.GNU-stack,\"\",@progbits\n",
        );
        let write = |path: &Path, text: &str| {
            std::fs::write(path, text).map_err(|e| format!("write {}: {e}", path.display()))
        };
        write(&lib_s, &lib_src)?;
        write(&calls_s, &calls_src)?;
        write(
            &main_c,
            "#include <hip/hip_runtime_api.h>\n#include <stdio.h>\n\
             int bindmany_call_all(void);\n\
             int main(void) {\n\
             \x20 int count = 0;\n\
             \x20 void *p = 0;\n\
             \x20 if (hipGetDeviceCount(&count) != hipSuccess) return 1;\n\
             \x20 if (hipMalloc(&p, 4096) != hipSuccess || hipFree(p) != hipSuccess) return 1;\n\
             \x20 printf(\"%d\\n\", bindmany_call_all());\n\
             \x20 return 0;\n}\n",
        )?;
        let out = Command::new("cc")
            .args(["-shared", "-fPIC"])
            .arg(&lib_s)
            .arg("-o")
            .arg(&lib)
            .output()
            .map_err(|e| format!("run cc: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "building {}: {}",
                lib.display(),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let rpath = format!("-Wl,-rpath,{}", self.work.display());
        let link = format!("-L{}", self.work.display());
        let lib_flag = format!("-lbindmany{functions}");
        for (exe, extra) in [(&lazy, vec![]), (&now, vec!["-Wl,-z,now"])] {
            let mut args = vec![link.as_str(), rpath.as_str(), lib_flag.as_str()];
            args.extend(extra);
            self.cc(&[&main_c, &calls_s], exe, &args)?;
        }
        Ok((lazy, now))
    }

    /// Whole-process CPU and wall time (ms) of `exe`, plain vs hooked, through `cputime`.
    fn startup_runs(
        &self,
        cputime: &Path,
        exe: &Path,
        bind_now: bool,
        functions: usize,
        runs: usize,
        variant: Variant,
    ) -> Result<Comparison, String> {
        // every function called once: the sum of (1 + i)
        let expected = (functions * (functions + 1) / 2).to_string();
        // Join: the hooked process finds the container's ledger file already there (made by
        // a first process), as every process but the first of a container does.
        let shared = self.work.join("startup-join-ledger");
        self.side_by_side(runs, |hooked| {
            let mut cmd;
            match variant {
                Variant::First => cmd = self.command(cputime, hooked, "startup"),
                Variant::Join => {
                    cmd = self.command(cputime, hooked, "startup");
                    if hooked {
                        cmd.env("HIP_DEVICE_MEMORY_SHARED_CACHE", &shared);
                    }
                }
                Variant::NullModule(module) => {
                    cmd = self.command(cputime, false, "startup");
                    if hooked {
                        cmd.env("LD_AUDIT", module);
                    }
                }
            }
            cmd.arg(exe);
            if bind_now {
                cmd.env("LD_BIND_NOW", "1");
            }
            let out = self.run(&mut cmd, "bindmany")?;
            let mut lines = out.lines();
            if lines.next() != Some(expected.as_str()) {
                return Err(format!(
                    "bindmany printed {out:?}, expected {expected} first"
                ));
            }
            let fields: Vec<&str> = lines.next().unwrap_or("").split_whitespace().collect();
            match fields.as_slice() {
                ["cputime", cpu, wall] => Ok(Timing {
                    cpu: cpu.parse::<f64>().map_err(|e| format!("cputime: {e}"))? / 1e3,
                    wall: wall.parse::<f64>().map_err(|e| format!("cputime: {e}"))? / 1e3,
                }),
                _ => Err(format!("cputime printed {out:?}")),
            }
        })
    }

    /// (c) Start-up of a program binding 20,000 functions of a generated library, plain vs
    /// hooked, lazily and with `-z now`; and, to tell the hook's fixed start-up cost from a
    /// per-binding one, the same program binding none.
    fn startup(&self) -> Result<(), String> {
        const FUNCTIONS: usize = 20_000;
        // The program runs under `cputime`, which reports its CPU time (wait4's rusage) and
        // wall time; CPU time is the verdict because it hardly moves with the machine's load.
        let cputime = self.work.join("cputime");
        if !cputime.is_file() {
            let out = Command::new("cc")
                .args(["-O2"])
                .arg(Self::fixture_src("cputime"))
                .arg("-o")
                .arg(&cputime)
                .output()
                .map_err(|e| format!("run cc: {e}"))?;
            if !out.status.success() {
                return Err(format!(
                    "building cputime: {}",
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
        }
        let runs = if self.quick { 5 } else { 41 };
        let many = self.build_bindmany(FUNCTIONS)?;
        let none = self.build_bindmany(0)?;
        for (bind_now, label) in [(false, "lazy  "), (true, "-z now")] {
            let pick = |pair: &(PathBuf, PathBuf)| {
                if bind_now {
                    pair.1.clone()
                } else {
                    pair.0.clone()
                }
            };
            let pct = |h: f64, p: f64| (h / p - 1.0) * 100.0;
            for (variant, who) in [
                (Variant::First, "first process "),
                (Variant::Join, "joining process"),
            ] {
                let c =
                    self.startup_runs(&cputime, &pick(&many), bind_now, FUNCTIONS, runs, variant)?;
                let base = self.startup_runs(&cputime, &pick(&none), bind_now, 0, runs, variant)?;
                let cpu_pct = pct(c.hooked.cpu, c.plain.cpu);
                println!(
                    "(c) start-up, {FUNCTIONS} bindings {label}, {who}: CPU plain {:6.2} ms \
                     hooked {:6.2} ms {cpu_pct:+6.1}% (noise +-{:.1}%) | wall {:+6.1}% | \
                     target <= +5%  {}",
                    c.plain.cpu,
                    c.hooked.cpu,
                    c.cpu_noise / c.plain.cpu * 100.0,
                    pct(c.hooked.wall, c.plain.wall),
                    verdict(cpu_pct <= 5.0)
                );
                let fixed = base.added_cpu();
                let per_binding_ns = (c.added_cpu() - fixed) / FUNCTIONS as f64 * 1e6;
                println!(
                    "    hook's fixed start-up cost (same program, no extra bindings) \
                     {fixed:+.2} ms CPU; per unrelated binding {per_binding_ns:+.1} ns"
                );
            }
        }
        self.startup_floor(&cputime, &none.0, runs)?;
        Ok(())
    }

    /// For scale: what the smallest audit module that uses libc (`hook/nullaudit.c`) adds to
    /// the start-up of the same program without extra bindings.
    fn startup_floor(&self, cputime: &Path, program: &Path, runs: usize) -> Result<(), String> {
        let module = self.work.join("libnullaudit.so");
        let out = Command::new("cc")
            .args(["-O2", "-shared", "-fPIC"])
            .arg(Self::fixture_src("nullaudit"))
            .arg("-o")
            .arg(&module)
            .output()
            .map_err(|e| format!("run cc: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "building nullaudit: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let c = self.startup_runs(
            cputime,
            program,
            false,
            0,
            runs,
            Variant::NullModule(&module),
        )?;
        println!(
            "    for scale: an audit module that only uses libc (hook/nullaudit.c) adds {:+.2} ms \
             CPU to the same program (noise +-{:.2} ms)   report",
            c.added_cpu(),
            c.cpu_noise
        );
        Ok(())
    }

    /// (d) Resident memory of the tracker per live allocation, and of the library itself.
    fn memory(&self) -> Result<(), String> {
        let exe = self.compile_fixture("holdmany")?;
        let n: u64 = if self.quick { 50_000 } else { 200_000 };
        let read = |hooked: bool| -> Result<(i64, i64), String> {
            let mut cmd = self.command(&exe, hooked, "memory");
            cmd.arg(n.to_string());
            let out = self.run(&mut cmd, "holdmany")?;
            let field = |name: &str| -> Result<i64, String> {
                out.lines()
                    .find_map(|l| l.strip_prefix(name).map(|v| v.trim().parse::<i64>()))
                    .ok_or(format!("holdmany printed no {name}: {out:?}"))?
                    .map_err(|e| format!("holdmany {name}: {e}"))
            };
            Ok((field("rss_delta")?, field("hook_rss")?))
        };
        let mut per_alloc = Vec::new();
        let mut hook_rss = 0;
        for _ in 0..if self.quick { 1 } else { 2 } {
            let (plain_delta, _) = read(false)?;
            let (hooked_delta, rss) = read(true)?;
            per_alloc.push((hooked_delta - plain_delta) as f64 / n as f64);
            hook_rss = rss;
        }
        let per = median(&mut per_alloc);
        println!(
            "(d) tracker: {n} live allocations cost {per:.1} bytes each in resident memory (hooked - plain)   report"
        );
        println!(
            "(d) libamvgpu.so resident after that run: {:.1} KiB                                  report",
            hook_rss as f64 / 1024.0
        );

        Ok(())
    }
}
