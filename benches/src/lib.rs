//! Benchmarks only: see `benches/`. Run with `cargo bench -p benches`.
