//! `amvgpu run`: book a slice, describe it to the command through its environment, and
//! become the command.
//!
//! Why exec rather than a supervising parent: the job's liveness is then exactly the
//! command's liveness. Its record is keyed to its own (pid, start time), which `exec` keeps,
//! so the slice is free the moment the command's process is gone, also after SIGKILL. A
//! supervisor would add a second process that can die separately: killed with SIGKILL it
//! would leave the command running with a slice the ledger thinks is free (or, keyed to the
//! child, a supervisor with nothing to supervise); it would also have to forward every
//! signal and translate exit statuses, and it would sit in every process tree and
//! `ps` listing. The cost of exec: nothing runs after the command to clean up, so the next
//! `amvgpu run` deletes dead records instead (see `state`). Known limit: a command that
//! daemonizes (its children outlive it) loses its slice when the parent exits.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;

use crate::cli::RunArgs;
use crate::gpus::{self, GpuInfo, Topology};
use crate::locate;
use crate::procfs;
use crate::size;
use crate::slices::{self, Refusal};
use crate::state::{JobDevice, JobRecord, StateDir, RECORD_VERSION};
use crate::Failure;

/// What one GPU of the job gets, before it is written down.
#[derive(Debug)]
struct Planned {
    gpu: GpuInfo,
    local_index: u32,
    memory_limit: Option<u64>,
    cus: Option<(String, u32)>,
}

/// Runs the command in a new slice; returns only on failure.
pub fn run(args: RunArgs, state: &StateDir, verbose: bool) -> Failure {
    let env = |key: &str| std::env::var(key).ok();
    let topology = match gpus::discover(&env) {
        Ok(t) => t,
        Err(e) => return Failure::environment(format!("cannot read the GPUs: {e}")),
    };
    let exe_dir = locate::exe_dir();
    let hook = match locate::find(locate::HOOK_LIB, args.lib.as_deref(), exe_dir.as_deref()) {
        Ok(path) => path,
        Err(e) => {
            let flag_hint = if args.lib.is_some() { "--lib: " } else { "" };
            return Failure::environment(format!("{flag_hint}{e}"));
        }
    };
    let mut plan = match plan_devices(&args, &topology) {
        Ok(plan) => plan,
        Err(failure) => return failure,
    };
    let key = match procfs::own_key() {
        Ok(key) => key,
        Err(e) => return Failure::environment(format!("cannot identify this process: {e}")),
    };
    if verbose {
        eprintln!("amvgpu: GPUs from {}", topology.description);
        eprintln!("amvgpu: hook {}", hook.display());
        eprintln!("amvgpu: state directory {}", state.root().display());
    }

    let record = {
        let locked = match state.lock() {
            Ok(locked) => locked,
            Err(e) => return Failure::environment(e.to_string()),
        };
        match locked.reclaim_dead() {
            Ok(reclaimed) if verbose && !reclaimed.is_empty() => {
                eprintln!(
                    "amvgpu: reclaimed the slices of {} ended job(s)",
                    reclaimed.len()
                )
            }
            Ok(_) => {}
            Err(e) => return Failure::environment(e.to_string()),
        }
        let records = match locked.records() {
            Ok(records) => records,
            Err(e) => return Failure::environment(e.to_string()),
        };
        let mut live = Vec::new();
        for rec in records {
            match rec {
                Ok(rec) => live.push(rec),
                // A damaged record of a live process may hold CUs; guessing could overlap.
                Err(e) => {
                    return Failure::environment(format!(
                        "{e}\n(its process still runs; remove the file once it has ended)"
                    ))
                }
            }
        }
        if let Err(failure) = choose_cus(&args, &mut plan, &live) {
            return failure;
        }
        let record = JobRecord {
            version: RECORD_VERSION,
            pid: key.pid,
            start_time: key.start_time,
            command: args.command.clone(),
            ledger: state.ledger_path(key),
            topology_source: topology.source,
            devices: plan
                .iter()
                .map(|p| JobDevice {
                    host_index: p.gpu.host_index,
                    local_index: p.local_index,
                    uuid: p.gpu.uuid.clone(),
                    arch: p.gpu.arch.clone(),
                    total_cus: p.gpu.compute_units,
                    cus: p.cus.as_ref().map(|(list, _)| list.clone()),
                    cu_count: p.cus.as_ref().map_or(0, |(_, n)| *n),
                    memory_limit: p.memory_limit,
                })
                .collect(),
        };
        if let Err(e) = locked.write_record(&record) {
            return Failure::environment(e.to_string());
        }
        record
        // The lock is released here: it must not be held by (or leak into) the command.
    };

    let entries: Vec<(u32, &str, u32)> = record
        .devices
        .iter()
        .filter_map(|d| Some((d.local_index, d.cus.as_deref()?, d.total_cus)))
        .collect();
    let mask = if entries.is_empty() {
        None
    } else {
        match slices::hsa_cu_mask(&entries) {
            Ok(mask) => Some(mask),
            Err(e) => {
                if let Ok(locked) = state.lock() {
                    let _ = locked.remove_record(key);
                }
                return Failure::environment(e);
            }
        }
    };
    let mut command = Command::new(&args.command[0]);
    command.args(&args.command[1..]);
    for (name, value) in job_environment(&record, &hook, mask, verbose) {
        match value {
            Some(value) => command.env(name, value),
            None => command.env_remove(name),
        };
    }
    let err = command.exec();
    // Still amvgpu: the command never started, so its slice must not outlive this process.
    if let Ok(locked) = state.lock() {
        let _ = locked.remove_record(key);
    }
    let code = if err.kind() == io::ErrorKind::NotFound {
        127
    } else {
        126
    };
    Failure {
        code,
        message: format!("cannot start \"{}\": {err}", args.command[0]),
    }
}

fn plan_devices(args: &RunArgs, topology: &Topology) -> Result<Vec<Planned>, Failure> {
    let mut plan = Vec::new();
    for (local_index, &host_index) in args.gpu.0.iter().enumerate() {
        let Some(gpu) = topology.gpus.iter().find(|g| g.host_index == host_index) else {
            let have = match topology.gpus.len() {
                0 => "no GPUs".to_string(),
                1 => "one GPU (0)".to_string(),
                n => format!("GPUs 0..{}", n - 1),
            };
            return Err(Failure::usage(format!(
                "--gpu {host_index}: no such GPU; this host has {have} according to {}",
                topology.description
            )));
        };
        let memory_limit = match (args.memory, args.memory_percent) {
            (Some(bytes), _) => Some(bytes),
            (None, Some(percent)) => {
                let Some(vram) = gpu.vram_bytes else {
                    return Err(Failure::environment(format!(
                        "--memory-percent {percent}: the VRAM size of GPU {host_index} is \
                         unknown ({}); use --memory SIZE instead, e.g. --memory 16G",
                        topology.description
                    )));
                };
                // u128: VRAM times a percentage can exceed 64 bits only in theory, but cheaply.
                // Whole MiB, the unit of HAMi's gpumem and the plugin's variable.
                let bytes = (u128::from(vram) * u128::from(percent) / 100) as u64;
                Some(bytes & !((1 << 20) - 1))
                    .filter(|&b| b > 0)
                    .or(Some(bytes))
            }
            (None, None) => None,
        };
        plan.push(Planned {
            gpu: gpu.clone(),
            local_index: local_index as u32,
            memory_limit,
            cus: None,
        });
    }
    Ok(plan)
}

/// Picks disjoint CUs on every requested GPU, or explains which GPU is full.
fn choose_cus(args: &RunArgs, plan: &mut [Planned], live: &[JobRecord]) -> Result<(), Failure> {
    let Some(percent) = args.cores else {
        return Ok(());
    };
    let holders_of = |host_index: u32| -> Vec<(&JobRecord, &JobDevice)> {
        live.iter()
            .flat_map(|rec| rec.devices.iter().map(move |d| (rec, d)))
            .filter(|(_, d)| d.host_index == host_index && d.cus.is_some())
            .collect()
    };
    let requests: Vec<slices::Request<'_>> = plan
        .iter()
        .map(|p| slices::Request {
            host_index: p.gpu.host_index,
            arch: &p.gpu.arch,
            total_cus: p.gpu.compute_units,
            taken_lists: holders_of(p.gpu.host_index)
                .iter()
                .filter_map(|(_, d)| d.cus.as_deref())
                .collect(),
            percent,
        })
        .collect();
    match slices::allocate(&requests) {
        Ok(sets) => {
            for (planned, set) in plan.iter_mut().zip(sets) {
                planned.cus = Some((set.to_string(), set.len() as u32));
            }
            Ok(())
        }
        Err(Refusal::DoesNotFit {
            host_index,
            percent,
            booked,
            requested,
            free,
            detail,
        }) => {
            let gpu = &plan
                .iter()
                .find(|p| p.gpu.host_index == host_index)
                .expect("refusal names a requested GPU")
                .gpu;
            let rounded = if requested == booked {
                String::new()
            } else {
                format!(
                    " ({requested} after rounding to what {} can mask)",
                    gpu.arch
                )
            };
            let xcd_note = if detail.contains("XCD") {
                format!(" ({detail})")
            } else {
                String::new()
            };
            let mut message = format!(
                "GPU {host_index} ({}, {} CUs): does not fit: --cores {percent} needs \
                 {booked} CUs{rounded}, {free} are free{xcd_note}; nothing was started",
                gpu.arch, gpu.compute_units
            );
            let holders = holders_of(host_index);
            if !holders.is_empty() {
                message.push_str("\nheld by:");
                for (rec, dev) in holders {
                    message.push_str(&format!(
                        "\n  pid {}: CUs {} ({})",
                        rec.pid,
                        dev.cus.as_deref().unwrap_or("-"),
                        rec.command.join(" ")
                    ));
                }
            }
            Err(Failure::does_not_fit(message))
        }
        Err(Refusal::Broken(message)) => Err(Failure::environment(message)),
    }
}

/// The variables to set (`Some`) or remove (`None`) for the command.
fn job_environment(
    record: &JobRecord,
    hook: &std::path::Path,
    mask: Option<String>,
    verbose: bool,
) -> BTreeMap<OsString, Option<OsString>> {
    let mut env: BTreeMap<OsString, Option<OsString>> = BTreeMap::new();

    let audit = match std::env::var_os("LD_AUDIT").filter(|v| !v.is_empty()) {
        Some(existing) => {
            let mut joined = hook.as_os_str().to_owned();
            joined.push(":");
            joined.push(existing);
            joined
        }
        None => hook.as_os_str().to_owned(),
    };
    env.insert("LD_AUDIT".into(), Some(audit));

    // Indices the command sees must be exactly the --gpu list in order, or the per-index
    // limits and masks below would land on the wrong GPUs.
    for name in [
        "HIP_VISIBLE_DEVICES",
        "CUDA_VISIBLE_DEVICES",
        "GPU_DEVICE_ORDINAL",
    ] {
        if std::env::var_os(name).is_some() {
            eprintln!(
                "amvgpu: removing inherited {name}: --gpu decides which GPUs the command sees"
            );
            env.insert(name.into(), None);
        }
    }
    let visible: Vec<String> = record
        .devices
        .iter()
        .map(|d| d.host_index.to_string())
        .collect();
    env.insert(
        "ROCR_VISIBLE_DEVICES".into(),
        Some(visible.join(",").into()),
    );

    let limits: Vec<(u32, u64)> = record
        .devices
        .iter()
        .filter_map(|d| Some((d.local_index, d.memory_limit?)))
        .collect();
    if !limits.is_empty() {
        for (name, _) in std::env::vars_os() {
            if name
                .to_str()
                .is_some_and(|n| n.starts_with("HIP_DEVICE_MEMORY_LIMIT"))
            {
                env.insert(name, None);
            }
        }
        for &(local, bytes) in &limits {
            env.insert(
                format!("HIP_DEVICE_MEMORY_LIMIT_{local}").into(),
                Some(size::limit_env_value(bytes).into()),
            );
        }
        // For readers of the plugin's single variable; per-device values win in the hook.
        let smallest = limits.iter().map(|&(_, b)| b).min().unwrap_or(0);
        env.insert(
            "HIP_DEVICE_MEMORY_LIMIT".into(),
            Some(size::limit_env_value(smallest).into()),
        );
    }
    env.insert(
        "HIP_DEVICE_MEMORY_SHARED_CACHE".into(),
        Some(record.ledger.clone().into_os_string()),
    );

    if let Some(mask) = mask {
        env.insert("HSA_CU_MASK".into(), Some(mask.into()));
    }
    if verbose {
        for (name, value) in &env {
            match value {
                Some(value) => eprintln!(
                    "amvgpu: {}={}",
                    name.to_string_lossy(),
                    value.to_string_lossy()
                ),
                None => eprintln!("amvgpu: unset {}", name.to_string_lossy()),
            }
        }
    }
    env
}
