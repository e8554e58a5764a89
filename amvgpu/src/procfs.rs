//! The few facts about processes that the CU ledger keys on, read from /proc.
//!
//! A pid alone does not name a process: pids are reused. The pair (pid, start time), the
//! start time being field 22 of /proc/<pid>/stat in clock ticks since boot, does, for as
//! long as the machine is up.

use std::fs;
use std::io;

/// A process as the ledger names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProcessKey {
    pub pid: u32,
    pub start_time: u64,
}

/// What /proc/<pid>/stat says about a process that matters here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatFacts {
    pub state: char,
    pub start_time: u64,
}

/// Parses /proc/<pid>/stat text. The command name (field 2) is in parentheses and may
/// itself contain spaces and parentheses, so fields are counted from the *last* `)`.
pub fn parse_stat(text: &str) -> Option<StatFacts> {
    let after_name = &text[text.rfind(')')? + 1..];
    let mut fields = after_name.split_ascii_whitespace();
    // After the name come field 3 (state) .. ; start time is field 22, i.e. the 20th here.
    let state = fields.next()?.chars().next()?;
    let start_time = fields.nth(18)?.parse().ok()?;
    Some(StatFacts { state, start_time })
}

/// Reads the stat facts of `pid`; `None` when there is no such process.
pub fn stat_of(pid: u32) -> Option<StatFacts> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&text)
}

/// The key of the calling process. After `exec` the pid and the start time stay the same,
/// which is what lets `amvgpu run` record the key before it becomes the command.
pub fn own_key() -> io::Result<ProcessKey> {
    let pid = std::process::id();
    let facts = stat_of(pid).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("cannot read the start time in /proc/{pid}/stat"),
        )
    })?;
    Ok(ProcessKey {
        pid,
        start_time: facts.start_time,
    })
}

/// True while the process named by `key` runs. A zombie (killed, not yet reaped) has
/// finished using the GPU, so it counts as gone; a different start time means the pid
/// was reused by someone else.
pub fn is_alive(key: ProcessKey) -> bool {
    match stat_of(key.pid) {
        Some(facts) => facts.start_time == key.start_time && !matches!(facts.state, 'Z' | 'X'),
        None => false,
    }
}

/// The command line of `pid` with arguments joined by spaces, or `None` if it is gone
/// (kernel threads and zombies have an empty one).
pub fn cmdline_of(pid: u32) -> Option<String> {
    let raw = fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let parts: Vec<String> = raw
        .split(|&b| b == 0)
        .filter(|part| !part.is_empty())
        .map(|part| String::from_utf8_lossy(part).into_owned())
        .collect();
    if parts.is_empty() {
        None
    } else {
        Some(parts.join(" "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_time_is_field_22_even_with_odd_command_names() {
        let line = "4242 (we ird) (x)) S 1 4242 4242 0 -1 4194560 100 0 0 0 \
                    1 2 0 0 20 0 1 0 987654 1000000 100 18446744073709551615";
        let facts = parse_stat(line).unwrap();
        assert_eq!(facts.state, 'S');
        assert_eq!(facts.start_time, 987654);
    }

    #[test]
    fn own_process_is_alive_and_a_wrong_start_time_is_not() {
        let me = own_key().unwrap();
        assert!(is_alive(me));
        assert!(!is_alive(ProcessKey {
            pid: me.pid,
            start_time: me.start_time + 1
        }));
    }

    #[test]
    fn a_reaped_child_is_dead() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let key = ProcessKey {
            pid: child.id(),
            start_time: stat_of(child.id()).map_or(0, |f| f.start_time),
        };
        child.wait().unwrap();
        assert!(!is_alive(key));
    }
}
