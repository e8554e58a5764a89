//! Every simulated door, exercised by C fixtures under the real loader.

use hip_sys::sim::{array_bytes, mipmapped_bytes};
use testkit::{Compiled, Fixture};

fn fixture(name: &str) -> Compiled {
    let path = format!("{}/tests/fixtures/{name}.c", env!("CARGO_MANIFEST_DIR"));
    Fixture::from_path(path)
        .link_flag("-pthread")
        .link_flag("-ldl")
        .compile()
        .unwrap()
}

#[test]
fn linear_doors_round_to_pages_and_move_real_bytes() {
    fixture("linear").run().output().assert_success();
}

#[test]
fn pitched_doors_allocate_through_the_plt_bound_hipmalloc() {
    // -rdynamic exports the fixture's own hipMalloc, so the PLT call inside libamdhip64 binds to
    // it: the fixture counts those calls.
    let f = Fixture::from_path(format!(
        "{}/tests/fixtures/pitched_plt.c",
        env!("CARGO_MANIFEST_DIR")
    ))
    .link_flag("-rdynamic")
    .link_flag("-ldl")
    .compile()
    .unwrap();
    f.run().output().assert_success();
}

#[test]
fn array_doors_charge_what_hip_sys_sim_predicts() {
    let out = fixture("arrays").run().output();
    out.assert_success();
    let charged: Vec<(String, usize)> = out
        .stdout
        .lines()
        .filter(|l| *l != "ok")
        .map(|l| {
            let (door, bytes) = l.split_once(' ').unwrap();
            (door.to_string(), bytes.parse().unwrap())
        })
        .collect();
    let expected = vec![
        ("hipMallocArray", array_bytes(4, 1000, 300, 0)),
        ("hipMalloc3DArray", array_bytes(4, 64, 64, 10)),
        ("hipArrayCreate", array_bytes(4, 777, 0, 0)),
        ("hipArray3DCreate", array_bytes(16, 128, 100, 3)),
        (
            "hipMallocMipmappedArray",
            mipmapped_bytes(4, 256, 256, 0, 5),
        ),
        ("hipMipmappedArrayCreate", mipmapped_bytes(1, 512, 0, 0, 4)),
    ];
    let expected: Vec<(String, usize)> = expected
        .into_iter()
        .map(|(d, b)| (d.to_string(), b.unwrap()))
        .collect();
    assert_eq!(charged, expected);
    // Sanity of the rule itself: rows padded to 256 bytes, totals to 4 KiB.
    assert_eq!(expected[0].1, 4096 * 300);
    assert_eq!(expected[2].1, 4096);
}

#[test]
fn pools_cache_until_synchronisation_or_trim() {
    fixture("pools").run().output().assert_success();
}

#[test]
fn vmm_bytes_return_only_when_released_and_unmapped() {
    fixture("vmm").run().output().assert_success();
}

#[test]
fn managed_memory_is_counted_but_not_charged() {
    fixture("managed")
        .run()
        .env("HIPSIM_VRAM", "1g")
        .output()
        .assert_success();
}

#[test]
fn size_queries_agree_and_follow_the_environment() {
    let out = fixture("queries").run().output();
    out.assert_success();
    assert_eq!(out.stdout, format!("{} 304 9.4 64 gfx942\n", 64u64 << 30));
    let out = fixture("queries")
        .run()
        .env("HIPSIM_VRAM", "1536m")
        .env("HIPSIM_ARCH", "gfx1100")
        .env("HIPSIM_CUS", "96")
        .output();
    out.assert_success();
    assert_eq!(
        out.stdout,
        format!("{} 96 11.0 32 gfx1100\n", 1536u64 << 20)
    );
}

#[test]
fn devices_are_per_thread_and_accounted_separately() {
    fixture("devices")
        .run()
        .env("HIPSIM_DEVICES", "3")
        .output()
        .assert_success();
}

#[test]
fn lookups_return_the_exported_versioned_doors() {
    fixture("lookup").run().output().assert_success();
}

#[test]
fn bad_configuration_fails_every_call_with_a_clear_message() {
    for (var, value, why) in [
        (
            "HIPSIM_VRAM",
            "4GB",
            "HIPSIM_VRAM=\"4GB\": unknown suffix \"GB\"",
        ),
        ("HIPSIM_VRAM", "1.5g", "HIPSIM_VRAM=\"1.5g\""),
        (
            "HIPSIM_DEVICES",
            "two",
            "HIPSIM_DEVICES=\"two\": not a decimal number",
        ),
        ("HIPSIM_CUS", "0", "HIPSIM_CUS=\"0\""),
    ] {
        let out = fixture("config_errors")
            .run()
            .env(var, value)
            .arg("3")
            .output();
        out.assert_success();
        assert!(
            out.stderr.contains(why),
            "{var}={value}: stderr was {:?}",
            out.stderr
        );
        assert_eq!(
            out.stderr.lines().count(),
            1,
            "one message, not one per call: {}",
            out.stderr
        );
        assert_eq!(out.stdout, "count=3\n");
        assert!(
            !out.stdout.contains("hipsim"),
            "diagnostics must not go to stdout"
        );
    }
}

#[test]
fn a_machine_without_devices_answers_like_the_real_runtime() {
    // Measured on ROCm 5.2 without a GPU: hipGetDeviceCount gives hipErrorNoDevice (100) and
    // every device-bound call hipErrorInvalidDevice (101); see tests/real_runtime.rs.
    let out = fixture("config_errors")
        .run()
        .env("HIPSIM_DEVICES", "0")
        .arg("101")
        .output();
    out.assert_success();
    assert_eq!(out.stdout, "count=100\n");
    assert_eq!(out.stderr, "");
}

#[test]
fn null_out_pointers_bad_devices_and_bogus_handles_are_refused() {
    fixture("nulls").run().output().assert_success();
}

#[test]
fn rocm5_build_reads_rocm5_allocation_props() {
    let dir = testkit::hipsim_for_abi(testkit::RocmAbi::Rocm5);
    let f = Fixture::from_path(format!(
        "{}/tests/fixtures/vmm_rocm5.c",
        env!("CARGO_MANIFEST_DIR")
    ))
    .hip_dir(&dir)
    .compile()
    .unwrap();
    f.run().env("HIPSIM_DEVICES", "2").output().assert_success();
}
