//! hipMalloc+hipFree through the simulator, beside the mmap+munmap pair each allocation cost
//! before device memory came from a per-device arena. Target: a 4 KiB pair under 300 ns of CPU,
//! so that a hook's added tens of nanoseconds stand out against the simulator's own cost.
//!
//! Run: `cargo bench -p hipsim --bench alloc_pair` (uses the release-built libamdhip64.so).

use testkit::Fixture;

const TARGET_4K_NS: f64 = 300.0;

fn main() {
    let path = format!("{}/benches/alloc_pair.c", env!("CARGO_MANIFEST_DIR"));
    let bench = Fixture::from_path(path)
        .cflag("-O2")
        .compile()
        .unwrap_or_else(|e| panic!("compiling benches/alloc_pair.c: {e}"));
    let out = bench.run().args(["20000", "21"]).output();
    out.assert_success();
    println!("hipMalloc+hipFree pairs, median thread CPU over 21 rounds of 20000:");
    for line in out.stdout.lines() {
        let fields: Vec<f64> = line
            .split_whitespace()
            .map(|f| {
                f.parse()
                    .unwrap_or_else(|_| panic!("bad bench line {line:?}"))
            })
            .collect();
        let [bytes, hip, map] = fields[..] else {
            panic!("bad bench line {line:?}");
        };
        let verdict = if bytes == 4096.0 {
            if hip <= TARGET_4K_NS {
                format!("target <= {TARGET_4K_NS} ns  PASS")
            } else {
                format!("target <= {TARGET_4K_NS} ns  MISS")
            }
        } else {
            "report".to_string()
        };
        println!(
            "  {:>8} KiB: hipsim {hip:8.1} ns | mmap+munmap {map:8.1} ns | {:6.1}x faster | {verdict}",
            bytes / 1024.0,
            map / hip
        );
    }
}
