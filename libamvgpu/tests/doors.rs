//! Every allocation door is held to the limit, counted as the runtime charges it (padded pitch,
//! array rows, mipmap levels, pages), on the device the memory lands on; every free door gives
//! it back; runtime-internal calls are not counted twice; dlsym/hipGetProcAddress hand out
//! wrapped functions.
//!
//! Expected charges come from `hip_sys::sim`, the simulator's documented sizing rules, which
//! model what the real runtime takes. The simulator's own bookkeeping (`usage:D`) is the oracle.

mod common;
use common::*;
use hip_sys::sim;

const LIMIT: u64 = 8 * MIB;

fn linear(n: u64) -> u64 {
    sim::linear_bytes(n as usize).unwrap() as u64
}
fn pitched(w: u64, h: u64, d: u64) -> u64 {
    sim::pitched_bytes(w as usize, h as usize, d as usize).unwrap() as u64
}
fn array(w: u64, h: u64, d: u64) -> u64 {
    sim::array_bytes(4, w as usize, h as usize, d as usize).unwrap() as u64
}
fn mipmap(w: u64, h: u64, d: u64, levels: u32) -> u64 {
    sim::mipmapped_bytes(4, w as usize, h as usize, d as usize, levels).unwrap() as u64
}

/// Allocates through `alloc` (into slot 0), checks the container is charged exactly `charged`
/// and no more fits, frees through `free`, and checks everything came back.
fn door_is_counted_and_released(name: &str, alloc: &str, free: &[&str], charged: u64) {
    door_case(name, alloc, free, charged, true)
}

/// `device_backed`: whether the simulated device itself is charged (hipMallocManaged is
/// host-backed in the simulator: the container is charged, the device's live bytes are not).
fn door_case(name: &str, alloc: &str, free: &[&str], charged: u64, device_backed: bool) {
    assert!(
        charged > 0 && charged < LIMIT,
        "test bug: {name} charge {charged}"
    );
    let sb = Sandbox::new(name, 1).limit("8m");
    let one_page_too_many = format!("malloc:1:{}", LIMIT - charged + 4096);
    let the_rest = format!("malloc:2:{}", LIMIT - charged);
    let mut steps = vec![
        alloc,
        "meminfo",
        &one_page_too_many,
        &the_rest,
        "usage:0",
        "free:2",
    ];
    steps.extend_from_slice(free);
    let after_free = steps.len();
    steps.extend_from_slice(&["meminfo", "malloc:3:8m", "usage:0"]);
    let r = sb.run(&steps);
    r.expect_clean_exit();
    r.expect_ok(0);
    assert_eq!(
        r.meminfo(1),
        (LIMIT - charged, LIMIT),
        "{name}: `{alloc}` must be charged {charged} bytes\n{r}"
    );
    r.expect_oom(2).expect_ok(3);
    let device_live = if device_backed {
        LIMIT
    } else {
        LIMIT - charged
    };
    assert_eq!(
        r.usage(4),
        (device_live, device_live),
        "{name}: what the runtime holds\n{r}"
    );
    r.expect_ok(5);
    for i in 0..free.len() {
        r.expect_ok(6 + i);
    }
    assert_eq!(
        r.meminfo(after_free),
        (LIMIT, LIMIT),
        "{name}: {free:?} must release\n{r}"
    );
    r.expect_ok(after_free + 1);
    assert!(
        r.usage(after_free + 2).1 <= LIMIT,
        "{name}: runtime peak above the limit\n{r}"
    );
}

/// An allocation through `alloc` that the runtime would charge more than the limit is refused
/// with hipErrorOutOfMemory and nothing is allocated. For padded doors `naive` (the unpadded
/// size) is below the limit: a hook that counts requested instead of charged bytes lets it
/// through. For linear doors it equals `charged`.
fn door_refuses_over_limit(name: &str, alloc: &str, charged: u64, naive: u64) {
    assert!(
        charged > LIMIT && (naive <= LIMIT || naive == charged),
        "test bug: {name} {charged} {naive}"
    );
    let sb = Sandbox::new(name, 1).limit("8m");
    let r = sb.run(&[alloc, "usage:0", "malloc:1:8m"]);
    r.expect_clean_exit();
    r.expect_oom(0);
    assert_eq!(
        r.usage(1),
        (0, 0),
        "{name}: a refused door must allocate nothing\n{r}"
    );
    r.expect_ok(2);
}

#[test]
fn hip_malloc() {
    door_is_counted_and_released("malloc", "malloc:0:6m", &["free:0"], 6 * MIB);
}

#[test]
fn hip_malloc_rounds_like_the_runtime() {
    // 256 one-byte allocations take 256 pages = 1 MiB; the 257th must be refused.
    let sb = Sandbox::new("pages", 1).limit("1m");
    let r = sb.run(&["loop:1000:1", "usage:0", "freeloop", "meminfo"]);
    r.expect_clean_exit();
    r.expect_oom(0);
    assert_eq!(
        r.val(0, 0),
        MIB / linear(1),
        "one-byte allocations that fit in 1 MiB\n{r}"
    );
    assert_eq!(r.usage(1), (MIB, MIB), "{r}");
    r.expect_ok(2);
    assert_eq!(r.meminfo(3), (MIB, MIB), "{r}");
}

#[test]
fn hip_ext_malloc_with_flags() {
    door_is_counted_and_released("extmalloc", "extmalloc:0:6m:0", &["free:0"], 6 * MIB);
    door_refuses_over_limit("extmalloc_over", "extmalloc:0:9m:0", 9 * MIB, 9 * MIB);
}

#[test]
fn hip_malloc_managed() {
    door_case("managed", "managed:0:6m", &["free:0"], 6 * MIB, false);
    door_refuses_over_limit("managed_over", "managed:0:9m", 9 * MIB, 9 * MIB);
}

#[test]
fn hip_malloc_pitch() {
    // width 1000 pads to a 1024-byte pitch
    door_is_counted_and_released(
        "pitch",
        "pitch:0:1000:4096",
        &["free:0"],
        pitched(1000, 4096, 1),
    );
    door_refuses_over_limit(
        "pitch_over",
        "pitch:0:1000:8193",
        pitched(1000, 8193, 1),
        1000 * 8193,
    );
}

#[test]
fn hip_malloc_pitch_reports_the_pitch_it_charges() {
    let sb = Sandbox::new("pitchval", 1).limit("8m");
    let r = sb.run(&["pitch:0:1000:10"]);
    r.expect_ok(0);
    assert_eq!(r.val(0, 0), sim::pitch_for(1000).unwrap() as u64, "{r}");
}

#[test]
fn hip_mem_alloc_pitch() {
    door_is_counted_and_released(
        "mempitch",
        "mempitch:0:1000:4096:4",
        &["free:0"],
        pitched(1000, 4096, 1),
    );
    door_refuses_over_limit(
        "mempitch_over",
        "mempitch:0:1000:8193:4",
        pitched(1000, 8193, 1),
        1000 * 8193,
    );
}

#[test]
fn hip_malloc_3d() {
    door_is_counted_and_released(
        "m3d",
        "m3d:0:1000:64:64",
        &["free:0"],
        pitched(1000, 64, 64),
    );
    door_refuses_over_limit(
        "m3d_over",
        "m3d:0:1000:64:129",
        pitched(1000, 64, 129),
        1000 * 64 * 129,
    );
}

#[test]
fn hip_malloc_array() {
    door_is_counted_and_released(
        "array",
        "array:0:1000:1024",
        &["freearray:0"],
        array(1000, 1024, 0),
    );
    door_refuses_over_limit(
        "array_over",
        "array:0:1000:2049",
        array(1000, 2049, 0),
        4000 * 2049,
    );
}

#[test]
fn hip_malloc_3d_array() {
    door_is_counted_and_released(
        "array3d",
        "array3d:0:1000:32:32",
        &["freearray:0"],
        array(1000, 32, 32),
    );
    door_refuses_over_limit(
        "array3d_over",
        "array3d:0:1000:32:65",
        array(1000, 32, 65),
        4000 * 32 * 65,
    );
}

#[test]
fn hip_array_create() {
    door_is_counted_and_released(
        "arraycreate",
        "arraycreate:0:1000:1024",
        &["arraydestroy:0"],
        array(1000, 1024, 0),
    );
    door_refuses_over_limit(
        "arraycreate_over",
        "arraycreate:0:1000:2049",
        array(1000, 2049, 0),
        4000 * 2049,
    );
}

#[test]
fn hip_array_3d_create() {
    door_is_counted_and_released(
        "array3dcreate",
        "array3dcreate:0:1000:32:32",
        &["arraydestroy:0"],
        array(1000, 32, 32),
    );
    door_refuses_over_limit(
        "array3dcreate_over",
        "array3dcreate:0:1000:32:65",
        array(1000, 32, 65),
        4000 * 32 * 65,
    );
}

#[test]
fn array_frees_are_interchangeable() {
    // hipFreeArray on a hipArrayCreate array and hipArrayDestroy on a hipMallocArray array.
    door_is_counted_and_released(
        "array_x1",
        "arraycreate:0:1000:1024",
        &["freearray:0"],
        array(1000, 1024, 0),
    );
    door_is_counted_and_released(
        "array_x2",
        "array:0:1000:1024",
        &["arraydestroy:0"],
        array(1000, 1024, 0),
    );
}

#[test]
fn hip_malloc_mipmapped_array() {
    door_is_counted_and_released(
        "mipmap",
        "mipmap:0:1024:1024:0:2",
        &["freemipmap:0"],
        mipmap(1024, 1024, 0, 2),
    );
    // Level 0 alone fits (4000 x 2048 < 8 MiB); level 1 takes it over.
    door_refuses_over_limit(
        "mipmap_over",
        "mipmap:0:1000:2048:0:2",
        mipmap(1000, 2048, 0, 2),
        4000 * 2048,
    );
}

#[test]
fn hip_mipmapped_array_create() {
    door_is_counted_and_released(
        "mipmapcreate",
        "mipmapcreate:0:1024:1024:0:2",
        &["mipmapdestroy:0"],
        mipmap(1024, 1024, 0, 2),
    );
    door_refuses_over_limit(
        "mipmapcreate_over",
        "mipmapcreate:0:1000:2048:0:2",
        mipmap(1000, 2048, 0, 2),
        4000 * 2048,
    );
}

#[test]
fn hip_malloc_async() {
    // The free is stream-ordered and the pool may keep the memory: synchronise and trim the
    // device's default pool before expecting everything back.
    door_is_counted_and_released(
        "async",
        "async:0:6m",
        &["freeasync:0", "sync", "defpool:9:0", "trim:9:0"],
        6 * MIB,
    );
    door_refuses_over_limit("async_over", "async:0:9m", 9 * MIB, 9 * MIB);
}

/// hipFreeAsync leaves the block cached in its pool, still taken from the device, until a
/// synchronisation or a trim: the device must never hold more than the limit meanwhile, and a
/// hipMallocAsync of the same size reuses the cached block (nothing new is taken).
#[test]
fn hip_free_async_cached_blocks_count_until_returned() {
    let sb = Sandbox::new("asynccache", 1).limit("8m");
    let r = sb.run(&[
        "async:0:6m",  // 0
        "freeasync:0", // 1: cached in the default pool
        "malloc:1:4m", // 2: 6 cached + 4 would pass 8 on the device
        "usage:0",     // 3
        "async:2:6m",  // 4: reuses the cached block
        "usage:0",     // 5
        "freeasync:2", // 6
        "sync",        // 7: returns the cache
        "malloc:3:8m", // 8
        "usage:0",     // 9
    ]);
    r.expect_clean_exit().expect_ok(0).expect_ok(1);
    let (_, peak) = r.usage(3);
    assert!(
        peak <= LIMIT,
        "device peak {peak} above the limit with a cached block\n{r}"
    );
    r.expect_ok(4);
    assert!(r.usage(5).1 <= LIMIT, "{r}");
    r.expect_ok(6).expect_ok(7).expect_ok(8);
    assert!(r.usage(9).1 <= LIMIT, "{r}");
}

#[test]
fn hip_malloc_from_pool_async() {
    let sb = Sandbox::new("poolalloc", 1).limit("8m");
    let r = sb.run(&[
        "poolcreate:9:0",   // 0
        "poolalloc:0:6m:9", // 1
        "meminfo",          // 2
        "poolalloc:1:3m:9", // 3
        "malloc:2:3m",      // 4
        "freeasync:0",      // 5
        "sync",             // 6
        "trim:9:0",         // 7
        "meminfo",          // 8
        "malloc:3:8m",      // 9
        "usage:0",          // 10
        "pooldestroy:9",    // 11
    ]);
    r.expect_clean_exit().expect_ok(0).expect_ok(1);
    assert_eq!(r.meminfo(2), (2 * MIB, LIMIT), "{r}");
    r.expect_oom(3)
        .expect_oom(4)
        .expect_ok(5)
        .expect_ok(6)
        .expect_ok(7);
    assert_eq!(
        r.meminfo(8),
        (LIMIT, LIMIT),
        "trimmed pool memory comes back\n{r}"
    );
    r.expect_ok(9);
    assert!(r.usage(10).1 <= LIMIT, "{r}");
}

/// A pool created on device 1 charges device 1, whatever the calling thread's device is.
#[test]
fn hip_malloc_from_pool_async_charges_the_pools_device() {
    let sb = Sandbox::new("pooldev", 2).limit("8m").device_limit(1, "4m");
    let r = sb.run(&[
        "poolcreate:9:1",   // 0 (current device stays 0)
        "poolalloc:0:5m:9", // 1: over device 1's 4m, under device 0's 8m
        "poolalloc:1:3m:9", // 2
        "meminfo",          // 3: device 0 untouched
        "dev:1",            // 4
        "meminfo",          // 5: device 1 charged 3m
        "usage:1",          // 6
    ]);
    r.expect_clean_exit()
        .expect_ok(0)
        .expect_oom(1)
        .expect_ok(2);
    assert_eq!(
        r.meminfo(3),
        (LIMIT, LIMIT),
        "device 0 must not be charged\n{r}"
    );
    assert_eq!(r.meminfo(5), (MIB, 4 * MIB), "device 1 is charged\n{r}");
    assert!(r.usage(6).1 <= 4 * MIB, "{r}");
}

#[test]
fn hip_mem_create_is_counted_and_refused_over_the_limit() {
    let sb = Sandbox::new("memcreate", 1).limit("8m");
    let r = sb.run(&[
        "memcreate:0:6m:0",
        "meminfo",
        "memcreate:1:4m:0",
        "usage:0",
        "release:0",
        "meminfo",
    ]);
    r.expect_clean_exit().expect_ok(0);
    assert_eq!(r.meminfo(1), (2 * MIB, LIMIT), "{r}");
    r.expect_oom(2);
    assert_eq!(
        r.usage(3).0,
        6 * MIB,
        "the refused handle allocated nothing\n{r}"
    );
    r.expect_ok(4);
    assert_eq!(
        r.meminfo(5),
        (LIMIT, LIMIT),
        "an unmapped released handle gives its memory back\n{r}"
    );
}

/// VMM: the memory of a handle stays in use while it is mapped, even after hipMemRelease; it
/// comes back once it is both released and unmapped, in either order.
#[test]
fn hip_mem_create_memory_returns_only_when_released_and_unmapped() {
    let sb = Sandbox::new("vmm", 1).limit("8m");
    let r = sb.run(&[
        "memcreate:0:6m:0", // 0
        "reserve:1:6m",     // 1
        "map:1:6m:0",       // 2
        "release:0",        // 3: still mapped
        "meminfo",          // 4
        "malloc:2:4m",      // 5: must still be refused
        "usage:0",          // 6
        "unmap:1:6m",       // 7
        "meminfo",          // 8
        "malloc:3:8m",      // 9
        "free:3",           // 10
        // other order: unmap first, then release
        "memcreate:4:6m:0", // 11
        "map:1:6m:4",       // 12
        "unmap:1:6m",       // 13
        "meminfo",          // 14: unmapped but not released: still charged
        "release:4",        // 15
        "meminfo",          // 16
        "addrfree:1:6m",    // 17
        "usage:0",          // 18
    ]);
    r.expect_clean_exit();
    for i in [0, 1, 2, 3] {
        r.expect_ok(i);
    }
    assert_eq!(
        r.meminfo(4),
        (2 * MIB, LIMIT),
        "released but mapped: still charged\n{r}"
    );
    r.expect_oom(5);
    assert_eq!(r.usage(6).0, 6 * MIB, "{r}");
    r.expect_ok(7);
    assert_eq!(
        r.meminfo(8),
        (LIMIT, LIMIT),
        "released and unmapped: returned\n{r}"
    );
    r.expect_ok(9)
        .expect_ok(10)
        .expect_ok(11)
        .expect_ok(12)
        .expect_ok(13);
    assert_eq!(
        r.meminfo(14),
        (2 * MIB, LIMIT),
        "unmapped but not released: still charged\n{r}"
    );
    r.expect_ok(15);
    assert_eq!(r.meminfo(16), (LIMIT, LIMIT), "{r}");
    r.expect_ok(17);
    assert!(r.usage(18).1 <= LIMIT, "{r}");
}

#[test]
fn hip_mem_create_charges_the_device_in_its_properties() {
    let sb = Sandbox::new("memcreate_dev", 2)
        .limit("8m")
        .device_limit(1, "4m");
    let r = sb.run(&[
        "memcreate:0:6m:1",
        "memcreate:1:4m:1",
        "meminfo",
        "dev:1",
        "meminfo",
    ]);
    r.expect_clean_exit().expect_oom(0).expect_ok(1);
    assert_eq!(r.meminfo(2), (LIMIT, LIMIT), "device 0 untouched\n{r}");
    assert_eq!(r.meminfo(4), (0, 4 * MIB), "device 1 charged\n{r}");
}

#[test]
fn hip_malloc_charges_the_current_device() {
    let sb = Sandbox::new("curdev", 2).limit("8m");
    let r = sb.run(&[
        "dev:1",
        "malloc:0:6m",
        "meminfo",
        "dev:0",
        "meminfo",
        "malloc:1:8m",
    ]);
    r.expect_clean_exit().expect_ok(1);
    assert_eq!(r.meminfo(2), (2 * MIB, LIMIT), "{r}");
    assert_eq!(r.meminfo(4), (LIMIT, LIMIT), "{r}");
    r.expect_ok(5);
}

/// hipMallocManaged and hipMallocPitch call hipMalloc inside the simulated runtime: the
/// container must be charged once, so an allocation of exactly the limit still fits.
#[test]
fn runtime_internal_calls_are_not_counted_twice() {
    let sb = Sandbox::new("internal", 1).limit("8m");
    let r = sb.run(&[
        "managed:0:8m",
        "meminfo",
        "free:0",
        "pitch:1:1024:8192",
        "meminfo",
        "free:1",
        "meminfo",
        "usage:0",
    ]);
    r.expect_clean_exit().expect_ok(0);
    assert_eq!(r.meminfo(1), (0, LIMIT), "{r}");
    r.expect_ok(2).expect_ok(3);
    assert_eq!(r.meminfo(4), (0, LIMIT), "{r}");
    r.expect_ok(5);
    assert_eq!(r.meminfo(6), (LIMIT, LIMIT), "{r}");
    assert_eq!(r.usage(7), (0, LIMIT), "{r}");
}

/// The runtime allocating for itself from outside any door (its own PLT-bound hipMalloc,
/// called from an entry point the hook does not wrap) is not the program's allocation: the
/// hook points the runtime's own references back at its real functions, so it is not counted.
#[test]
fn runtime_allocations_outside_any_door_are_not_counted() {
    let sb = Sandbox::new("selfalloc", 1).limit("8m");
    let r = sb.run(&[
        "internal:0:6m", // 0
        "meminfo",       // 1
        "malloc:1:8m",   // 2
        "usage:0",       // 3
        "free:0",        // 4
        "free:1",        // 5
        "meminfo",       // 6
    ]);
    r.expect_clean_exit().expect_ok(0);
    assert_eq!(
        r.meminfo(1),
        (LIMIT, LIMIT),
        "the runtime's own allocation was charged to the container\n{r}"
    );
    r.expect_ok(2);
    assert_eq!(r.usage(3).0, 14 * MIB, "{r}");
    r.expect_ok(4).expect_ok(5);
    assert_eq!(r.meminfo(6), (LIMIT, LIMIT), "{r}");
}

#[test]
fn hip_device_reset_releases_the_devices_memory() {
    let sb = Sandbox::new("reset", 2).limit("8m");
    let r = sb.run(&[
        "malloc:0:2m",      // 0
        "array:1:1000:256", // 1
        "memcreate:2:2m:0", // 2
        "dev:1",            // 3
        "malloc:3:4m",      // 4: device 1, must survive device 0's reset
        "dev:0",            // 5
        "reset",            // 6
        "meminfo",          // 7
        "malloc:4:8m",      // 8
        "dev:1",            // 9
        "meminfo",          // 10
        "usage:0",          // 11
    ]);
    r.expect_clean_exit();
    for i in [0, 1, 2, 3, 4, 5, 6] {
        r.expect_ok(i);
    }
    assert_eq!(
        r.meminfo(7),
        (LIMIT, LIMIT),
        "hipDeviceReset released device 0\n{r}"
    );
    r.expect_ok(8);
    assert_eq!(
        r.meminfo(10),
        (4 * MIB, LIMIT),
        "device 1 keeps its allocation\n{r}"
    );
    assert!(r.usage(11).1 <= LIMIT, "{r}");
}

#[test]
fn dlsym_hands_out_a_wrapped_hip_malloc() {
    let sb = Sandbox::new("dlsym", 1).limit("8m");
    let r = sb.run(&["dlsym:0:6m", "dlsym:1:4m", "meminfo", "usage:0"]);
    r.expect_clean_exit().expect_ok(0).expect_oom(1);
    assert_eq!(r.meminfo(2), (2 * MIB, LIMIT), "{r}");
    assert_eq!(r.usage(3).1, 6 * MIB, "{r}");
}

#[test]
fn hip_get_proc_address_hands_out_a_wrapped_hip_malloc() {
    let sb = Sandbox::new("procaddr", 1).limit("8m");
    let r = sb.run(&["procaddr:0:6m", "procaddr:1:4m", "meminfo", "usage:0"]);
    r.expect_clean_exit().expect_ok(0).expect_oom(1);
    assert_eq!(r.meminfo(2), (2 * MIB, LIMIT), "{r}");
    assert_eq!(r.usage(3).1, 6 * MIB, "{r}");
}

/// `-z now` and LD_BIND_NOW=1: every slot bound at start-up, to the redirected definition.
#[test]
fn bind_now_programs_are_wrapped() {
    let sb = Sandbox::new("bindnow", 1).limit("8m").binding(Binding::Now);
    let r = sb.run(&["malloc:0:6m", "malloc:1:4m", "meminfo", "usage:0"]);
    r.expect_clean_exit().expect_ok(0).expect_oom(1);
    assert_eq!(r.meminfo(2), (2 * MIB, LIMIT), "{r}");
    assert_eq!(r.usage(3).1, 6 * MIB, "{r}");
}

/// `-fno-plt` code calls through GOT slots filled at start-up; the hook must still hold it to
/// the limit (the slots resolve to the redirected definitions).
#[test]
fn no_plt_programs_are_wrapped() {
    let sb = Sandbox::new("noplt", 1).limit("8m").binding(Binding::NoPlt);
    let r = sb.run(&[
        "malloc:0:6m",
        "malloc:1:4m",
        "meminfo",
        "props6:0",
        "usage:0",
    ]);
    r.expect_clean_exit().expect_ok(0).expect_oom(1);
    assert_eq!(r.meminfo(2), (2 * MIB, LIMIT), "{r}");
    assert_eq!(r.val(3, 0), LIMIT, "{r}");
    assert_eq!(r.usage(4).1, 6 * MIB, "{r}");
}

/// hipMemPoolTrimTo alone (no synchronisation) gives back what it trims, and only that: the
/// runtime returns the most recently freed blocks first until at most `keep` bytes stay cached.
#[test]
fn hip_mem_pool_trim_to_releases_what_it_trims() {
    let sb = Sandbox::new("trim", 1).limit("8m");
    let r = sb.run(&[
        "poolcreate:9:0",   // 0
        "poolalloc:0:4m:9", // 1
        "poolalloc:1:2m:9", // 2
        "freeasync:0",      // 3: 4m cached
        "freeasync:1",      // 4: 2m cached (most recent)
        "trim:9:4m",        // 5: returns the 2m block, keeps 4m
        "meminfo",          // 6
        "malloc:2:5m",      // 7: 4m still cached: refused
        "malloc:3:4m",      // 8
        "usage:0",          // 9
        "trim:9:0",         // 10
        "meminfo",          // 11
        "free:3",           // 12
        "meminfo",          // 13
    ]);
    r.expect_clean_exit();
    for i in 0..6 {
        r.expect_ok(i);
    }
    assert_eq!(r.meminfo(6), (4 * MIB, LIMIT), "{r}");
    r.expect_oom(7).expect_ok(8);
    assert!(r.usage(9).1 <= LIMIT, "{r}");
    r.expect_ok(10);
    assert_eq!(r.meminfo(11), (4 * MIB, LIMIT), "{r}");
    r.expect_ok(12);
    assert_eq!(r.meminfo(13), (LIMIT, LIMIT), "{r}");
}

/// One allocation a model-based run made: how to free it, on which device it landed and what
/// it was charged.
struct Live {
    slot: usize,
    free: &'static str,
    device: usize,
    charged: u64,
}

/// Runs a deterministic pseudo-random mix of every device-backed door and its frees against a
/// model that knows what the runtime charges: each allocation must succeed exactly when it fits
/// under its device's limit, and at every checkpoint the hook's view (limit - hipMemGetInfo
/// free) must equal what the simulated device really holds. Frees happen with whatever device
/// is current, so they must find the device from the pointer.
fn random_mix(seed: u64, limits: &[u64]) {
    let mut x = seed;
    let mut next = move |bound: u64| -> u64 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % bound
    };
    let devices = limits.len();
    let mut steps: Vec<String> = Vec::new();
    // (step, expected rc); checkpoints: (device, meminfo step, usage step, model's bytes)
    let mut expect: Vec<(usize, i64)> = Vec::new();
    let mut checkpoints: Vec<(usize, usize, usize, u64)> = Vec::new();
    let mut live: Vec<Live> = Vec::new();
    let mut free_slots: Vec<usize> = (0..200).rev().collect();
    let mut used = vec![0u64; devices];
    let mut current = 0usize;
    let set_device = |steps: &mut Vec<String>, expect: &mut Vec<(usize, i64)>, d: usize| {
        steps.push(format!("dev:{d}"));
        expect.push((steps.len() - 1, HIP_SUCCESS));
    };
    for op in 0..240 {
        if devices > 1 && next(4) == 0 {
            current = next(devices as u64) as usize;
            set_device(&mut steps, &mut expect, current);
        }
        if !live.is_empty() && (next(3) == 0 || free_slots.is_empty()) {
            let l = live.swap_remove(next(live.len() as u64) as usize);
            steps.push(format!("{}:{}", l.free, l.slot));
            expect.push((steps.len() - 1, HIP_SUCCESS));
            used[l.device] -= l.charged;
            free_slots.push(l.slot);
        } else {
            let slot = free_slots.pop().expect("a free slot");
            let mut device = current;
            let (step, free, charged) = match next(8) {
                0 | 1 => {
                    let n = next(3 * MIB) + 1;
                    (format!("malloc:{slot}:{n}"), "free", linear(n))
                }
                2 => {
                    let (w, h) = (next(4096) + 1, next(512) + 1);
                    (format!("pitch:{slot}:{w}:{h}"), "free", pitched(w, h, 1))
                }
                3 => {
                    let (w, h, d) = (next(2048) + 1, next(64) + 1, next(16) + 1);
                    (format!("m3d:{slot}:{w}:{h}:{d}"), "free", pitched(w, h, d))
                }
                4 => {
                    let (w, h) = (next(2048) + 1, next(512));
                    (format!("array:{slot}:{w}:{h}"), "freearray", array(w, h, 0))
                }
                5 => {
                    let (w, h, d) = (next(512) + 1, next(64) + 1, next(16) + 1);
                    (
                        format!("array3dcreate:{slot}:{w}:{h}:{d}"),
                        "arraydestroy",
                        array(w, h, d),
                    )
                }
                6 => {
                    let (w, h, l) = (next(1024) + 1, next(1024) + 1, next(4) as u32 + 1);
                    (
                        format!("mipmap:{slot}:{w}:{h}:0:{l}"),
                        "freemipmap",
                        mipmap(w, h, 0, l),
                    )
                }
                _ => {
                    // VMM names its device in the properties, whatever the current one is
                    device = next(devices as u64) as usize;
                    let n = (next(2) + 1) * 2 * MIB;
                    (format!("memcreate:{slot}:{n}:{device}"), "release", n)
                }
            };
            steps.push(step);
            if used[device] + charged <= limits[device] {
                expect.push((steps.len() - 1, HIP_SUCCESS));
                used[device] += charged;
                live.push(Live {
                    slot,
                    free,
                    device,
                    charged,
                });
            } else {
                expect.push((steps.len() - 1, HIP_OUT_OF_MEMORY));
                free_slots.push(slot);
            }
        }
        if op % 8 == 7 {
            for (d, &bytes) in used.iter().enumerate() {
                if devices > 1 {
                    set_device(&mut steps, &mut expect, d);
                }
                steps.push("meminfo".into());
                steps.push(format!("usage:{d}"));
                checkpoints.push((d, steps.len() - 2, steps.len() - 1, bytes));
            }
            if devices > 1 {
                set_device(&mut steps, &mut expect, current);
            }
        }
    }
    let refusals = expect.iter().filter(|e| e.1 == HIP_OUT_OF_MEMORY).count();
    assert!(
        refusals >= 10 && expect.len() - refusals >= 100,
        "test bug: seed {seed:#x} makes {refusals} refusals of {} calls",
        expect.len()
    );
    let mut sb = Sandbox::new("mix", devices as u32);
    for (d, limit) in limits.iter().enumerate() {
        sb = sb.device_limit(d as u32, &limit.to_string());
    }
    let refs: Vec<&str> = steps.iter().map(String::as_str).collect();
    let r = sb.run(&refs);
    r.expect_clean_exit();
    for (i, rc) in expect {
        assert_eq!(
            r.rc(i),
            rc,
            "seed {seed:#x}: step {i} `{}` (model: {})\n{r}",
            steps[i],
            if rc == 0 { "fits" } else { "over the limit" }
        );
    }
    for (d, m, u, model_used) in checkpoints {
        let (free, total) = r.meminfo(m);
        let (device_live, peak) = r.usage(u);
        assert_eq!(total, limits[d], "seed {seed:#x}, device {d}\n{r}");
        assert_eq!(
            device_live, model_used,
            "test model vs runtime: seed {seed:#x}, device {d}, step {u}"
        );
        assert_eq!(
            limits[d] - free,
            model_used,
            "seed {seed:#x}, device {d}: the hook's usage at step {m} differs from the runtime's\n{r}"
        );
        assert!(
            peak <= limits[d],
            "seed {seed:#x}, device {d}: device peak {peak}\n{r}"
        );
    }
}

#[test]
fn random_mixes_of_doors_match_the_runtimes_charges() {
    for seed in [
        0x2545_f491_4f6c_dd1d_u64,
        0x9e37_79b9_7f4a_7c15,
        0xdead_beef_cafe_f00d,
    ] {
        random_mix(seed, &[16 * MIB]);
    }
}

#[test]
fn random_mixes_over_two_devices_charge_the_right_one() {
    for seed in [0x0123_4567_89ab_cdef_u64, 0x5851_f42d_4c95_7f2d] {
        random_mix(seed, &[16 * MIB, 8 * MIB]);
    }
}

/// One handle mapped at two addresses is charged once, and comes back only after it is
/// released and unmapped at both.
#[test]
fn hip_mem_create_handle_mapped_twice() {
    let sb = Sandbox::new("vmm2", 1).limit("8m");
    let r = sb.run(&[
        "memcreate:0:4m:0", // 0
        "reserve:1:4m",     // 1
        "reserve:2:4m",     // 2
        "map:1:4m:0",       // 3
        "map:2:4m:0",       // 4
        "meminfo",          // 5: charged once
        "release:0",        // 6
        "unmap:1:4m",       // 7
        "meminfo",          // 8: still mapped at the second address
        "malloc:3:6m",      // 9: must be refused
        "unmap:2:4m",       // 10
        "meminfo",          // 11
        "malloc:4:8m",      // 12
        "usage:0",          // 13
    ]);
    r.expect_clean_exit();
    for i in 0..5 {
        r.expect_ok(i);
    }
    assert_eq!(
        r.meminfo(5),
        (4 * MIB, LIMIT),
        "two mappings, one charge\n{r}"
    );
    r.expect_ok(6).expect_ok(7);
    assert_eq!(r.meminfo(8), (4 * MIB, LIMIT), "still mapped once\n{r}");
    r.expect_oom(9).expect_ok(10);
    assert_eq!(r.meminfo(11), (LIMIT, LIMIT), "{r}");
    r.expect_ok(12);
    assert!(r.usage(13).1 <= LIMIT, "{r}");
}

/// hipFreeAsync of hipMalloc memory frees it at once (no pool holds it): it comes back without
/// a synchronisation.
#[test]
fn hip_free_async_of_hip_malloc_memory_releases_at_once() {
    let sb = Sandbox::new("freeasync_malloc", 1).limit("8m");
    let r = sb.run(&[
        "malloc:0:6m",
        "freeasync:0",
        "meminfo",
        "malloc:1:8m",
        "usage:0",
    ]);
    r.expect_clean_exit().expect_ok(0).expect_ok(1);
    assert_eq!(r.meminfo(2), (LIMIT, LIMIT), "{r}");
    r.expect_ok(3);
    assert!(r.usage(4).1 <= LIMIT, "{r}");
}
