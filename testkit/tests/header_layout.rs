//! `c/hip_sim_api.h` (what fixtures compile against) must describe the same ABI as `hip-sys`
//! (what the hook and the simulator are written against).

use hip_sys::*;
use std::mem::{offset_of, size_of};

#[test]
fn fixture_header_matches_hip_sys_layouts() {
    let probe = testkit::Fixture::from_source(
        "header_layout",
        r#"#include <stdio.h>
           #include <stddef.h>
           #include "hip_sim_api.h"
           #define S(t) printf(#t " %zu\n", sizeof(t))
           #define O(t, f) printf(#t "." #f " %zu\n", offsetof(t, f))
           int main(void) {
               S(hipExtent); S(hipPitchedPtr); S(hipChannelFormatDesc);
               S(HIP_ARRAY_DESCRIPTOR); O(HIP_ARRAY_DESCRIPTOR, Format);
               S(HIP_ARRAY3D_DESCRIPTOR); O(HIP_ARRAY3D_DESCRIPTOR, Format); O(HIP_ARRAY3D_DESCRIPTOR, Flags);
               S(hipMemLocation); S(hipMemAllocationProp); O(hipMemAllocationProp, location);
               O(hipMemAllocationProp, allocFlags); S(hipMemAccessDesc);
               S(hipMemPoolProps); O(hipMemPoolProps, location); O(hipMemPoolProps, reserved);
               S(hipDeviceProp_tR0000); O(hipDeviceProp_tR0000, totalGlobalMem);
               O(hipDeviceProp_tR0000, multiProcessorCount); O(hipDeviceProp_tR0000, gcnArchName);
               O(hipDeviceProp_tR0000, pageableMemoryAccessUsesHostPageTables);
               S(hipDeviceProp_tR0600); O(hipDeviceProp_tR0600, totalGlobalMem);
               O(hipDeviceProp_tR0600, multiProcessorCount); O(hipDeviceProp_tR0600, gcnArchName);
               O(hipDeviceProp_tR0600, asicRevision);
               return 0;
           }"#,
    )
    .without_hip()
    .compile()
    .unwrap();
    let out = probe.run().output();
    out.assert_success();
    let expected = [
        ("hipExtent", size_of::<hipExtent>()),
        ("hipPitchedPtr", size_of::<hipPitchedPtr>()),
        ("hipChannelFormatDesc", size_of::<hipChannelFormatDesc>()),
        ("HIP_ARRAY_DESCRIPTOR", size_of::<HIP_ARRAY_DESCRIPTOR>()),
        (
            "HIP_ARRAY_DESCRIPTOR.Format",
            offset_of!(HIP_ARRAY_DESCRIPTOR, Format),
        ),
        (
            "HIP_ARRAY3D_DESCRIPTOR",
            size_of::<HIP_ARRAY3D_DESCRIPTOR>(),
        ),
        (
            "HIP_ARRAY3D_DESCRIPTOR.Format",
            offset_of!(HIP_ARRAY3D_DESCRIPTOR, Format),
        ),
        (
            "HIP_ARRAY3D_DESCRIPTOR.Flags",
            offset_of!(HIP_ARRAY3D_DESCRIPTOR, Flags),
        ),
        ("hipMemLocation", size_of::<hipMemLocation>()),
        ("hipMemAllocationProp", size_of::<hipMemAllocationProp>()),
        (
            "hipMemAllocationProp.location",
            offset_of!(hipMemAllocationProp, location),
        ),
        (
            "hipMemAllocationProp.allocFlags",
            offset_of!(hipMemAllocationProp, allocFlags),
        ),
        ("hipMemAccessDesc", size_of::<hipMemAccessDesc>()),
        ("hipMemPoolProps", size_of::<hipMemPoolProps>()),
        (
            "hipMemPoolProps.location",
            offset_of!(hipMemPoolProps, location),
        ),
        (
            "hipMemPoolProps.reserved",
            offset_of!(hipMemPoolProps, reserved),
        ),
        ("hipDeviceProp_tR0000", size_of::<hipDeviceProp_tR0000>()),
        (
            "hipDeviceProp_tR0000.totalGlobalMem",
            offset_of!(hipDeviceProp_tR0000, totalGlobalMem),
        ),
        (
            "hipDeviceProp_tR0000.multiProcessorCount",
            offset_of!(hipDeviceProp_tR0000, multiProcessorCount),
        ),
        (
            "hipDeviceProp_tR0000.gcnArchName",
            offset_of!(hipDeviceProp_tR0000, gcnArchName),
        ),
        (
            "hipDeviceProp_tR0000.pageableMemoryAccessUsesHostPageTables",
            offset_of!(hipDeviceProp_tR0000, pageableMemoryAccessUsesHostPageTables),
        ),
        ("hipDeviceProp_tR0600", size_of::<hipDeviceProp_tR0600>()),
        (
            "hipDeviceProp_tR0600.totalGlobalMem",
            offset_of!(hipDeviceProp_tR0600, totalGlobalMem),
        ),
        (
            "hipDeviceProp_tR0600.multiProcessorCount",
            offset_of!(hipDeviceProp_tR0600, multiProcessorCount),
        ),
        (
            "hipDeviceProp_tR0600.gcnArchName",
            offset_of!(hipDeviceProp_tR0600, gcnArchName),
        ),
        (
            "hipDeviceProp_tR0600.asicRevision",
            offset_of!(hipDeviceProp_tR0600, asicRevision),
        ),
    ];
    let expected: String = expected
        .iter()
        .map(|(name, value)| format!("{name} {value}\n"))
        .collect();
    assert_eq!(out.stdout, expected);
}
