//! Command-line grammar. Every value is parsed here into its final type, so a bad flag is
//! refused by clap (exit 2, naming the flag) before anything is started.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::size;

macro_rules! exit_codes {
    () => {
        "\
Exit codes:
  0    success
  2    usage error: a bad flag or value (nothing was started)
  3    does not fit: not enough free compute units on a requested GPU (nothing was started)
  4    environment problem: hook library, GPU facts or state directory unusable
  126  run: the command was found but could not be executed
  127  run: the command was not found
  other  run: the command's own exit status (amvgpu run becomes the command)"
    };
}

pub const EXIT_CODES: &str = exit_codes!();

#[derive(Debug, Parser)]
#[command(
    name = "amvgpu",
    version,
    about = "Run commands in slices of AMD GPUs (memory limit + compute-unit mask) and see what they use",
    after_help = EXIT_CODES,
)]
pub struct Cli {
    /// Directory of the host-wide CU ledger [default: $AMVGPU_STATE_DIR, else /run/amvgpu
    /// when writable, else /tmp/amvgpu-<uid>]
    #[arg(long, global = true, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,

    /// Say where GPU facts, libraries and the state came from
    #[arg(long, short, global = true)]
    pub verbose: bool,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    Run(RunArgs),
    Status(StatusArgs),
    Metrics(MetricsArgs),
    Demo(DemoArgs),
}

/// Start a command in a GPU slice: memory limit enforced by libamvgpu.so, compute units
/// confined by HSA_CU_MASK, disjoint from every other running `amvgpu run` job.
///
/// amvgpu run replaces itself with the command (exec), so the command keeps amvgpu's pid,
/// gets signals directly and its exit status is amvgpu's. Its slice is free again as soon
/// as that process is gone, however it ended (also SIGKILL).
#[derive(Debug, Args)]
#[command(
    after_help = EXIT_CODES,
    after_long_help = concat!(
        "Examples:\n",
        "  amvgpu run --memory 16G --cores 25 -- python train.py\n",
        "  amvgpu run --gpu 0,1 --memory-percent 50 -- ./serve\n\n",
        "Environment given to the command: LD_AUDIT (the hook), HIP_DEVICE_MEMORY_LIMIT and\n",
        "HIP_DEVICE_MEMORY_LIMIT_<i> (i = index the command sees), HIP_DEVICE_MEMORY_SHARED_CACHE\n",
        "(this job's ledger), ROCR_VISIBLE_DEVICES (the --gpu list, replacing any inherited value)\n",
        "and HSA_CU_MASK (with --cores).\n\n",
        "Without --cores the job books no compute units and gets no mask: it shares the GPU's\n",
        "CUs with everyone. Use --cores 100 to book a whole GPU.\n\n",
        exit_codes!()
    )
)]
pub struct RunArgs {
    /// Host GPU indices for the job, comma-separated (e.g. 0 or 0,1); the command sees them
    /// as 0,1,... in this order
    #[arg(long, value_name = "LIST", default_value = "0", value_parser = parse_gpu_list)]
    pub gpu: GpuList,

    /// Device-memory limit per GPU, binary units (e.g. 16G, 512M, 16GiB)
    #[arg(long, value_name = "SIZE", value_parser = parse_memory, conflicts_with = "memory_percent")]
    pub memory: Option<u64>,

    /// Device-memory limit per GPU as a percentage of its VRAM, 1..100 (e.g. 25)
    #[arg(long, value_name = "PERCENT", value_parser = parse_percent)]
    pub memory_percent: Option<u8>,

    /// Share of each GPU's compute units, percent 1..100 (e.g. 25 = 76 of 304 CUs)
    #[arg(long, value_name = "PERCENT", value_parser = parse_percent)]
    pub cores: Option<u8>,

    /// Path of libamvgpu.so [default: next to amvgpu, then the build tree]
    #[arg(long, value_name = "PATH")]
    pub lib: Option<PathBuf>,

    /// The command and its arguments (after --)
    #[arg(required = true, last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// Show every running job: GPU, CU list, memory limit, bytes used now and at peak,
/// processes and their command lines.
#[derive(Debug, Args)]
#[command(after_help = EXIT_CODES)]
pub struct StatusArgs {
    /// Print JSON instead of a table
    #[arg(long)]
    pub json: bool,
}

/// Print the jobs' numbers in Prometheus text format (HAMi's metric names), once or served
/// over HTTP.
#[derive(Debug, Args)]
#[command(after_help = EXIT_CODES)]
pub struct MetricsArgs {
    /// Serve GET /metrics on this address instead of printing once (e.g. 127.0.0.1:9394;
    /// port 0 picks a free port, printed on stderr)
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = "127.0.0.1:9394",
          value_parser = parse_listen)]
    pub listen: Option<SocketAddr>,
}

/// Two HIP workloads side by side in two slices of a simulated GPU: limits enforced,
/// queries virtualized, `status` while they run. Needs no AMD GPU.
#[derive(Debug, Args)]
#[command(after_help = EXIT_CODES)]
pub struct DemoArgs {}

/// Distinct host GPU indices in the order given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuList(pub Vec<u32>);

pub fn parse_gpu_list(text: &str) -> Result<GpuList, String> {
    let example = "expected distinct GPU indices separated by commas, e.g. 0 or 0,1";
    if text.trim().is_empty() {
        return Err(format!("empty GPU list; {example}"));
    }
    let mut gpus = Vec::new();
    for item in text.split(',') {
        let item = item.trim();
        let index: u32 = item
            .parse()
            .map_err(|_| format!("\"{item}\" is not a GPU index; {example}"))?;
        if gpus.contains(&index) {
            return Err(format!("GPU {index} is listed twice; {example}"));
        }
        gpus.push(index);
    }
    Ok(GpuList(gpus))
}

pub fn parse_memory(text: &str) -> Result<u64, String> {
    size::parse_size(text).map_err(|e| e.to_string())
}

pub fn parse_percent(text: &str) -> Result<u8, String> {
    match text.trim().parse::<u32>() {
        Ok(n @ 1..=100) => Ok(n as u8),
        Ok(n) => Err(format!("{n} is outside 1..100; e.g. 25")),
        Err(_) if text.contains('.') => {
            Err(format!("\"{text}\": whole percent only (1..100), e.g. 25"))
        }
        Err(_) => Err(format!("\"{text}\" is not a percentage 1..100; e.g. 25")),
    }
}

pub fn parse_listen(text: &str) -> Result<SocketAddr, String> {
    text.parse().map_err(|_| {
        format!("\"{text}\" is not an address with a port; e.g. 127.0.0.1:9394 or [::1]:9394")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn parse(args: &[&str]) -> Result<Cli, String> {
        Cli::try_parse_from(std::iter::once("amvgpu").chain(args.iter().copied()))
            .map_err(|e| e.to_string())
    }

    fn run_args(args: &[&str]) -> RunArgs {
        match parse(args).unwrap().command {
            Command::Run(run) => run,
            other => panic!("not run: {other:?}"),
        }
    }

    #[test]
    fn grammar_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn run_takes_every_documented_flag() {
        let run = run_args(&[
            "run", "--gpu", "1,0", "--memory", "16G", "--cores", "25", "--lib", "/x.so", "--",
            "python", "-c", "pass",
        ]);
        assert_eq!(run.gpu, GpuList(vec![1, 0]));
        assert_eq!(run.memory, Some(16 << 30));
        assert_eq!(run.cores, Some(25));
        assert_eq!(run.lib.as_deref(), Some(std::path::Path::new("/x.so")));
        assert_eq!(run.command, ["python", "-c", "pass"]);

        let run = run_args(&["run", "--memory-percent", "50", "--", "true"]);
        assert_eq!(run.gpu, GpuList(vec![0]), "GPU 0 by default");
        assert_eq!(run.memory_percent, Some(50));
        assert_eq!(run.memory, None);
        assert_eq!(run.cores, None);
    }

    #[test]
    fn command_flags_after_the_separator_are_not_ours() {
        let run = run_args(&["run", "--", "sh", "--memory", "bogus"]);
        assert_eq!(run.command, ["sh", "--memory", "bogus"]);
        assert_eq!(run.memory, None);
    }

    #[test]
    fn bad_values_name_the_flag_and_show_an_example() {
        let err = parse(&["run", "--memory", "1.5G", "--", "true"]).unwrap_err();
        assert!(err.contains("--memory"), "{err}");
        assert!(err.contains("1536M"), "{err}");

        let err = parse(&["run", "--cores", "0", "--", "true"]).unwrap_err();
        assert!(err.contains("--cores") && err.contains("1..100"), "{err}");
        let err = parse(&["run", "--cores", "101", "--", "true"]).unwrap_err();
        assert!(err.contains("--cores") && err.contains("e.g. 25"), "{err}");
        let err = parse(&["run", "--cores", "12.5", "--", "true"]).unwrap_err();
        assert!(err.contains("whole percent"), "{err}");

        let err = parse(&["run", "--gpu", "0,0", "--", "true"]).unwrap_err();
        assert!(err.contains("--gpu") && err.contains("twice"), "{err}");
        let err = parse(&["run", "--gpu", "first", "--", "true"]).unwrap_err();
        assert!(err.contains("\"first\" is not a GPU index"), "{err}");

        let err = parse(&["metrics", "--listen", "9394"]).unwrap_err();
        assert!(err.contains("127.0.0.1:9394"), "{err}");
    }

    #[test]
    fn memory_and_memory_percent_exclude_each_other() {
        let err = parse(&[
            "run",
            "--memory",
            "1G",
            "--memory-percent",
            "5",
            "--",
            "true",
        ])
        .unwrap_err();
        assert!(err.contains("--memory-percent"), "{err}");
    }

    #[test]
    fn run_needs_a_command() {
        let err = parse(&["run", "--memory", "1G"]).unwrap_err();
        assert!(err.contains("CMD"), "{err}");
    }

    #[test]
    fn listen_defaults_to_loopback() {
        match parse(&["metrics", "--listen"]).unwrap().command {
            Command::Metrics(m) => {
                assert_eq!(m.listen, Some("127.0.0.1:9394".parse().unwrap()))
            }
            other => panic!("{other:?}"),
        }
        match parse(&["metrics"]).unwrap().command {
            Command::Metrics(m) => assert_eq!(m.listen, None, "printed once by default"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn help_documents_exit_codes_for_every_subcommand() {
        for sub in ["run", "status", "metrics", "demo"] {
            let err = parse(&[sub, "--help"]).unwrap_err();
            assert!(
                err.contains("Exit codes"),
                "{sub} --help lacks exit codes: {err}"
            );
        }
    }
}
