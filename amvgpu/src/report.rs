//! What `status` and `metrics` show: every live job from the CU ledger, joined with the
//! bytes its processes hold according to the hook's ledger of that job.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use crate::gpus::{self, SourceKind};
use crate::procfs;
use crate::size::human;
use crate::state::{JobRecord, StateDir};
use crate::usage;

#[derive(Debug, Serialize)]
pub struct Report {
    pub state_dir: String,
    pub gpu_source: Option<SourceKind>,
    pub gpu_source_description: String,
    pub gpus: Vec<GpuReport>,
    pub jobs: Vec<JobReport>,
    /// Things that could not be read; the rest of the report is still right.
    pub problems: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct GpuReport {
    pub host_index: u32,
    pub arch: String,
    pub uuid: Option<String>,
    pub compute_units: u32,
    pub vram_bytes: Option<u64>,
    pub cus_booked: u32,
    pub cus_free: u32,
}

#[derive(Debug, Serialize)]
pub struct JobReport {
    pub id: String,
    pub pid: u32,
    pub start_time: u64,
    pub command: String,
    pub ledger: String,
    /// `ok`, `none yet` (no HIP call so far) or why it could not be read.
    pub ledger_state: String,
    pub devices: Vec<JobDeviceReport>,
    pub processes: Vec<ProcessReport>,
}

#[derive(Debug, Serialize)]
pub struct JobDeviceReport {
    pub host_index: u32,
    pub local_index: u32,
    pub uuid: Option<String>,
    pub arch: String,
    pub cus: Option<String>,
    pub cu_count: u32,
    pub memory_limit_bytes: Option<u64>,
    pub used_bytes: u64,
    pub peak_bytes: u64,
}

#[derive(Debug, Serialize)]
pub struct ProcessReport {
    pub pid: u32,
    pub command: String,
    pub devices: Vec<ProcessDeviceReport>,
}

#[derive(Debug, Serialize)]
pub struct ProcessDeviceReport {
    pub host_index: Option<u32>,
    pub local_index: u32,
    pub used_bytes: u64,
    pub peak_bytes: u64,
}

/// Gathers the report. Reads without locking: records are published by rename.
pub fn collect(state: &StateDir) -> Report {
    let env = |key: &str| std::env::var(key).ok();
    let mut problems = Vec::new();
    let (gpu_source, gpu_source_description, host_gpus) = match gpus::discover(&env) {
        Ok(t) => (Some(t.source), t.description, t.gpus),
        Err(e) => {
            problems.push(format!("cannot read the GPUs: {e}"));
            (None, "unknown".to_string(), Vec::new())
        }
    };
    let records: Vec<JobRecord> = match state.live_records() {
        Ok(records) => records
            .into_iter()
            .filter_map(|r| r.map_err(|e| problems.push(e.to_string())).ok())
            .collect(),
        Err(e) => {
            problems.push(e.to_string());
            Vec::new()
        }
    };

    let mut booked: BTreeMap<u32, u32> = BTreeMap::new();
    for rec in &records {
        for dev in &rec.devices {
            *booked.entry(dev.host_index).or_default() += dev.cu_count;
        }
    }
    let gpus = host_gpus
        .iter()
        .map(|g| {
            let cus_booked = booked.get(&g.host_index).copied().unwrap_or(0);
            GpuReport {
                host_index: g.host_index,
                arch: g.arch.clone(),
                uuid: g.uuid.clone(),
                compute_units: g.compute_units,
                vram_bytes: g.vram_bytes,
                cus_booked,
                cus_free: g.compute_units.saturating_sub(cus_booked),
            }
        })
        .collect();
    let jobs = records.iter().map(job_report).collect();
    Report {
        state_dir: state.root().display().to_string(),
        gpu_source,
        gpu_source_description,
        gpus,
        jobs,
        problems,
    }
}

fn job_report(rec: &JobRecord) -> JobReport {
    let (ledger_state, usage) = match usage::read(&rec.ledger) {
        Ok(Some(usage)) => ("ok".to_string(), Some(usage)),
        Ok(None) => ("none yet".to_string(), None),
        Err(e) => (e, None),
    };
    let host_of = |local: u32| {
        rec.devices
            .iter()
            .find(|d| d.local_index == local)
            .map(|d| d.host_index)
    };
    let devices = rec
        .devices
        .iter()
        .map(|d| {
            let totals = usage
                .as_ref()
                .and_then(|u| u.devices.get(&d.local_index).copied())
                .unwrap_or_default();
            JobDeviceReport {
                host_index: d.host_index,
                local_index: d.local_index,
                uuid: d.uuid.clone(),
                arch: d.arch.clone(),
                cus: d.cus.clone(),
                cu_count: d.cu_count,
                memory_limit_bytes: d.memory_limit,
                used_bytes: totals.used,
                peak_bytes: totals.peak,
            }
        })
        .collect();
    let mut processes: Vec<ProcessReport> = usage
        .as_ref()
        .map(|u| {
            u.processes
                .iter()
                .map(|p| ProcessReport {
                    pid: p.pid,
                    command: procfs::cmdline_of(p.pid).unwrap_or_else(|| "?".into()),
                    devices: p
                        .devices
                        .iter()
                        .map(|(&local, amounts)| ProcessDeviceReport {
                            host_index: host_of(local),
                            local_index: local,
                            used_bytes: amounts.used,
                            peak_bytes: amounts.peak,
                        })
                        .collect(),
                })
                .collect()
        })
        .unwrap_or_default();
    let command = procfs::cmdline_of(rec.pid).unwrap_or_else(|| rec.command.join(" "));
    if !processes.iter().any(|p| p.pid == rec.pid) {
        processes.insert(
            0,
            ProcessReport {
                pid: rec.pid,
                command: command.clone(),
                devices: Vec::new(),
            },
        );
    }
    JobReport {
        id: rec.id(),
        pid: rec.pid,
        start_time: rec.start_time,
        command,
        ledger: rec.ledger.display().to_string(),
        ledger_state,
        devices,
        processes,
    }
}

/// The human-readable table of `status`.
pub fn table(report: &Report, verbose: bool) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "GPUs from {}:", report.gpu_source_description);
    for g in &report.gpus {
        let _ = writeln!(
            out,
            "  GPU {}  {}  {} CUs ({} booked, {} free)  VRAM {}{}",
            g.host_index,
            g.arch,
            g.compute_units,
            g.cus_booked,
            g.cus_free,
            g.vram_bytes.map_or("unknown".into(), human),
            g.uuid
                .as_deref()
                .map_or(String::new(), |u| format!("  {u}")),
        );
    }
    if verbose {
        let _ = writeln!(out, "State directory: {}", report.state_dir);
    }
    if report.jobs.is_empty() {
        let _ = writeln!(out, "No running jobs.");
    } else {
        let mut rows = vec![[
            "JOB", "GPU", "CUS", "LIMIT", "USED", "PEAK", "PID", "COMMAND",
        ]
        .map(String::from)];
        for job in &report.jobs {
            for (i, dev) in job.devices.iter().enumerate() {
                let (pid, command) = match (i, job.processes.first()) {
                    (0, Some(p)) => (p.pid.to_string(), p.command.clone()),
                    _ => (String::new(), String::new()),
                };
                rows.push([
                    if i == 0 {
                        job.id.clone()
                    } else {
                        String::new()
                    },
                    if dev.local_index == dev.host_index {
                        dev.host_index.to_string()
                    } else {
                        format!("{} (as {})", dev.host_index, dev.local_index)
                    },
                    dev.cus
                        .as_ref()
                        .map_or("shared".into(), |l| format!("{l} ({})", dev.cu_count)),
                    dev.memory_limit_bytes.map_or("none".into(), human),
                    human(dev.used_bytes),
                    human(dev.peak_bytes),
                    pid,
                    command,
                ]);
            }
            for p in job.processes.iter().skip(1) {
                let used: u64 = p.devices.iter().map(|d| d.used_bytes).sum();
                rows.push([
                    String::new(),
                    String::new(),
                    String::new(),
                    String::new(),
                    human(used),
                    String::new(),
                    p.pid.to_string(),
                    p.command.clone(),
                ]);
            }
            if job.ledger_state != "ok" && job.ledger_state != "none yet" {
                rows.push([
                    String::new(),
                    String::new(),
                    format!("ledger: {}", job.ledger_state),
                    String::new(),
                    String::new(),
                    String::new(),
                    String::new(),
                    String::new(),
                ]);
            }
        }
        let widths: Vec<usize> = (0..8)
            .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
            .collect();
        for row in &rows {
            let mut line = String::new();
            for (c, cell) in row.iter().enumerate() {
                if c == 7 {
                    line.push_str(cell);
                } else {
                    let _ = write!(line, "{cell:<w$}  ", w = widths[c]);
                }
            }
            let _ = writeln!(out, "{}", line.trim_end());
        }
    }
    for problem in &report.problems {
        let _ = writeln!(out, "warning: {problem}");
    }
    out
}
