//! The allocator behind the linear and pool doors: reuse, alignment, disjointness, real bytes,
//! exact accounting and out-of-memory points under churn, threads and fork (see the fixture).

use testkit::Fixture;

#[test]
fn churn_keeps_blocks_aligned_disjoint_intact_and_accounted() {
    let path = format!("{}/tests/fixtures/churn.c", env!("CARGO_MANIFEST_DIR"));
    let f = Fixture::from_path(path)
        .link_flag("-pthread")
        .compile()
        .unwrap();
    f.run().env("HIPSIM_VRAM", "64m").output().assert_success();
}

#[test]
fn an_address_space_limit_is_not_eaten_by_a_reservation() {
    let path = format!("{}/tests/fixtures/aslimit.c", env!("CARGO_MANIFEST_DIR"));
    let f = Fixture::from_path(path).compile().unwrap();
    f.run().env("HIPSIM_VRAM", "2g").output().assert_success();
}

#[test]
fn threads_sharing_the_allocator_see_one_registry() {
    let path = format!("{}/tests/fixtures/shards.c", env!("CARGO_MANIFEST_DIR"));
    let f = Fixture::from_path(path)
        .link_flag("-pthread")
        .compile()
        .unwrap();
    f.run()
        .env("HIPSIM_DEVICES", "2")
        .env("HIPSIM_VRAM", "256m")
        .output()
        .assert_success();
}
