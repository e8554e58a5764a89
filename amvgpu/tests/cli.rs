//! `amvgpu` as users run it: real jobs under the real hook on the simulated runtime.
//! Jobs are held open by a pipe (the command reads its stdin), never by sleeping.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Stdio;

use common::{gpu0_set, gpu_set, text, World, WORKLOAD};

const HOLD_MASK: &[&str] = &["sh", "-c", "echo \"$HSA_CU_MASK\"; read x || true"];

#[test]
fn two_concurrent_quarter_jobs_get_disjoint_masks() {
    let world = World::new();
    let mut a = world.start(&["--cores", "25"], HOLD_MASK);
    let mut b = world.start(&["--cores", "25"], HOLD_MASK);
    let (mask_a, mask_b) = (a.line(), b.line());
    let (set_a, set_b) = (gpu0_set(&mask_a), gpu0_set(&mask_b));
    assert!(!set_a.is_empty() && !set_b.is_empty());
    assert!(
        set_a.is_disjoint(&set_b),
        "overlapping slices: {mask_a} and {mask_b}"
    );
    // 25% of 304 CUs is 76, which gfx942 can mask only as 72 (9 on each of 8 XCDs).
    assert_eq!(set_a.len(), 72);

    let status = world.status_json();
    let jobs = status["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 2, "{status:#}");
    let mut listed: Vec<String> = jobs
        .iter()
        .map(|j| format!("0:{}", j["devices"][0]["cus"].as_str().unwrap()))
        .collect();
    listed.sort();
    let mut printed = vec![mask_a, mask_b];
    printed.sort();
    assert_eq!(listed, printed, "status shows the masks the jobs got");
    assert_eq!(status["gpu_source"], "hipsim");

    assert_eq!(a.finish(), Some(0));
    assert_eq!(b.finish(), Some(0));
    assert_eq!(world.status_json()["jobs"].as_array().unwrap().len(), 0);
}

#[test]
fn a_job_killed_with_sigkill_frees_its_slice_for_the_next() {
    let world = World::new();
    let mut jobs = Vec::new();
    let mut sets = Vec::new();
    for _ in 0..4 {
        let mut job = world.start(&["--cores", "25"], HOLD_MASK);
        sets.push(gpu0_set(&job.line()));
        jobs.push(job);
    }
    for (i, a) in sets.iter().enumerate() {
        for b in &sets[i + 1..] {
            assert!(a.is_disjoint(b));
        }
    }

    // The GPU is full: a fifth quarter is refused before its command runs.
    let marker = world.dir.path().join("fifth-ran");
    let touch = format!("touch {}", marker.display());
    let hook = common::hook();
    let out = world.output(&[
        "run",
        "--lib",
        hook.to_str().unwrap(),
        "--cores",
        "25",
        "--",
        "sh",
        "-c",
        &touch,
    ]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains("GPU 0") && err.contains("does not fit"),
        "{err}"
    );
    assert!(
        err.contains("needs 76 CUs"),
        "says what was requested: {err}"
    );
    assert!(err.contains("0 are free") || err.contains("free"), "{err}");
    assert!(!marker.exists(), "the refused command must not run");

    // SIGKILL leaves no chance to clean up; the next run must notice the death itself.
    let mut victim = jobs.remove(1);
    victim.child.kill().unwrap();
    victim.child.wait().unwrap();
    let freed = sets[1];

    let mut next = world.start(&["--cores", "25"], HOLD_MASK);
    let got = gpu0_set(&next.line());
    assert_eq!(got, freed, "the new job gets the dead job's CUs");
    for (i, other) in sets.iter().enumerate() {
        if i != 1 {
            assert!(got.is_disjoint(other));
        }
    }
    assert_eq!(world.status_json()["jobs"].as_array().unwrap().len(), 4);
    for job in jobs {
        assert_eq!(job.finish(), Some(0));
    }
    assert_eq!(next.finish(), Some(0));
}

/// hipsimGetUsage as seen by a process outside every job, sharing the simulator's state.
fn simulator_live_bytes(world: &World) -> u64 {
    let mut probe = std::process::Command::new(WORKLOAD);
    probe.arg("usage");
    world.configure(&mut probe);
    let out = probe.output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let line = text(&out.stdout);
    line.split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("unexpected usage line {line:?}"))
}

#[test]
fn status_and_metrics_report_the_bytes_the_simulator_says_each_job_holds() {
    let world = World::new();
    const A: u64 = 96 << 20;
    const B: u64 = 160 << 20;
    let mut a = world.start(
        &["--cores", "25", "--memory", "1G"],
        &[WORKLOAD, "hold", "96M"],
    );
    let mut b = world.start(&["--memory", "512M"], &[WORKLOAD, "hold", "160M"]);
    let (held_a, _) = a.until("holding");
    let (held_b, _) = b.until("holding");
    assert_eq!(held_a, format!("holding {A}"));
    assert_eq!(held_b, format!("holding {B}"));
    assert_eq!(simulator_live_bytes(&world), A + B);

    let status = world.status_json();
    let jobs = status["jobs"].as_array().unwrap();
    let job_of = |pid: u32| {
        jobs.iter()
            .find(|j| j["pid"] == pid)
            .unwrap_or_else(|| panic!("job {pid} missing: {status:#}"))
    };
    let (ja, jb) = (job_of(a.pid()), job_of(b.pid()));
    assert_eq!(ja["devices"][0]["used_bytes"], A, "{ja:#}");
    assert_eq!(jb["devices"][0]["used_bytes"], B, "{jb:#}");
    assert_eq!(ja["devices"][0]["peak_bytes"], A);
    assert_eq!(ja["devices"][0]["memory_limit_bytes"], 1u64 << 30);
    assert_eq!(jb["devices"][0]["memory_limit_bytes"], 512u64 << 20);
    assert_eq!(
        jb["devices"][0]["cus"],
        serde_json::Value::Null,
        "no --cores, no slice"
    );
    assert_eq!(ja["processes"][0]["pid"], a.pid());
    assert!(ja["processes"][0]["command"]
        .as_str()
        .unwrap()
        .contains("amvgpu-demo-workload hold 96M"));

    let out = world.output(&["metrics"]);
    assert!(out.status.success());
    let metrics = text(&out.stdout);
    let sample = |name: &str, pid: u32| -> u64 {
        metrics
            .lines()
            .find(|l| l.starts_with(&format!("{name}{{")) && l.contains(&format!("pid=\"{pid}\"")))
            .and_then(|l| l.rsplit(' ').next()?.parse().ok())
            .unwrap_or_else(|| panic!("no {name} for pid {pid} in:\n{metrics}"))
    };
    assert_eq!(sample("hami_vgpu_memory_used_bytes", a.pid()), A);
    assert_eq!(sample("hami_vgpu_memory_used_bytes", b.pid()), B);
    assert_eq!(sample("hami_vgpu_memory_limit_bytes", a.pid()), 1 << 30);
    assert_eq!(sample("amvgpu_vgpu_compute_units", a.pid()), 72);

    let table = text(&world.output(&["status"]).stdout);
    assert!(
        table.contains("96 MiB") && table.contains("160 MiB"),
        "{table}"
    );
    assert!(table.contains(&a.pid().to_string()), "{table}");

    assert_eq!(a.finish(), Some(0));
    assert_eq!(b.finish(), Some(0));
    assert_eq!(simulator_live_bytes(&world), 0);
}

#[test]
fn the_limit_is_enforced_and_queries_show_the_slice() {
    let world = World::new();
    let mut job = world.start(&["--memory", "1G"], &[WORKLOAD, "fill", "256M"]);
    let (holding, lines) = job.until("holding");
    let all = lines.join("\n");
    assert!(all.contains("hipMemGetInfo: total 1024 MiB"), "{all}");
    assert!(
        all.contains("x 4 succeeded; the next one returned hipErrorOutOfMemory (2)"),
        "{all}"
    );
    assert_eq!(holding, format!("holding {}", 1u64 << 30));
    assert_eq!(job.finish(), Some(0));
}

#[test]
fn bad_flags_explain_themselves_and_start_nothing() {
    let world = World::new();
    let marker = world.dir.path().join("ran");
    let touch = format!("touch {}", marker.display());
    let hook = common::hook();
    let hook = hook.to_str().unwrap();
    let cases: &[(&[&str], i32, &[&str])] = &[
        (
            &["--memory", "16XB"],
            2,
            &["--memory", "unknown unit \"XB\"", "16G"],
        ),
        (&["--memory", "1.5G"], 2, &["--memory", "1536M"]),
        (&["--memory", "0"], 2, &["--memory", "missing unit"]),
        (&["--cores", "0"], 2, &["--cores", "1..100"]),
        (&["--cores", "150"], 2, &["--cores", "e.g. 25"]),
        (
            &["--memory-percent", "x"],
            2,
            &["--memory-percent", "e.g. 25"],
        ),
        (&["--gpu", "0,0"], 2, &["--gpu", "twice"]),
        (&["--gpu", "3"], 2, &["--gpu 3", "no such GPU", "one GPU"]),
        (&["--cores", "25", "--bogus"], 2, &["--bogus"]),
    ];
    for (flags, code, needles) in cases {
        let mut args = vec!["run", "--lib", hook];
        args.extend_from_slice(flags);
        args.extend_from_slice(&["--", "sh", "-c", &touch]);
        let out = world.output(&args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(*code), "{flags:?}: {err}");
        for needle in *needles {
            assert!(
                err.contains(needle),
                "{flags:?}: {needle:?} missing from:\n{err}"
            );
        }
        assert!(!marker.exists(), "{flags:?} started the command");
    }

    // An unusable hook path is an environment problem, also before anything starts.
    let out = world.output(&[
        "run",
        "--lib",
        "/nonexistent/libamvgpu.so",
        "--",
        "sh",
        "-c",
        &touch,
    ]);
    assert_eq!(out.status.code(), Some(4));
    assert!(text(&out.stderr).contains("/nonexistent/libamvgpu.so"));
    assert!(!marker.exists());
    assert_eq!(world.status_json()["jobs"].as_array().unwrap().len(), 0);
}

#[test]
fn run_becomes_the_command_exit_status_and_all() {
    let world = World::new();
    let hook = common::hook();
    let hook = hook.to_str().unwrap();
    let out = world.output(&["run", "--lib", hook, "--", "sh", "-c", "exit 7"]);
    assert_eq!(out.status.code(), Some(7));

    // The command's pid is amvgpu's: it reports the same process that `status` lists.
    let mut job = world.start(&["--cores", "25"], &["sh", "-c", "echo $$; read x || true"]);
    let pid = job.line();
    assert_eq!(pid, job.pid().to_string());
    assert_eq!(job.finish(), Some(0));

    let out = world.output(&["run", "--lib", hook, "--", "/nonexistent/command"]);
    assert_eq!(out.status.code(), Some(127));
    assert!(text(&out.stderr).contains("/nonexistent/command"));
    assert_eq!(
        world.status_json()["jobs"].as_array().unwrap().len(),
        0,
        "a command that never started leaves no slice behind"
    );
}

#[test]
fn metrics_are_served_over_http() {
    let world = World::new();
    let mut server = world
        .amvgpu(&["metrics", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(server.stderr.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut stderr, &mut line).unwrap();
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no address in {line:?}"));
    let addr = url
        .trim_start_matches("http://")
        .trim_end_matches("/metrics");

    let get = |path: &str| {
        let mut stream = TcpStream::connect(addr).unwrap();
        write!(stream, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        response
    };
    let ok = get("/metrics");
    assert!(ok.starts_with("HTTP/1.1 200 OK"), "{ok}");
    assert!(
        ok.contains("# TYPE hami_vgpu_memory_used_bytes gauge"),
        "{ok}"
    );
    assert!(ok.contains("amvgpu_gpu_compute_units_free{"), "{ok}");
    assert!(get("/other").starts_with("HTTP/1.1 404"));

    server.kill().unwrap();
    server.wait().unwrap();
}

#[test]
fn every_subcommand_has_help_with_exit_codes() {
    let world = World::new();
    for sub in ["run", "status", "metrics", "demo"] {
        let out = world.output(&[sub, "--help"]);
        assert!(out.status.success());
        let help = text(&out.stdout);
        assert!(help.contains("Exit codes"), "{sub}: {help}");
        assert!(help.contains("3    does not fit"), "{sub}: {help}");
    }
}

#[test]
fn demo_shows_every_check_passing() {
    common::libraries();
    let out = std::process::Command::new(common::AMVGPU)
        .arg("demo")
        .env_remove("LD_AUDIT")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let shown = text(&out.stdout);
    assert!(out.status.success(), "{shown}\n{}", text(&out.stderr));
    assert!(!shown.contains("FAILED"), "{shown}");
    assert_eq!(shown.matches("[ok]").count(), 7, "{shown}");
    assert!(
        shown.contains("[ok] without the hook the same workload sees the whole card"),
        "{shown}"
    );
    assert!(shown.contains("amvgpu status, while both jobs hold their memory"));
}

#[test]
fn simultaneous_runs_never_share_cus_and_the_surplus_is_refused() {
    // Six quarter jobs started at once on a GPU that holds four: the ledger lock makes
    // exactly four of them win, with disjoint slices; the other two start nothing.
    let world = World::new();
    let hook = common::hook();
    let mut jobs: Vec<_> = (0..6)
        .map(|_| {
            world
                .amvgpu(&[
                    "run",
                    "--lib",
                    hook.to_str().unwrap(),
                    "--cores",
                    "25",
                    "--",
                ])
                .args(HOLD_MASK)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut sets = Vec::new();
    let mut refused = 0;
    for job in &mut jobs {
        let mut line = String::new();
        let mut out = std::io::BufReader::new(job.stdout.as_mut().unwrap());
        if std::io::BufRead::read_line(&mut out, &mut line).unwrap() > 0 {
            sets.push(gpu0_set(line.trim_end()));
        } else {
            // No output: it must have been refused, with the documented code and reason.
            let status = job.wait().unwrap();
            let mut err = String::new();
            job.stderr
                .as_mut()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            assert_eq!(status.code(), Some(3), "{err}");
            assert!(err.contains("does not fit"), "{err}");
            refused += 1;
        }
    }
    assert_eq!((sets.len(), refused), (4, 2));
    for (i, a) in sets.iter().enumerate() {
        for b in &sets[i + 1..] {
            assert!(a.is_disjoint(b), "overlap between concurrent jobs");
        }
    }
    for mut job in jobs {
        drop(job.stdin.take());
        job.wait().unwrap();
    }
}

#[test]
fn multi_gpu_jobs_see_container_local_indices() {
    let world = World::with_devices(2);
    // Someone already holds a quarter of host GPU 1.
    let mut first = world.start(&["--gpu", "1", "--cores", "25"], HOLD_MASK);
    let first_mask = first.line();
    assert_eq!(
        gpu_set(&first_mask, 0).len(),
        72,
        "GPU 1 is index 0 for its job"
    );

    let show = "echo \"$HSA_CU_MASK|$ROCR_VISIBLE_DEVICES|$HIP_DEVICE_MEMORY_LIMIT_0|\
                $HIP_DEVICE_MEMORY_LIMIT_1\"; read x || true";
    let mut job = world.start(
        &["--gpu", "1,0", "--cores", "25", "--memory", "2G"],
        &["sh", "-c", show],
    );
    let line = job.line();
    let fields: Vec<&str> = line.split('|').collect();
    assert_eq!(fields[1], "1,0", "{line}");
    assert_eq!(fields[2], "2048m");
    assert_eq!(fields[3], "2048m");
    // Index 0 is host GPU 1, where the first job's CUs are taken.
    let on_host1 = gpu_set(fields[0], 0);
    assert!(on_host1.is_disjoint(&gpu_set(&first_mask, 0)), "{line}");
    assert_eq!(gpu_set(fields[0], 1).len(), 72);

    let status = world.status_json();
    let job_json = status["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["pid"] == job.pid())
        .unwrap()
        .clone();
    assert_eq!(job_json["devices"][0]["host_index"], 1);
    assert_eq!(job_json["devices"][0]["local_index"], 0);
    assert_eq!(job_json["devices"][1]["host_index"], 0);
    assert_eq!(status["gpus"][1]["cus_booked"], 144, "{status:#}");
    assert_eq!(job.finish(), Some(0));
    assert_eq!(first.finish(), Some(0));
}

#[test]
fn memory_percent_is_a_share_of_the_gpus_vram_and_verbose_names_the_source() {
    let world = World::new(); // HIPSIM_VRAM=64g
    let hook = common::hook();
    let out = world.output(&[
        "--verbose",
        "run",
        "--lib",
        hook.to_str().unwrap(),
        "--memory-percent",
        "25",
        "--",
        "sh",
        "-c",
        "echo $HIP_DEVICE_MEMORY_LIMIT_0 $HIP_DEVICE_MEMORY_LIMIT",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), "16384m 16384m");
    let err = text(&out.stderr);
    assert!(
        err.contains("GPUs from simulated runtime settings") && err.contains("HIPSIM_VRAM=64g"),
        "{err}"
    );
}
