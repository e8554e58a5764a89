//! Opening and creating the ledger file: every unusable file is an error that
//! names the path and the reason; racing creators share one valid file.

mod common;
use amvgpu_ledger::{open_readonly, Ledger, LedgerError, Reason};
use common::*;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

const FILE_SIZE: usize = 856_064;

fn open_err(path: &Path) -> LedgerError {
    let err = Ledger::open_shared(path).expect_err("must refuse");
    let shown = err.to_string();
    assert!(
        shown.contains(&path.display().to_string()),
        "error does not name the path: {shown}"
    );
    assert_eq!(err.path(), path);
    err
}

/// A valid ledger file's bytes.
fn valid_bytes(dir: &Path) -> Vec<u8> {
    let path = dir.join("template");
    drop(Ledger::open_shared(&path).unwrap());
    std::fs::read(&path).unwrap()
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

#[test]
fn missing_directory_is_refused() {
    let dir = scratch_dir("nodir");
    let path = dir.join("no/such/dir/ledger");
    let err = open_err(&path);
    assert!(matches!(err.reason(), Reason::Io { .. }), "{err}");
    assert!(
        err.to_string().contains("No such file or directory"),
        "{err}"
    );
    assert!(open_readonly(&path).is_err());
}

#[test]
fn non_regular_files_are_refused() {
    let dir = scratch_dir("nonreg");
    let err = open_err(&dir);
    assert!(
        matches!(
            err.reason(),
            Reason::NotRegularFile {
                file_type: "directory"
            }
        ),
        "{err}"
    );
    let err = open_err(Path::new("/dev/null"));
    assert!(
        matches!(
            err.reason(),
            Reason::NotRegularFile {
                file_type: "character device"
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("not a regular file"), "{err}");
}

#[test]
fn garbage_and_foreign_files_are_refused_with_the_reason() {
    let dir = scratch_dir("garbage");
    let valid = valid_bytes(&dir);
    assert_eq!(valid.len(), FILE_SIZE);

    // Random bytes of exactly the right size.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let random: Vec<u8> = (0..FILE_SIZE)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let err = open_err(&write(&dir, "random", &random));
    assert!(matches!(err.reason(), Reason::BadMagic { .. }), "{err}");
    assert!(err.to_string().contains("not a ledger file"), "{err}");

    // All zeroes (e.g. a half-made file from some other tool).
    let err = open_err(&write(&dir, "zeroes", &vec![0; FILE_SIZE]));
    assert!(
        matches!(err.reason(), Reason::BadMagic { found } if *found == [0; 8]),
        "{err}"
    );

    // Wrong magic, otherwise valid.
    let mut bad = valid.clone();
    bad[..8].copy_from_slice(b"HAMICACH");
    let err = open_err(&write(&dir, "magic", &bad));
    assert!(err.to_string().contains("HAMICACH"), "{err}");

    // Another layout version.
    let mut bad = valid.clone();
    bad[8..12].copy_from_slice(&7u32.to_ne_bytes());
    let err = open_err(&write(&dir, "version", &bad));
    assert!(
        matches!(
            err.reason(),
            Reason::UnsupportedVersion {
                found: 7,
                supported: 1
            }
        ),
        "{err}"
    );

    // Incompatible layout field (a build with more slots).
    let mut bad = valid.clone();
    bad[0x18..0x1c].copy_from_slice(&2048u32.to_ne_bytes());
    let err = open_err(&write(&dir, "slots", &bad));
    assert!(
        matches!(
            err.reason(),
            Reason::LayoutMismatch {
                field: "max_slots",
                found: 2048,
                ..
            }
        ),
        "{err}"
    );

    // Truncated at several points, including an empty file.
    for len in [0, 5, 100, 4096, FILE_SIZE - 1] {
        let err = open_err(&write(&dir, &format!("trunc{len}"), &valid[..len]));
        assert!(
            matches!(err.reason(), Reason::Truncated { size, .. } if *size == len as u64),
            "{len}: {err}"
        );
        assert!(err.to_string().contains("truncated"), "{err}");
        assert!(open_readonly(&dir.join(format!("trunc{len}"))).is_err());
    }

    // Longer than the layout.
    let mut long = valid.clone();
    long.extend_from_slice(&[0; 4096]);
    let err = open_err(&write(&dir, "long", &long));
    assert!(
        matches!(
            err.reason(),
            Reason::LayoutMismatch {
                field: "file size",
                ..
            }
        ),
        "{err}"
    );

    // A free slot below the high-water mark that claims usage: garbage that
    // would block every reserve, refused at open whichever slot we would claim.
    let mut bad = valid.clone();
    let slot5_used_dev0 = 0x1000 + 5 * 0x340 + 0x40;
    bad[slot5_used_dev0..slot5_used_dev0 + 8].copy_from_slice(&1u64.to_ne_bytes());
    bad[HIGH_WATER..HIGH_WATER + 4].copy_from_slice(&6u32.to_ne_bytes());
    let err = open_err(&write(&dir, "freeused", &bad));
    assert!(
        matches!(
            err.reason(),
            Reason::Corrupt {
                slot: 5,
                what: "is free but holds usage"
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("corrupt: slot 5"), "{err}");
    // The same for a free slot naming a pid.
    let mut bad = valid.clone();
    put_u64(&mut bad, SLOT0 + 3 * SLOT_SIZE, 4242);
    bad[HIGH_WATER..HIGH_WATER + 4].copy_from_slice(&4u32.to_ne_bytes());
    let err = open_err(&write(&dir, "freepid", &bad));
    assert!(
        matches!(
            err.reason(),
            Reason::Corrupt {
                slot: 3,
                what: "is free but names a pid"
            }
        ),
        "{err}"
    );

    // The unmodified template still opens.
    assert!(Ledger::open_shared(&write(&dir, "good", &valid)).is_ok());
}

/// Byte offsets of layout version 1 (see the crate docs).
const SLOT0: usize = 0x1000;
const SLOT_SIZE: usize = 0x340;
const HIGH_WATER: usize = 0x80;
const PID_NAMESPACE: usize = 0x38;

fn put_u64(bytes: &mut [u8], at: usize, value: u64) {
    bytes[at..at + 8].copy_from_slice(&value.to_ne_bytes());
}

/// Marks slot `index` LIVE for `pid` with `start_time`, holding `used` on device 0.
fn plant_slot(bytes: &mut [u8], index: usize, pid: u32, start_time: u64, used: u64) {
    let at = SLOT0 + index * SLOT_SIZE;
    put_u64(bytes, at, (2u64 << 62) | (1 << 32) | u64::from(pid));
    put_u64(bytes, at + 8, start_time);
    put_u64(bytes, at + 0x40, used);
    let high = (index as u32 + 1).max(u32::from_ne_bytes(
        bytes[HIGH_WATER..HIGH_WATER + 4].try_into().unwrap(),
    ));
    bytes[HIGH_WATER..HIGH_WATER + 4].copy_from_slice(&high.to_ne_bytes());
}

/// Sets the header's `slot_high_water`.
fn set_high_water(bytes: &mut [u8], high: u32) {
    bytes[HIGH_WATER..HIGH_WATER + 4].copy_from_slice(&high.to_ne_bytes());
}

#[test]
fn a_dirty_slot_above_the_high_water_mark_is_refused_when_claimed() {
    // Opening reads only the slots below the mark (the others are part of no
    // sum); a slot above it is checked by whoever claims it. `open_shared`
    // claims at once, so the process sees the same error as for garbage below
    // the mark, naming the path and the slot.
    let dir = scratch_dir("dirtyabove");
    let mut bytes = valid_bytes(&dir);
    set_high_water(&mut bytes, 0);
    put_u64(&mut bytes, SLOT0 + 0x40 + 8 * 2, 777); // slot 0, used[2]
    let path = write(&dir, "slot0", &bytes);
    let err = open_err(&path);
    assert!(
        matches!(
            err.reason(),
            Reason::Corrupt {
                slot: 0,
                what: "is free but holds usage"
            }
        ),
        "{err}"
    );
    // The refusing opener zeroed the slot (so that a claimer racing past it
    // could not raise the mark over garbage) and left it free and unclaimed.
    let after = std::fs::read(&path).unwrap();
    assert_eq!(after[SLOT0 + 0x50..SLOT0 + 0x58], [0; 8]);
    assert_eq!(after[HIGH_WATER..HIGH_WATER + 4], 0u32.to_ne_bytes());
    let word = u64::from_ne_bytes(after[SLOT0..SLOT0 + 8].try_into().unwrap());
    assert_eq!((word >> 62, word as u32), (0, 0), "free, no pid: {word:#x}");
    // The next process gets a clean slot.
    let ledger = Ledger::open_shared(&path).expect("slot was cleaned");
    assert_eq!(ledger.container_usage(2), 0);
    drop(ledger);

    // Slot 0 held by a live process (pid 1, start time unknown), slot 1 above
    // the mark names a pid while free: the opener claims slot 1 and refuses.
    let mut bytes = valid_bytes(&dir);
    put_u64(&mut bytes, SLOT0, (2u64 << 62) | (1 << 32) | 1);
    set_high_water(&mut bytes, 1);
    put_u64(&mut bytes, SLOT0 + SLOT_SIZE, 31337);
    let err = open_err(&write(&dir, "slot1", &bytes));
    assert!(
        matches!(
            err.reason(),
            Reason::Corrupt {
                slot: 1,
                what: "is free but names a pid"
            }
        ),
        "{err}"
    );
}

#[test]
fn garbage_written_above_the_mark_after_open_is_caught_by_the_next_claimer() {
    let dir = scratch_dir("dirtylater");
    let path = dir.join("ledger");
    let first = Ledger::open_shared(&path).unwrap();
    first.reserve(0, 100, 1000).unwrap();
    // Slot 1 (above the mark, which is 1) is scribbled on by something else.
    {
        use std::os::unix::fs::FileExt;
        let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        file.write_all_at(&5u64.to_ne_bytes(), (SLOT0 + SLOT_SIZE + 0x40) as u64)
            .unwrap();
    }
    // Not part of any sum while above the mark.
    assert_eq!(first.container_usage(0), 100);
    let err = open_err(&path);
    assert!(
        matches!(err.reason(), Reason::Corrupt { slot: 1, .. }),
        "{err}"
    );
    assert_eq!(first.container_usage(0), 100);
    // Garbage above the mark does not stop an opener that claims below it.
    let mut bytes = valid_bytes(&dir);
    set_high_water(&mut bytes, 1);
    put_u64(&mut bytes, SLOT0 + 7 * SLOT_SIZE + 0x40, 9);
    let path = write(&dir, "far", &bytes);
    let ledger = Ledger::open_shared(&path).expect("slot 7 is not claimed");
    assert_eq!(ledger.container_usage(0), 0);
    assert_eq!(open_readonly(&path).unwrap().container_usage[0], 0);
}

/// The pid of a process that has exited (and been waited for).
fn gone_pid() -> u32 {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}

#[test]
fn a_new_process_reuses_a_gone_processs_slot_instead_of_raising_the_mark() {
    // The hook never frees its slot at exit: without reuse, each process
    // start would raise the mark by one, until every open checked and every
    // reservation summed all 1024 slots.
    let dir = scratch_dir("reuse");
    let mut bytes = valid_bytes(&dir);
    plant_slot(&mut bytes, 0, 1, 0, 0); // pid 1 exists: kept
    plant_slot(&mut bytes, 1, gone_pid(), 1, 500);
    let path = write(&dir, "ledger", &bytes);
    let ledger = Ledger::open_shared(&path).unwrap();
    let snap = ledger.snapshot();
    let mine: Vec<_> = snap.slots.iter().map(|s| (s.index, s.pid)).collect();
    assert_eq!(mine, [(0, 1), (1, std::process::id())]);
    assert_eq!(
        ledger.container_usage(0),
        0,
        "the gone owner's 500 still counts"
    );
    let after = std::fs::read(&path).unwrap();
    assert_eq!(after[HIGH_WATER..HIGH_WATER + 4], 2u32.to_ne_bytes());
}

#[test]
fn an_earlier_incarnation_with_our_own_pid_is_reclaimed() {
    // A restarted container's first process often gets the same pid as the
    // one that died holding memory; the start time tells them apart.
    let dir = scratch_dir("samepid");
    let mut bytes = valid_bytes(&dir);
    plant_slot(&mut bytes, 0, std::process::id(), 1, 900);
    let path = write(&dir, "ledger", &bytes);
    let ledger = Ledger::open_shared(&path).unwrap();
    assert_eq!(ledger.container_usage(0), 900, "counted until reclaimed");
    assert_eq!(
        ledger.reserve(0, 1000, 1000),
        Ok(()),
        "stale same-pid slot not reclaimed"
    );
    assert_eq!(ledger.container_usage(0), 1000);
}

#[test]
fn a_file_from_another_pid_namespace_is_adopted_only_when_empty() {
    let dir = scratch_dir("pidns");
    let mut bytes = valid_bytes(&dir);
    put_u64(&mut bytes, PID_NAMESPACE, 0xdead_beef);
    let empty = write(&dir, "empty", &bytes);
    let ledger = Ledger::open_shared(&empty).expect("nobody to protect: adopt");
    ledger.reserve(0, 1, 10).unwrap();
    drop(ledger);
    let adopted = std::fs::read(&empty).unwrap();
    assert_ne!(
        adopted[PID_NAMESPACE..PID_NAMESPACE + 8],
        0xdead_beefu64.to_ne_bytes()
    );

    // Occupied by a process we cannot see: its pid means nothing here.
    plant_slot(&mut bytes, 3, 1, 1, 500);
    let err = open_err(&write(&dir, "occupied", &bytes));
    assert!(
        matches!(
            err.reason(),
            Reason::ForeignPidNamespace {
                file: 0xdead_beef,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("PID namespace"), "{err}");
    // Status tools may still read it.
    assert_eq!(
        open_readonly(&dir.join("occupied"))
            .unwrap()
            .container_usage[0],
        500
    );
}

#[test]
fn read_only_file_is_refused_for_accounting_but_readable_for_status() {
    let dir = scratch_dir("readonly");
    let path = dir.join("ledger");
    {
        let ledger = Ledger::open_shared(&path).unwrap();
        ledger.reserve(0, 1234, 10_000).unwrap();
        // Keep a slot alive in the file for the read-only view below by
        // leaking the ledger (its slot stays, owned by this live process).
        std::mem::forget(ledger);
    }
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444)).unwrap();
    let before = std::fs::read(&path).unwrap();
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        // Root ignores permission bits: check as an unprivileged user, the
        // situation a container with a ledger made by another user is in.
        // The build directory may not be reachable for that user: run a copy
        // of this test binary from the scratch directory.
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let exe = dir.join("test-binary");
        std::fs::copy(std::env::current_exe().unwrap(), &exe).unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        let cmd = spawn_child("read-only", &[("LEDGER", path.display().to_string())]);
        let args: Vec<_> = cmd.get_args().map(|a| a.to_os_string()).collect();
        let envs: Vec<_> = cmd
            .get_envs()
            .filter_map(|(k, v)| Some((k.to_os_string(), v?.to_os_string())))
            .collect();
        let mut cmd = std::process::Command::new(&exe);
        cmd.args(args).envs(envs).current_dir(&dir);
        std::os::unix::process::CommandExt::uid(&mut cmd, 65534);
        std::os::unix::process::CommandExt::gid(&mut cmd, 65534);
        cmd.stdin(std::process::Stdio::null());
        // A sibling test thread that forked while `fs::copy` held the copy open for writing
        // keeps that descriptor until its exec: ETXTBSY for a few milliseconds. Retry, bounded.
        let mut attempts = 0;
        let out = loop {
            match cmd.output() {
                Err(e) if e.raw_os_error() == Some(ETXTBSY) && attempts < 100 => {
                    attempts += 1;
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                other => break other.unwrap(),
            }
        };
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "child failed: {stdout}");
        assert!(stdout.contains("refused: ledger file"), "{stdout}");
        assert!(stdout.contains("Permission denied"), "{stdout}");
        assert!(stdout.contains("usage 1234"), "{stdout}");
    } else {
        let err = open_err(&path);
        assert!(err.to_string().contains("Permission denied"), "{err}");
    }
    let snap = open_readonly(&path).unwrap();
    assert_eq!(snap.container_usage[0], 1234);
    assert_eq!(
        std::fs::read(&path).unwrap(),
        before,
        "a read-only view wrote to the file"
    );
}

#[test]
fn racing_creators_all_use_one_valid_file() {
    const CREATORS: usize = 6;
    for round in 0..4 {
        let dir = scratch_dir(&format!("race{round}"));
        let path = dir.join("ledger");
        let mut children: Vec<_> = (0..CREATORS)
            .map(|_| {
                spawn_child("create", &[("LEDGER", path.display().to_string())])
                    .spawn()
                    .unwrap()
            })
            .collect();
        for child in &mut children {
            read_until(child, "ready");
        }
        // Release them all at once; each opens (creating if absent) and
        // reserves 1 byte, then reports the inode it mapped.
        for child in &mut children {
            use std::io::Write;
            writeln!(child.stdin.as_mut().unwrap(), "go").unwrap();
        }
        let inodes: Vec<String> = children
            .iter_mut()
            .map(|c| read_until(c, "inode"))
            .collect();
        assert!(
            inodes.iter().all(|i| *i == inodes[0]),
            "different files: {inodes:?}"
        );
        assert_eq!(
            format!("inode {}", std::fs::metadata(&path).unwrap().ino()),
            inodes[0]
        );
        let snap = open_readonly(&path).unwrap();
        assert_eq!(
            snap.container_usage[0], CREATORS as u64,
            "every creator accounts in one file"
        );
        assert_eq!(snap.slots.len(), CREATORS);
        for child in &mut children {
            drop(child.stdin.take());
            assert!(child.wait().unwrap().success());
        }
        let leftovers: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|n| n != "ledger")
            .collect();
        assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
        assert_eq!(open_readonly(&path).unwrap().container_usage[0], 0);
    }
}

#[test]
#[ignore = "entry point for child processes of the tests above"]
fn child_entry() {
    let Ok(role) = std::env::var(ROLE_VAR) else {
        return;
    };
    let path = std::path::PathBuf::from(arg("LEDGER"));
    match role.as_str() {
        "read-only" => {
            match Ledger::open_shared(&path) {
                Ok(_) => println!("opened read-only file for writing"),
                Err(e) => println!("refused: {e}"),
            }
            match open_readonly(&path) {
                Ok(snap) => println!("usage {}", snap.container_usage[0]),
                Err(e) => println!("status failed: {e}"),
            }
        }
        "create" => {
            println!("ready");
            wait_for_parent();
            let ledger = Ledger::open_shared(&path).expect("open or create");
            ledger.reserve(0, 1, u64::MAX).unwrap();
            println!("inode {}", std::fs::metadata(&path).unwrap().ino());
            wait_for_parent(); // until stdin closes
        }
        other => panic!("unknown role {other}"),
    }
}

/// Linux's "text file busy" errno (`ErrorKind::ExecutableFileBusy` needs a newer Rust than the MSRV).
const ETXTBSY: i32 = 26;
