//! The host-wide CU ledger: which jobs hold which compute units on which GPU.
//!
//! Layout of the state directory:
//!
//! ```text
//! <state>/lock                         flock(2)ed exclusively around every change
//! <state>/jobs/<pid>-<start>.json      one record per running `amvgpu run` job
//! <state>/ledgers/<pid>-<start>.ledger the hook's memory ledger of that job
//! ```
//!
//! Why this is crash- and concurrency-safe:
//! - Every read-modify-write (reclaim dead records, pick free CUs, add a record) happens
//!   while holding an exclusive `flock` on `<state>/lock`. The kernel drops that lock when
//!   its holder dies, even by SIGKILL, so a crashed `amvgpu run` can never wedge the
//!   others (unlike a process-shared semaphore in a mapped file, which stays taken).
//! - A record is written to a temporary name and `rename`d into place, so a reader
//!   (`status`, which takes no lock) sees either no record or a whole one. Temporary files
//!   left by a writer that died are removed by the next lock holder.
//! - A record's name carries the job's (pid, start time) key, so even a record whose
//!   content is damaged can be judged live or dead. A record is dead when that pid is gone,
//!   is a zombie, or now has a different start time (pid reuse); the next `run` deletes
//!   it together with its hook ledger. Nothing depends on a job cleaning up after itself:
//!   a job ends by `exec`ing into the command, and its slice is free the moment the
//!   command's process is gone.

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::gpus::SourceKind;
use crate::procfs::{self, ProcessKey};

/// Record format version; a reader refuses versions it does not know.
pub const RECORD_VERSION: u32 = 1;

/// One running job: the process it became and what it holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobRecord {
    pub version: u32,
    pub pid: u32,
    pub start_time: u64,
    pub command: Vec<String>,
    /// The hook's ledger for this job (`HIP_DEVICE_MEMORY_SHARED_CACHE`).
    pub ledger: PathBuf,
    pub topology_source: SourceKind,
    pub devices: Vec<JobDevice>,
}

/// What a job holds on one GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobDevice {
    pub host_index: u32,
    /// The index the job's processes see (after `ROCR_VISIBLE_DEVICES`).
    pub local_index: u32,
    pub uuid: Option<String>,
    pub arch: String,
    pub total_cus: u32,
    /// The CU list of the slice (`0-75`), `None` when the job asked for no compute slice.
    pub cus: Option<String>,
    pub cu_count: u32,
    pub memory_limit: Option<u64>,
}

impl JobRecord {
    pub fn key(&self) -> ProcessKey {
        ProcessKey {
            pid: self.pid,
            start_time: self.start_time,
        }
    }

    /// Short, stable name of the job used in tables and metric labels.
    pub fn id(&self) -> String {
        record_stem(self.key())
    }
}

fn record_stem(key: ProcessKey) -> String {
    format!("{}-{}", key.pid, key.start_time)
}

fn parse_stem(stem: &str) -> Option<ProcessKey> {
    let (pid, start) = stem.split_once('-')?;
    Some(ProcessKey {
        pid: pid.parse().ok()?,
        start_time: start.parse().ok()?,
    })
}

/// A problem with the state directory; always names the path.
#[derive(Debug)]
pub struct StateError(pub String);

impl fmt::Display for StateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for StateError {}

fn io_err(what: &str, path: &Path, err: io::Error) -> StateError {
    StateError(format!("{what} {}: {err}", path.display()))
}

/// The state directory, resolved but not necessarily created yet.
#[derive(Debug, Clone)]
pub struct StateDir {
    root: PathBuf,
}

impl StateDir {
    /// `--state-dir`, else `AMVGPU_STATE_DIR`, else `/run/amvgpu` when it can be used,
    /// else `/tmp/amvgpu-<uid>`.
    pub fn resolve(flag: Option<&Path>, env: &dyn Fn(&str) -> Option<String>) -> StateDir {
        if let Some(path) = flag {
            return StateDir::at(path);
        }
        if let Some(path) = env("AMVGPU_STATE_DIR").filter(|p| !p.is_empty()) {
            return StateDir::at(Path::new(&path));
        }
        let run = Path::new("/run/amvgpu");
        if writable(run) || (!run.exists() && writable(Path::new("/run"))) {
            return StateDir::at(run);
        }
        // SAFETY: getuid has no preconditions and cannot fail (POSIX).
        let uid = unsafe { libc::getuid() };
        StateDir::at(Path::new(&format!("/tmp/amvgpu-{uid}")))
    }

    pub fn at(root: &Path) -> StateDir {
        StateDir {
            root: root.to_path_buf(),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn jobs_dir(&self) -> PathBuf {
        self.root.join("jobs")
    }

    fn ledgers_dir(&self) -> PathBuf {
        self.root.join("ledgers")
    }

    /// Where the hook of job `key` keeps its memory ledger.
    pub fn ledger_path(&self, key: ProcessKey) -> PathBuf {
        self.ledgers_dir()
            .join(format!("{}.ledger", record_stem(key)))
    }

    /// Creates the directories if needed and takes the exclusive lock.
    pub fn lock(&self) -> Result<LockedState<'_>, StateError> {
        self.create_dirs()?;
        let lock_path = self.root.join("lock");
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o644)
            .open(&lock_path)
            .map_err(|e| io_err("cannot open the lock file", &lock_path, e))?;
        loop {
            // SAFETY: the descriptor belongs to `file`, which outlives this call; flock
            // only reads the descriptor number and takes no pointers.
            let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
            if rc == 0 {
                break;
            }
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::Interrupted {
                return Err(io_err("cannot lock", &lock_path, err));
            }
        }
        Ok(LockedState {
            state: self,
            _lock: file,
        })
    }

    fn create_dirs(&self) -> Result<(), StateError> {
        let private = self.root.starts_with("/tmp");
        let mut builder = fs::DirBuilder::new();
        builder
            .recursive(true)
            .mode(if private { 0o700 } else { 0o755 });
        builder
            .create(&self.root)
            .map_err(|e| io_err("cannot create the state directory", &self.root, e))?;
        if private {
            // A /tmp path another user created first could be used to feed us records.
            let meta =
                fs::metadata(&self.root).map_err(|e| io_err("cannot inspect", &self.root, e))?;
            // SAFETY: getuid has no preconditions and cannot fail (POSIX).
            let uid = unsafe { libc::getuid() };
            if meta.uid() != uid {
                return Err(StateError(format!(
                    "state directory {} belongs to uid {}, not to you (uid {uid}); \
                     pass --state-dir or AMVGPU_STATE_DIR",
                    self.root.display(),
                    meta.uid()
                )));
            }
        }
        for dir in [self.jobs_dir(), self.ledgers_dir()] {
            builder
                .create(&dir)
                .map_err(|e| io_err("cannot create", &dir, e))?;
        }
        Ok(())
    }

    /// Every record, live or not, with problems reported per file. Needs no lock: records
    /// appear and disappear by rename/unlink, never half-written.
    pub fn read_records(&self) -> Result<Vec<Result<JobRecord, StateError>>, StateError> {
        let dir = self.jobs_dir();
        let entries = match fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io_err("cannot list", &dir, e)),
        };
        let mut paths: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|ext| ext == "json"))
            .collect();
        paths.sort();
        Ok(paths.iter().map(|p| read_record(p)).collect())
    }

    /// Records of jobs whose process still runs. Damaged records of live processes are
    /// reported as errors, not skipped: they may hold CUs.
    pub fn live_records(&self) -> Result<Vec<Result<JobRecord, StateError>>, StateError> {
        Ok(self
            .read_records()?
            .into_iter()
            .filter(|rec| match rec {
                Ok(rec) => procfs::is_alive(rec.key()),
                Err(_) => true,
            })
            .collect())
    }
}

fn read_record(path: &Path) -> Result<JobRecord, StateError> {
    let text = fs::read_to_string(path).map_err(|e| io_err("cannot read", path, e))?;
    let rec: JobRecord = serde_json::from_str(&text)
        .map_err(|e| StateError(format!("damaged job record {}: {e}", path.display())))?;
    if rec.version != RECORD_VERSION {
        return Err(StateError(format!(
            "job record {} has format version {}, this amvgpu reads {RECORD_VERSION}",
            path.display(),
            rec.version
        )));
    }
    Ok(rec)
}

fn writable(path: &Path) -> bool {
    let Ok(c_path) = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    // SAFETY: c_path is a NUL-terminated string that lives across the call; access only
    // reads it.
    unsafe { libc::access(c_path.as_ptr(), libc::W_OK) == 0 }
}

/// The state directory while this process holds its lock. Dropping it unlocks.
#[derive(Debug)]
pub struct LockedState<'a> {
    state: &'a StateDir,
    _lock: File,
}

impl LockedState<'_> {
    /// Deletes the records (and hook ledgers) of jobs whose process is gone, and temporary
    /// files of writers that died mid-write. Returns the keys reclaimed.
    pub fn reclaim_dead(&self) -> Result<Vec<ProcessKey>, StateError> {
        let dir = self.state.jobs_dir();
        let entries = fs::read_dir(&dir).map_err(|e| io_err("cannot list", &dir, e))?;
        let mut reclaimed = Vec::new();
        for entry in entries.filter_map(Result::ok) {
            let path = entry.path();
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if name.starts_with('.') && name.ends_with(".tmp") {
                // Only a lock holder writes temporaries, and we hold the lock.
                let _ = fs::remove_file(&path);
                continue;
            }
            let Some(key) = name.strip_suffix(".json").and_then(parse_stem) else {
                continue;
            };
            if procfs::is_alive(key) {
                continue;
            }
            fs::remove_file(&path).map_err(|e| io_err("cannot remove dead record", &path, e))?;
            let ledger = self.state.ledger_path(key);
            match fs::remove_file(&ledger) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_err("cannot remove dead ledger", &ledger, e)),
            }
            reclaimed.push(key);
        }
        reclaimed.sort();
        Ok(reclaimed)
    }

    /// Every remaining record; call after `reclaim_dead`.
    pub fn records(&self) -> Result<Vec<Result<JobRecord, StateError>>, StateError> {
        self.state.read_records()
    }

    /// Publishes a record atomically (temporary file, fsync, rename).
    pub fn write_record(&self, record: &JobRecord) -> Result<PathBuf, StateError> {
        let stem = record_stem(record.key());
        let dir = self.state.jobs_dir();
        let tmp = dir.join(format!(".{stem}.tmp"));
        let dest = dir.join(format!("{stem}.json"));
        let text = serde_json::to_string_pretty(record)
            .map_err(|e| StateError(format!("cannot encode job record: {e}")))?;
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&tmp)
            .map_err(|e| io_err("cannot create", &tmp, e))?;
        file.write_all(text.as_bytes())
            .and_then(|()| file.sync_all())
            .map_err(|e| io_err("cannot write", &tmp, e))?;
        fs::rename(&tmp, &dest).map_err(|e| io_err("cannot publish", &dest, e))?;
        Ok(dest)
    }

    /// Removes a record (used when the command could not be started).
    pub fn remove_record(&self, key: ProcessKey) -> Result<(), StateError> {
        let path = self
            .state
            .jobs_dir()
            .join(format!("{}.json", record_stem(key)));
        fs::remove_file(&path).map_err(|e| io_err("cannot remove", &path, e))?;
        let _ = fs::remove_file(self.state.ledger_path(key));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(key: ProcessKey, cus: &str) -> JobRecord {
        JobRecord {
            version: RECORD_VERSION,
            pid: key.pid,
            start_time: key.start_time,
            command: vec!["train".into()],
            ledger: PathBuf::from("/nonexistent"),
            topology_source: SourceKind::Hipsim,
            devices: vec![JobDevice {
                host_index: 0,
                local_index: 0,
                uuid: None,
                arch: "gfx942".into(),
                total_cus: 304,
                cus: Some(cus.into()),
                cu_count: 76,
                memory_limit: Some(1 << 30),
            }],
        }
    }

    fn dead_key() -> ProcessKey {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let start_time = procfs::stat_of(pid).map_or(1, |f| f.start_time);
        child.wait().unwrap();
        ProcessKey { pid, start_time }
    }

    #[test]
    fn dead_and_reused_pid_records_are_reclaimed_live_ones_kept() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::at(dir.path());
        let me = procfs::own_key().unwrap();
        let reused = ProcessKey {
            pid: me.pid,
            start_time: me.start_time + 7,
        };
        let dead = dead_key();
        {
            let locked = state.lock().unwrap();
            locked.write_record(&record(me, "0-75")).unwrap();
            locked.write_record(&record(reused, "76-151")).unwrap();
            locked.write_record(&record(dead, "152-227")).unwrap();
            fs::write(state.ledger_path(dead), b"ledger").unwrap();
            // A writer that died between create and rename.
            fs::write(dir.path().join("jobs/.99-1.tmp"), b"{").unwrap();
        }
        assert_eq!(state.read_records().unwrap().len(), 3);
        assert_eq!(
            state.live_records().unwrap().len(),
            1,
            "status hides dead jobs"
        );

        let locked = state.lock().unwrap();
        let mut expected = vec![reused, dead];
        expected.sort();
        assert_eq!(locked.reclaim_dead().unwrap(), expected);
        let left: Vec<JobRecord> = locked.records().unwrap().into_iter().flatten().collect();
        assert_eq!(left, vec![record(me, "0-75")]);
        assert!(
            !state.ledger_path(dead).exists(),
            "the dead job's ledger goes too"
        );
        assert!(!dir.path().join("jobs/.99-1.tmp").exists());
    }

    #[test]
    fn damaged_record_of_a_dead_process_is_reclaimed_by_its_name() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::at(dir.path());
        let dead = dead_key();
        let locked = state.lock().unwrap();
        let path = dir
            .path()
            .join(format!("jobs/{}-{}.json", dead.pid, dead.start_time));
        fs::write(&path, b"{ not json").unwrap();
        let records = locked.records().unwrap();
        assert!(records[0]
            .as_ref()
            .unwrap_err()
            .to_string()
            .contains("damaged job record"));
        assert_eq!(locked.reclaim_dead().unwrap(), vec![dead]);
        assert!(locked.records().unwrap().is_empty());
    }

    #[test]
    fn explicit_paths_win_over_environment() {
        let env = |k: &str| (k == "AMVGPU_STATE_DIR").then(|| "/from/env".to_string());
        assert_eq!(
            StateDir::resolve(Some(Path::new("/from/flag")), &env).root(),
            Path::new("/from/flag")
        );
        assert_eq!(StateDir::resolve(None, &env).root(), Path::new("/from/env"));
    }

    #[test]
    fn lock_is_exclusive_between_open_file_descriptions() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::at(dir.path());
        let held = state.lock().unwrap();
        let other = File::open(dir.path().join("lock")).unwrap();
        // SAFETY: `other` owns the descriptor for the duration of the call.
        let rc = unsafe { libc::flock(other.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        assert_eq!(
            rc, -1,
            "a second description must not get the lock while held"
        );
        drop(held);
        // SAFETY: as above.
        let rc = unsafe { libc::flock(other.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        assert_eq!(rc, 0, "dropping the guard releases the lock");
    }
}
