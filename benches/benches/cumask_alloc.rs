//! CU allocation on a fragmented 304-CU MI300X (gfx942), plus parse/format of the
//! resulting masks. `cargo bench -p benches --bench cumask_alloc`.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use cumask::{allocate, parse_cu_list, CuSet, HsaCuMask, Topology};

/// Everything taken except 8-CU holes every 24 CUs: 13 holes, 104 free CUs, no free run
/// longer than 8, the way a busy node looks after tenants of mixed sizes came and went.
fn fragmented(topo: &Topology) -> CuSet {
    let mut taken = topo.all();
    for start in (0..topo.cu_count() as u16).step_by(24) {
        let end = (start + 8).min(topo.cu_count() as u16);
        taken = taken.difference(&CuSet::range(start, end));
    }
    taken
}

fn bench_allocate(c: &mut Criterion) {
    let mi300x = Topology::from_target("gfx942", 304).unwrap();
    let taken = fragmented(&mi300x);
    assert_eq!(mi300x.cu_count() as usize - taken.len(), 104);
    let mut group = c.benchmark_group("cumask_allocate_fragmented_304");
    // 25 % (76 -> 72 CUs): no hole fits, so a balanced union of nine holes.
    group.bench_function("gfx942_25pct_union", |b| {
        b.iter(|| allocate(black_box(&mi300x), black_box(&taken), black_box(76)).unwrap())
    });
    // 8 CUs: the best-fit contiguous path over 13 equal holes.
    group.bench_function("gfx942_8cu_best_fit", |b| {
        b.iter(|| allocate(black_box(&mi300x), black_box(&taken), black_box(8)).unwrap())
    });
    // An empty device: the common first-tenant case.
    group.bench_function("gfx942_25pct_empty_device", |b| {
        b.iter(|| allocate(black_box(&mi300x), black_box(&CuSet::new()), black_box(76)).unwrap())
    });
    let gfx90a = Topology::from_target("gfx90a", 104).unwrap();
    let taken_90a = fragmented(&gfx90a);
    group.bench_function("gfx90a_union_largest_runs_first", |b| {
        b.iter(|| allocate(black_box(&gfx90a), black_box(&taken_90a), black_box(30)).unwrap())
    });
    group.finish();
}

fn bench_text(c: &mut Criterion) {
    let mi300x = Topology::from_target("gfx942", 304).unwrap();
    let slice = allocate(&mi300x, &fragmented(&mi300x), 76).unwrap();
    let text = slice.to_string();
    let mut mask = HsaCuMask::new();
    for gpu in 0..8 {
        mask.set(gpu, slice).unwrap();
    }
    let mask_text = mask.to_string();
    let mut group = c.benchmark_group("cumask_text");
    group.bench_function("parse_fragmented_cu_list", |b| {
        b.iter(|| parse_cu_list(black_box(&text), 304).unwrap())
    });
    group.bench_function("format_hsa_cu_mask_8_gpus_into_buffer", |b| {
        let mut buf = [0u8; 1024];
        b.iter(|| {
            black_box(&mask)
                .format_into(&mut buf)
                .map(str::len)
                .unwrap()
        })
    });
    group.bench_function("parse_hsa_cu_mask_8_gpus", |b| {
        b.iter(|| HsaCuMask::parse_for(black_box(&mask_text), 8, 304).unwrap())
    });
    group.finish();
}

criterion_group!(benches, bench_allocate, bench_text);
criterion_main!(benches);
