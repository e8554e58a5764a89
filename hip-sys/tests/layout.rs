//! The hand-written definitions agree with bindgen's reading of Debian's ROCm 5.2 headers
//! wherever ROCm 5.2 has the type, and the generated file is what the script regenerates.

use hip_sys::generated as g;
use hip_sys::*;
use std::mem::{align_of, offset_of, size_of};

macro_rules! same_layout {
    ($mine:ty, $theirs:ty, [$($field:ident),*]) => {{
        assert_eq!(size_of::<$mine>(), size_of::<$theirs>(), "size of {}", stringify!($mine));
        assert_eq!(align_of::<$mine>(), align_of::<$theirs>(), "align of {}", stringify!($mine));
        $(assert_eq!(
            offset_of!($mine, $field),
            offset_of!($theirs, $field),
            "{}.{}",
            stringify!($mine),
            stringify!($field)
        );)*
    }};
}

#[test]
fn structs_match_rocm52_headers() {
    same_layout!(hipExtent, g::hipExtent, [width, height, depth]);
    same_layout!(hipPitchedPtr, g::hipPitchedPtr, [ptr, pitch, xsize, ysize]);
    same_layout!(
        hipChannelFormatDesc,
        g::hipChannelFormatDesc,
        [x, y, z, w, f]
    );
    same_layout!(
        HIP_ARRAY_DESCRIPTOR,
        g::HIP_ARRAY_DESCRIPTOR,
        [Width, Height, Format, NumChannels]
    );
    same_layout!(
        HIP_ARRAY3D_DESCRIPTOR,
        g::HIP_ARRAY3D_DESCRIPTOR,
        [Width, Height, Depth, Format, NumChannels, Flags]
    );
    same_layout!(hipMemLocation, g::hipMemLocation, [type_, id]);
    same_layout!(hipMemAccessDesc, g::hipMemAccessDesc, [location, flags]);
    same_layout!(
        hipMemPoolProps,
        g::hipMemPoolProps,
        [allocType, handleTypes, location, win32SecurityAttributes]
    );
    same_layout!(
        hipMemAllocationProp_R5,
        g::hipMemAllocationProp,
        [
            compressionType,
            location,
            requestedHandleType,
            type_,
            usage,
            win32HandleMetaData
        ]
    );
    same_layout!(
        hipDeviceProp_tR0000,
        g::hipDeviceProp_t,
        [
            name,
            totalGlobalMem,
            sharedMemPerBlock,
            warpSize,
            totalConstMem,
            major,
            minor,
            multiProcessorCount,
            arch,
            pciDeviceID,
            maxSharedMemoryPerMultiProcessor,
            gcnArch,
            gcnArchName,
            hdpMemFlushCntl,
            memPitch,
            isLargeBar,
            managedMemory,
            pageableMemoryAccessUsesHostPageTables
        ]
    );
}

#[test]
fn rocm6_allocation_prop_moved_the_device_id() {
    // The hook must read location.id at 12 (ROCm 6+) or 8 (ROCm 5): this is why both exist.
    assert_eq!(
        offset_of!(hipMemAllocationProp, location) + offset_of!(hipMemLocation, id),
        12
    );
    assert_eq!(
        offset_of!(hipMemAllocationProp_R5, location) + offset_of!(hipMemLocation, id),
        8
    );
}

#[test]
fn codes_and_attributes_match_rocm52_headers() {
    let pairs: [(i32, u32); 12] = [
        (hipSuccess, g::hipError_t_hipSuccess),
        (hipErrorInvalidValue, g::hipError_t_hipErrorInvalidValue),
        (hipErrorOutOfMemory, g::hipError_t_hipErrorOutOfMemory),
        (hipErrorNotInitialized, g::hipError_t_hipErrorNotInitialized),
        (hipErrorNoDevice, g::hipError_t_hipErrorNoDevice),
        (hipErrorInvalidDevice, g::hipError_t_hipErrorInvalidDevice),
        (hipErrorInvalidContext, g::hipError_t_hipErrorInvalidContext),
        (hipErrorInvalidHandle, g::hipError_t_hipErrorInvalidHandle),
        (
            hipErrorInvalidResourceHandle,
            g::hipError_t_hipErrorInvalidResourceHandle,
        ),
        (hipErrorNotFound, g::hipError_t_hipErrorNotFound),
        (hipErrorNotSupported, g::hipError_t_hipErrorNotSupported),
        (hipErrorAlreadyMapped, g::hipError_t_hipErrorAlreadyMapped),
    ];
    for (mine, theirs) in pairs {
        assert_eq!(mine as u32, theirs);
        assert!(error_name(mine).is_some());
    }
    let attrs: [(i32, u32); 9] = [
        (
            hipDeviceAttributeTotalGlobalMem,
            g::hipDeviceAttribute_t_hipDeviceAttributeTotalGlobalMem,
        ),
        (
            hipDeviceAttributeMultiprocessorCount,
            g::hipDeviceAttribute_t_hipDeviceAttributeMultiprocessorCount,
        ),
        (
            hipDeviceAttributeComputeCapabilityMajor,
            g::hipDeviceAttribute_t_hipDeviceAttributeComputeCapabilityMajor,
        ),
        (
            hipDeviceAttributeComputeCapabilityMinor,
            g::hipDeviceAttribute_t_hipDeviceAttributeComputeCapabilityMinor,
        ),
        (
            hipDeviceAttributeWarpSize,
            g::hipDeviceAttribute_t_hipDeviceAttributeWarpSize,
        ),
        (
            hipDeviceAttributeMemoryPoolsSupported,
            g::hipDeviceAttribute_t_hipDeviceAttributeMemoryPoolsSupported,
        ),
        (
            hipDeviceAttributeClockInstructionRate,
            g::hipDeviceAttribute_t_hipDeviceAttributeClockInstructionRate,
        ),
        (
            hipDeviceAttributeMaxSharedMemoryPerMultiprocessor,
            g::hipDeviceAttribute_t_hipDeviceAttributeMaxSharedMemoryPerMultiprocessor,
        ),
        (
            hipDeviceAttributePhysicalMultiProcessorCount,
            g::hipDeviceAttribute_t_hipDeviceAttributePhysicalMultiProcessorCount,
        ),
    ];
    for (mine, theirs) in attrs {
        assert_eq!(mine as u32, theirs);
    }
    assert_eq!(
        hipMemcpyHostToDevice as u32,
        g::hipMemcpyKind_hipMemcpyHostToDevice
    );
    assert_eq!(
        HIP_AD_FORMAT_HALF as u32,
        g::hipArray_Format_HIP_AD_FORMAT_HALF
    );
}

#[test]
fn generated_bindings_are_reproducible() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap();
    let out = std::process::Command::new(root.join("ci/regen-bindings.sh"))
        .arg("--check")
        .output()
        .expect("run ci/regen-bindings.sh --check");
    let stdout = String::from_utf8_lossy(&out.stdout);
    if stdout.starts_with("SKIP:") {
        println!("{stdout}");
        return;
    }
    assert!(
        out.status.success(),
        "regenerating hip-sys/src/generated.rs gave a different file:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn door_table_is_consistent() {
    let mut names: Vec<&str> = DOORS.iter().map(|d| d.name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), DOORS.len(), "duplicate door");
    for abi in RocmAbi::ALL {
        let chain = version_chain(abi);
        for d in DOORS {
            if let Some(node) = d.node(abi) {
                assert!(
                    chain.contains(&node),
                    "{} uses {node}, not in ROCm {}'s chain",
                    d.name,
                    abi.major()
                );
            }
        }
    }
    // A door that exists in an older ABI keeps its node in newer ones.
    for d in DOORS {
        let nodes: Vec<_> = RocmAbi::ALL.iter().filter_map(|&a| d.node(a)).collect();
        assert!(
            nodes.windows(2).all(|w| w[0] == w[1]),
            "{} changes node",
            d.name
        );
    }
    assert_eq!(
        door("hipGetProcAddress").unwrap().node(RocmAbi::Rocm5),
        None
    );
    assert_eq!(
        door("hipGetDriverEntryPoint").unwrap().node(RocmAbi::Rocm7),
        Some("hip_7.1")
    );
}
