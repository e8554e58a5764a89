//! Bytes held by a job's processes, read from the hook's ledger of that job through
//! `amvgpu-ledger`.

use std::collections::BTreeMap;
use std::path::Path;

/// Bytes held now and the most held at once.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Amounts {
    pub used: u64,
    pub peak: u64,
}

#[derive(Debug, Clone)]
pub struct ProcessUsage {
    pub pid: u32,
    /// By the device index the job sees.
    pub devices: BTreeMap<u32, Amounts>,
}

#[derive(Debug, Clone)]
pub struct JobUsage {
    /// Container totals by the device index the job sees.
    pub devices: BTreeMap<u32, Amounts>,
    pub processes: Vec<ProcessUsage>,
}

/// `Ok(None)` when the hook has not created the ledger yet (no HIP call so far).
pub fn read(path: &Path) -> Result<Option<JobUsage>, String> {
    if !path.exists() {
        return Ok(None);
    }
    let snapshot = amvgpu_ledger::open_readonly(path).map_err(|e| e.to_string())?;
    let amounts = |used: &[u64], peak: &[u64]| -> BTreeMap<u32, Amounts> {
        used.iter()
            .zip(peak)
            .enumerate()
            .filter(|(_, (&u, &p))| u != 0 || p != 0)
            .map(|(device, (&used, &peak))| (device as u32, Amounts { used, peak }))
            .collect()
    };
    Ok(Some(JobUsage {
        devices: amounts(&snapshot.container_usage, &snapshot.container_peak),
        // A dead process's bytes still count in the totals until the hook reclaims its
        // slot, but it is no longer a process of the job.
        processes: snapshot
            .slots
            .iter()
            .filter(|slot| slot.alive)
            .map(|slot| ProcessUsage {
                pid: slot.pid,
                devices: amounts(&slot.used, &slot.peak),
            })
            .collect(),
    }))
}
