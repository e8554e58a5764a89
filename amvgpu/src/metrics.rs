//! `amvgpu metrics`: the status numbers in Prometheus text exposition format (0.0.4).
//!
//! Names follow HAMi's vGPU monitor where a family exists there (HAMi v2.x device-plugin
//! monitor, `hami_*` families with a `zone="vGPU"` label):
//! - `hami_vgpu_memory_used_bytes`: bytes the job's processes hold on the device now (the
//!   hook's accounting, as HAMi's is HAMi-core's);
//! - `hami_vgpu_memory_limit_bytes`: the job's limit on that device.
//!
//! HAMi labels a series with `namespace, pod, container, vdevice_index, device_uuid`. A bare
//! metal job has no pod, so these carry `job_id` (pid-starttime of the job, stable for its
//! life; not `job`, which Prometheus itself sets on every scraped series), `pid` (the
//! job's process), `vdevice_index` (the index the job sees), `device_index` (host index)
//! and `device_uuid` (empty when the system reports none, e.g. the simulator).
//!
//! Families HAMi has no name for use an `amvgpu_` prefix: peak bytes, CUs booked per job,
//! bytes per process, and per-GPU free CUs.

use std::fmt::Write as _;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use crate::report::Report;
use crate::state::StateDir;
use crate::Failure;

fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

struct Family<'a> {
    name: &'a str,
    help: &'a str,
    samples: Vec<(String, u64)>,
}

impl Family<'_> {
    fn render(&self, out: &mut String) {
        let _ = writeln!(out, "# HELP {} {}", self.name, self.help);
        let _ = writeln!(out, "# TYPE {} gauge", self.name);
        for (labels, value) in &self.samples {
            let _ = writeln!(out, "{}{{{labels}}} {value}", self.name);
        }
    }
}

/// Renders the report as exposition text.
pub fn render(report: &Report) -> String {
    let mut used = Family {
        name: "hami_vgpu_memory_used_bytes",
        help: "Device memory held now by the job's processes (hook accounting).",
        samples: Vec::new(),
    };
    let mut limit = Family {
        name: "hami_vgpu_memory_limit_bytes",
        help: "Device memory limit of the job on this device.",
        samples: Vec::new(),
    };
    let mut peak = Family {
        name: "amvgpu_vgpu_memory_peak_bytes",
        help: "Most device memory the job's processes held at once.",
        samples: Vec::new(),
    };
    let mut cus = Family {
        name: "amvgpu_vgpu_compute_units",
        help: "Compute units booked by the job on this device (0: no slice, shares all).",
        samples: Vec::new(),
    };
    let mut process_used = Family {
        name: "amvgpu_process_memory_used_bytes",
        help: "Device memory held now by one process of a job.",
        samples: Vec::new(),
    };
    let mut free = Family {
        name: "amvgpu_gpu_compute_units_free",
        help: "Compute units of the GPU not booked by any running job.",
        samples: Vec::new(),
    };
    for job in &report.jobs {
        for dev in &job.devices {
            let labels = format!(
                "zone=\"vGPU\",job_id=\"{}\",pid=\"{}\",vdevice_index=\"{}\",device_index=\"{}\",device_uuid=\"{}\"",
                escape(&job.id),
                job.pid,
                dev.local_index,
                dev.host_index,
                escape(dev.uuid.as_deref().unwrap_or("")),
            );
            used.samples.push((labels.clone(), dev.used_bytes));
            if let Some(bytes) = dev.memory_limit_bytes {
                limit.samples.push((labels.clone(), bytes));
            }
            peak.samples.push((labels.clone(), dev.peak_bytes));
            cus.samples.push((labels, u64::from(dev.cu_count)));
        }
        for process in &job.processes {
            for dev in &process.devices {
                let labels = format!(
                    "zone=\"vGPU\",job_id=\"{}\",pid=\"{}\",vdevice_index=\"{}\",device_index=\"{}\"",
                    escape(&job.id),
                    process.pid,
                    dev.local_index,
                    dev.host_index.map_or(String::new(), |i| i.to_string()),
                );
                process_used.samples.push((labels, dev.used_bytes));
            }
        }
    }
    for gpu in &report.gpus {
        let labels = format!(
            "zone=\"vGPU\",device_index=\"{}\",device_uuid=\"{}\",device_type=\"{}\"",
            gpu.host_index,
            escape(gpu.uuid.as_deref().unwrap_or("")),
            escape(&gpu.arch),
        );
        free.samples.push((labels, u64::from(gpu.cus_free)));
    }
    let mut out = String::new();
    for family in [&used, &limit, &peak, &cus, &process_used, &free] {
        family.render(&mut out);
    }
    out
}

const MAX_REQUEST_HEAD: usize = 8 * 1024;
const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// Serves `GET /metrics` until killed. One connection at a time, each with a bounded
/// request size and read/write timeouts, so a slow or hostile client costs at most one
/// timeout and a few KiB.
pub fn serve(addr: SocketAddr, state: &StateDir) -> Failure {
    let listener = match TcpListener::bind(addr) {
        Ok(l) => l,
        Err(e) => {
            return Failure::environment(format!("--listen {addr}: cannot listen: {e}"));
        }
    };
    let bound = listener.local_addr().unwrap_or(addr);
    if !bound.ip().is_loopback() {
        eprintln!("amvgpu: warning: serving metrics beyond this machine ({bound})");
    }
    eprintln!("amvgpu: serving metrics on http://{bound}/metrics");
    for stream in listener.incoming() {
        match stream {
            Ok(stream) => {
                if let Err(e) = answer(stream, state) {
                    eprintln!("amvgpu: metrics request failed: {e}");
                }
            }
            Err(e) => eprintln!("amvgpu: accept failed: {e}"),
        }
    }
    Failure::environment(format!("{bound}: listener closed"))
}

fn answer(mut stream: TcpStream, state: &StateDir) -> io::Result<()> {
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    let mut head = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        if head.len() >= MAX_REQUEST_HEAD {
            return respond(
                &mut stream,
                "431 Request Header Fields Too Large",
                "too large\n",
            );
        }
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&chunk[..n]);
    }
    let head = String::from_utf8_lossy(&head);
    let mut parts = head.lines().next().unwrap_or("").split_ascii_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    match (method, path) {
        ("GET", "/metrics") => {
            let body = render(&crate::report::collect(state));
            respond(&mut stream, "200 OK", &body)
        }
        ("GET", _) => respond(&mut stream, "404 Not Found", "try /metrics\n"),
        ("", _) => respond(&mut stream, "400 Bad Request", "bad request\n"),
        _ => respond(&mut stream, "405 Method Not Allowed", "only GET\n"),
    }
}

fn respond(stream: &mut TcpStream, status: &str, body: &str) -> io::Result<()> {
    let content_type = if status.starts_with("200") {
        "text/plain; version=0.0.4; charset=utf-8"
    } else {
        "text/plain; charset=utf-8"
    };
    write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    stream.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{
        GpuReport, JobDeviceReport, JobReport, ProcessDeviceReport, ProcessReport,
    };

    fn sample_report() -> Report {
        Report {
            state_dir: "/tmp/x".into(),
            gpu_source: None,
            gpu_source_description: "test".into(),
            gpus: vec![GpuReport {
                host_index: 0,
                arch: "gfx942".into(),
                uuid: None,
                compute_units: 304,
                vram_bytes: Some(1 << 30),
                cus_booked: 76,
                cus_free: 228,
            }],
            jobs: vec![JobReport {
                id: "42-7".into(),
                pid: 42,
                start_time: 7,
                command: "sh -c \"x\"".into(),
                ledger: "/l".into(),
                ledger_state: "ok".into(),
                devices: vec![JobDeviceReport {
                    host_index: 0,
                    local_index: 0,
                    uuid: Some("GPU-1".into()),
                    arch: "gfx942".into(),
                    cus: Some("0-75".into()),
                    cu_count: 76,
                    memory_limit_bytes: Some(2 << 30),
                    used_bytes: 1 << 20,
                    peak_bytes: 3 << 20,
                }],
                processes: vec![ProcessReport {
                    pid: 43,
                    command: "w".into(),
                    devices: vec![ProcessDeviceReport {
                        host_index: Some(0),
                        local_index: 0,
                        used_bytes: 1 << 20,
                        peak_bytes: 3 << 20,
                    }],
                }],
            }],
            problems: vec![],
        }
    }

    #[test]
    fn exposition_uses_hami_names_and_labels_each_series() {
        let text = render(&sample_report());
        assert!(text.contains("# TYPE hami_vgpu_memory_used_bytes gauge"));
        assert!(text.contains(
            "hami_vgpu_memory_used_bytes{zone=\"vGPU\",job_id=\"42-7\",pid=\"42\",vdevice_index=\"0\",device_index=\"0\",device_uuid=\"GPU-1\"} 1048576"
        ), "{text}");
        assert!(text.contains("hami_vgpu_memory_limit_bytes{") && text.contains("} 2147483648"));
        assert!(text.contains("amvgpu_vgpu_memory_peak_bytes{") && text.contains("} 3145728"));
        assert!(text.contains("amvgpu_vgpu_compute_units{") && text.contains("} 76"));
        assert!(text.contains(
            "amvgpu_process_memory_used_bytes{zone=\"vGPU\",job_id=\"42-7\",pid=\"43\",vdevice_index=\"0\",device_index=\"0\"} 1048576"
        ), "{text}");
        assert!(text.contains(
            "amvgpu_gpu_compute_units_free{zone=\"vGPU\",device_index=\"0\",device_uuid=\"\",device_type=\"gfx942\"} 228"
        ), "{text}");
        // Every sample line is `name{labels} integer`.
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let (series, value) = line.rsplit_once(' ').unwrap();
            assert!(series.ends_with('}'), "{line}");
            value.parse::<u64>().unwrap();
        }
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
