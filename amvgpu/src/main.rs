//! `amvgpu`: run commands in slices of AMD GPUs and report what they use.
//!
//! - `run` books disjoint compute units in a host-wide ledger (`state`), hands the job its
//!   memory limits, CU mask and hook through the environment, and execs the command.
//! - `status` and `metrics` join that ledger with the hook's per-job memory ledgers.
//! - `demo` shows the whole thing on the simulated HIP runtime.

mod cli;
mod demo;
mod gpus;
mod locate;
mod metrics;
mod procfs;
mod report;
mod run;
mod size;
mod slices;
mod state;
mod usage;

use std::process::ExitCode;

use clap::Parser;

use cli::{Cli, Command};
use state::StateDir;

pub const EXIT_USAGE: u8 = 2;
pub const EXIT_DOES_NOT_FIT: u8 = 3;
pub const EXIT_ENVIRONMENT: u8 = 4;

/// A reason to stop, with the exit code documented in `--help`.
#[derive(Debug)]
pub struct Failure {
    pub code: u8,
    pub message: String,
}

impl Failure {
    pub fn usage(message: String) -> Failure {
        Failure {
            code: EXIT_USAGE,
            message,
        }
    }

    pub fn does_not_fit(message: String) -> Failure {
        Failure {
            code: EXIT_DOES_NOT_FIT,
            message,
        }
    }

    pub fn environment(message: String) -> Failure {
        Failure {
            code: EXIT_ENVIRONMENT,
            message,
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let env = |key: &str| std::env::var(key).ok();
    let state = StateDir::resolve(cli.state_dir.as_deref(), &env);
    let outcome = match cli.command {
        Command::Run(args) => Err(run::run(args, &state, cli.verbose)),
        Command::Status(args) => {
            let report = report::collect(&state);
            if args.json {
                match serde_json::to_string_pretty(&report) {
                    Ok(text) => {
                        println!("{text}");
                        Ok(())
                    }
                    Err(e) => Err(Failure::environment(format!("cannot encode JSON: {e}"))),
                }
            } else {
                print!("{}", report::table(&report, cli.verbose));
                Ok(())
            }
        }
        Command::Metrics(args) => match args.listen {
            Some(addr) => Err(metrics::serve(addr, &state)),
            None => {
                print!("{}", metrics::render(&report::collect(&state)));
                Ok(())
            }
        },
        Command::Demo(_) => demo::demo(cli.verbose),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("amvgpu: {}", failure.message);
            ExitCode::from(failure.code)
        }
    }
}
