/* A small, hand-written HIP API header for test fixtures (ROCm 6 ABI, as hipsim builds by default).
 *
 * Why not Debian's /usr/include/hip? They compile with plain cc (-D__HIP_PLATFORM_AMD__), but they
 * are ROCm 5.2: no hipDeviceProp_tR0600, no hipGetProcAddress, and a different
 * hipMemAllocationProp layout. Fixtures need the ABI hipsim implements, so they include this.
 * Layouts are cross-checked against the hip-sys crate by testkit's tests (tests/header_layout.rs).
 *
 * Define FIXTURE_ROCM5_PROPS to make hipGetDeviceProperties mean the legacy (R0000) layout
 * instead of redirecting it to hipGetDevicePropertiesR0600 as ROCm 6 headers do. */
#ifndef TESTKIT_HIP_SIM_API_H
#define TESTKIT_HIP_SIM_API_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef int hipError_t;
enum {
    hipSuccess = 0,
    hipErrorInvalidValue = 1,
    hipErrorOutOfMemory = 2,
    hipErrorNotInitialized = 3,
    hipErrorInvalidMemcpyDirection = 21,
    hipErrorNoDevice = 100,
    hipErrorInvalidDevice = 101,
    hipErrorInvalidContext = 201,
    hipErrorAlreadyMapped = 208,
    hipErrorInvalidHandle = 400,
    hipErrorInvalidResourceHandle = 400,
    hipErrorNotFound = 500,
    hipErrorNotSupported = 801,
};

typedef int hipDevice_t;
typedef void *hipDeviceptr_t;
typedef struct ihipStream_t *hipStream_t;
typedef struct ihipCtx_t *hipCtx_t;
typedef struct ihipMemPoolHandle_t *hipMemPool_t;
typedef struct ihipMemGenericAllocationHandle *hipMemGenericAllocationHandle_t;
typedef struct hipArray *hipArray_t;
typedef struct hipMipmappedArray *hipMipmappedArray_t;

typedef enum hipMemcpyKind {
    hipMemcpyHostToHost = 0,
    hipMemcpyHostToDevice = 1,
    hipMemcpyDeviceToHost = 2,
    hipMemcpyDeviceToDevice = 3,
    hipMemcpyDefault = 4
} hipMemcpyKind;

#define hipMemAttachGlobal 0x01
#define hipMemAttachHost 0x02
#define hipDeviceMallocDefault 0x0
#define hipDeviceMallocFinegrained 0x1

typedef struct hipExtent { size_t width, height, depth; } hipExtent;
typedef struct hipPitchedPtr { void *ptr; size_t pitch; size_t xsize; size_t ysize; } hipPitchedPtr;
static inline hipExtent make_hipExtent(size_t w, size_t h, size_t d) {
    hipExtent e = {w, h, d};
    return e;
}

typedef enum hipChannelFormatKind {
    hipChannelFormatKindSigned = 0,
    hipChannelFormatKindUnsigned = 1,
    hipChannelFormatKindFloat = 2,
    hipChannelFormatKindNone = 3
} hipChannelFormatKind;
typedef struct hipChannelFormatDesc { int x, y, z, w; hipChannelFormatKind f; } hipChannelFormatDesc;

typedef enum hipArray_Format {
    HIP_AD_FORMAT_UNSIGNED_INT8 = 0x01,
    HIP_AD_FORMAT_UNSIGNED_INT16 = 0x02,
    HIP_AD_FORMAT_UNSIGNED_INT32 = 0x03,
    HIP_AD_FORMAT_SIGNED_INT8 = 0x08,
    HIP_AD_FORMAT_SIGNED_INT16 = 0x09,
    HIP_AD_FORMAT_SIGNED_INT32 = 0x0a,
    HIP_AD_FORMAT_HALF = 0x10,
    HIP_AD_FORMAT_FLOAT = 0x20
} hipArray_Format;
typedef struct HIP_ARRAY_DESCRIPTOR {
    size_t Width, Height;
    hipArray_Format Format;
    unsigned int NumChannels;
} HIP_ARRAY_DESCRIPTOR;
typedef struct HIP_ARRAY3D_DESCRIPTOR {
    size_t Width, Height, Depth;
    hipArray_Format Format;
    unsigned int NumChannels;
    unsigned int Flags;
} HIP_ARRAY3D_DESCRIPTOR;

typedef enum hipMemLocationType { hipMemLocationTypeInvalid = 0, hipMemLocationTypeDevice = 1 } hipMemLocationType;
typedef struct hipMemLocation { hipMemLocationType type; int id; } hipMemLocation;
typedef enum hipMemAllocationType { hipMemAllocationTypeInvalid = 0, hipMemAllocationTypePinned = 1 } hipMemAllocationType;
typedef enum hipMemAllocationHandleType { hipMemHandleTypeNone = 0, hipMemHandleTypePosixFileDescriptor = 1 } hipMemAllocationHandleType;
typedef enum hipMemAllocationGranularity_flags {
    hipMemAllocationGranularityMinimum = 0,
    hipMemAllocationGranularityRecommended = 1
} hipMemAllocationGranularity_flags;
/* ROCm 6+ layout (ROCm 5 put compressionType first). */
typedef struct hipMemAllocationProp {
    hipMemAllocationType type;
    hipMemAllocationHandleType requestedHandleType;
    hipMemLocation location;
    void *win32HandleMetaData;
    struct { unsigned char compressionType; unsigned char gpuDirectRDMACapable; unsigned short usage; } allocFlags;
} hipMemAllocationProp;
typedef enum hipMemAccessFlags {
    hipMemAccessFlagsProtNone = 0,
    hipMemAccessFlagsProtRead = 1,
    hipMemAccessFlagsProtReadWrite = 3
} hipMemAccessFlags;
typedef struct hipMemAccessDesc { hipMemLocation location; hipMemAccessFlags flags; } hipMemAccessDesc;
typedef struct hipMemPoolProps {
    hipMemAllocationType allocType;
    hipMemAllocationHandleType handleTypes;
    hipMemLocation location;
    void *win32SecurityAttributes;
    size_t maxSize;
    unsigned char reserved[56];
} hipMemPoolProps;

typedef enum hipDriverProcAddressQueryResult {
    HIP_GET_PROC_ADDRESS_SUCCESS = 0,
    HIP_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1,
    HIP_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT = 2
} hipDriverProcAddressQueryResult;
typedef enum hipDriverEntryPointQueryResult {
    hipDriverEntryPointSuccess = 0,
    hipDriverEntryPointSymbolNotFound = 1,
    hipDriverEntryPointVersionNotSufficent = 2
} hipDriverEntryPointQueryResult;
#define HIP_GET_PROC_ADDRESS_DEFAULT 0x0

typedef int hipDeviceAttribute_t;
enum {
    hipDeviceAttributeComputeCapabilityMajor = 23,
    hipDeviceAttributeComputeCapabilityMinor = 61,
    hipDeviceAttributeMultiprocessorCount = 63,
    hipDeviceAttributeTotalGlobalMem = 84,
    hipDeviceAttributeWarpSize = 87,
    hipDeviceAttributeMemoryPoolsSupported = 88,
    hipDeviceAttributeVirtualMemoryManagementSupported = 89,
};

typedef struct { unsigned int bits; } hipDeviceArch_t;
typedef struct { char bytes[16]; } hipUUID;

/* ROCm 5 hipDeviceProp_t. */
typedef struct hipDeviceProp_tR0000 {
    char name[256]; size_t totalGlobalMem; size_t sharedMemPerBlock; int regsPerBlock; int warpSize;
    int maxThreadsPerBlock; int maxThreadsDim[3]; int maxGridSize[3]; int clockRate; int memoryClockRate;
    int memoryBusWidth; size_t totalConstMem; int major; int minor; int multiProcessorCount; int l2CacheSize;
    int maxThreadsPerMultiProcessor; int computeMode; int clockInstructionRate; hipDeviceArch_t arch;
    int concurrentKernels; int pciDomainID; int pciBusID; int pciDeviceID; size_t maxSharedMemoryPerMultiProcessor;
    int isMultiGpuBoard; int canMapHostMemory; int gcnArch; char gcnArchName[256]; int integrated;
    int cooperativeLaunch; int cooperativeMultiDeviceLaunch; int maxTexture1DLinear; int maxTexture1D;
    int maxTexture2D[2]; int maxTexture3D[3]; unsigned int *hdpMemFlushCntl; unsigned int *hdpRegFlushCntl;
    size_t memPitch; size_t textureAlignment; size_t texturePitchAlignment; int kernelExecTimeoutEnabled;
    int ECCEnabled; int tccDriver; int cooperativeMultiDeviceUnmatchedFunc; int cooperativeMultiDeviceUnmatchedGridDim;
    int cooperativeMultiDeviceUnmatchedBlockDim; int cooperativeMultiDeviceUnmatchedSharedMem; int isLargeBar;
    int asicRevision; int managedMemory; int directManagedMemAccessFromHost; int concurrentManagedAccess;
    int pageableMemoryAccess; int pageableMemoryAccessUsesHostPageTables;
} hipDeviceProp_tR0000;

/* ROCm 6 hipDeviceProp_t. */
typedef struct hipDeviceProp_tR0600 {
    char name[256]; hipUUID uuid; char luid[8]; unsigned int luidDeviceNodeMask; size_t totalGlobalMem;
    size_t sharedMemPerBlock; int regsPerBlock; int warpSize; size_t memPitch; int maxThreadsPerBlock;
    int maxThreadsDim[3]; int maxGridSize[3]; int clockRate; size_t totalConstMem; int major; int minor;
    size_t textureAlignment; size_t texturePitchAlignment; int deviceOverlap; int multiProcessorCount;
    int kernelExecTimeoutEnabled; int integrated; int canMapHostMemory; int computeMode; int maxTexture1D;
    int maxTexture1DMipmap; int maxTexture1DLinear; int maxTexture2D[2]; int maxTexture2DMipmap[2];
    int maxTexture2DLinear[3]; int maxTexture2DGather[2]; int maxTexture3D[3]; int maxTexture3DAlt[3];
    int maxTextureCubemap; int maxTexture1DLayered[2]; int maxTexture2DLayered[3]; int maxTextureCubemapLayered[2];
    int maxSurface1D; int maxSurface2D[2]; int maxSurface3D[3]; int maxSurface1DLayered[2];
    int maxSurface2DLayered[3]; int maxSurfaceCubemap; int maxSurfaceCubemapLayered[2]; size_t surfaceAlignment;
    int concurrentKernels; int ECCEnabled; int pciBusID; int pciDeviceID; int pciDomainID; int tccDriver;
    int asyncEngineCount; int unifiedAddressing; int memoryClockRate; int memoryBusWidth; int l2CacheSize;
    int persistingL2CacheMaxSize; int maxThreadsPerMultiProcessor; int streamPrioritiesSupported;
    int globalL1CacheSupported; int localL1CacheSupported; size_t sharedMemPerMultiprocessor;
    int regsPerMultiprocessor; int managedMemory; int isMultiGpuBoard; int multiGpuBoardGroupID;
    int hostNativeAtomicSupported; int singleToDoublePrecisionPerfRatio; int pageableMemoryAccess;
    int concurrentManagedAccess; int computePreemptionSupported; int canUseHostPointerForRegisteredMem;
    int cooperativeLaunch; int cooperativeMultiDeviceLaunch; size_t sharedMemPerBlockOptin;
    int pageableMemoryAccessUsesHostPageTables; int directManagedMemAccessFromHost; int maxBlocksPerMultiProcessor;
    int accessPolicyMaxWindowSize; size_t reservedSharedMemPerBlock; int hostRegisterSupported;
    int sparseHipArraySupported; int hostRegisterReadOnlySupported; int timelineSemaphoreInteropSupported;
    int memoryPoolsSupported; int gpuDirectRDMASupported; unsigned int gpuDirectRDMAFlushWritesOptions;
    int gpuDirectRDMAWritesOrdering; unsigned int memoryPoolSupportedHandleTypes; int deferredMappingHipArraySupported;
    int ipcEventSupported; int clusterLaunch; int unifiedFunctionPointers; int reserved[63]; int hipReserved[32];
    char gcnArchName[256]; size_t maxSharedMemoryPerMultiProcessor; int clockInstructionRate; hipDeviceArch_t arch;
    unsigned int *hdpMemFlushCntl; unsigned int *hdpRegFlushCntl; int cooperativeMultiDeviceUnmatchedFunc;
    int cooperativeMultiDeviceUnmatchedGridDim; int cooperativeMultiDeviceUnmatchedBlockDim;
    int cooperativeMultiDeviceUnmatchedSharedMem; int isLargeBar; int asicRevision;
} hipDeviceProp_tR0600;

/* Devices, contexts, streams. */
hipError_t hipInit(unsigned int flags);
hipError_t hipRuntimeGetVersion(int *version);
hipError_t hipDriverGetVersion(int *version);
hipError_t hipGetDevice(int *device);
hipError_t hipSetDevice(int device);
hipError_t hipGetDeviceCount(int *count);
hipError_t hipCtxGetCurrent(hipCtx_t *ctx);
hipError_t hipCtxSetCurrent(hipCtx_t ctx);
hipError_t hipDeviceSynchronize(void);
hipError_t hipDeviceReset(void);
hipError_t hipStreamCreate(hipStream_t *stream);
hipError_t hipStreamDestroy(hipStream_t stream);
hipError_t hipStreamSynchronize(hipStream_t stream);
hipError_t hipExtStreamCreateWithCUMask(hipStream_t *stream, uint32_t cuMaskSize, const uint32_t *cuMask);

/* Allocation doors. */
hipError_t hipMalloc(void **ptr, size_t size);
hipError_t hipExtMallocWithFlags(void **ptr, size_t size, unsigned int flags);
hipError_t hipMallocManaged(void **ptr, size_t size, unsigned int flags);
hipError_t hipMallocPitch(void **ptr, size_t *pitch, size_t width, size_t height);
hipError_t hipMemAllocPitch(hipDeviceptr_t *dptr, size_t *pitch, size_t widthInBytes, size_t height,
                            unsigned int elementSizeBytes);
hipError_t hipMalloc3D(hipPitchedPtr *pitchedDevPtr, hipExtent extent);
hipError_t hipMallocArray(hipArray_t *array, const hipChannelFormatDesc *desc, size_t width, size_t height,
                          unsigned int flags);
hipError_t hipMalloc3DArray(hipArray_t *array, const hipChannelFormatDesc *desc, hipExtent extent,
                            unsigned int flags);
hipError_t hipArrayCreate(hipArray_t *pHandle, const HIP_ARRAY_DESCRIPTOR *pAllocateArray);
hipError_t hipArray3DCreate(hipArray_t *array, const HIP_ARRAY3D_DESCRIPTOR *pAllocateArray);
hipError_t hipMallocMipmappedArray(hipMipmappedArray_t *mipmappedArray, const hipChannelFormatDesc *desc,
                                   hipExtent extent, unsigned int numLevels, unsigned int flags);
hipError_t hipMipmappedArrayCreate(hipMipmappedArray_t *pHandle, HIP_ARRAY3D_DESCRIPTOR *pMipmappedArrayDesc,
                                   unsigned int numMipmapLevels);
hipError_t hipMallocAsync(void **dev_ptr, size_t size, hipStream_t stream);
hipError_t hipMallocFromPoolAsync(void **dev_ptr, size_t size, hipMemPool_t mem_pool, hipStream_t stream);
hipError_t hipMemCreate(hipMemGenericAllocationHandle_t *handle, size_t size, const hipMemAllocationProp *prop,
                        unsigned long long flags);
hipError_t hipMemRelease(hipMemGenericAllocationHandle_t handle);
hipError_t hipMemAddressReserve(void **ptr, size_t size, size_t alignment, void *addr, unsigned long long flags);
hipError_t hipMemAddressFree(void *devPtr, size_t size);
hipError_t hipMemMap(void *ptr, size_t size, size_t offset, hipMemGenericAllocationHandle_t handle,
                     unsigned long long flags);
hipError_t hipMemUnmap(void *ptr, size_t size);
hipError_t hipMemSetAccess(void *ptr, size_t size, const hipMemAccessDesc *desc, size_t count);
hipError_t hipMemGetAllocationGranularity(size_t *granularity, const hipMemAllocationProp *prop,
                                          hipMemAllocationGranularity_flags option);

/* Frees. */
hipError_t hipFree(void *ptr);
hipError_t hipFreeAsync(void *dev_ptr, hipStream_t stream);
hipError_t hipFreeArray(hipArray_t array);
hipError_t hipArrayDestroy(hipArray_t array);
hipError_t hipFreeMipmappedArray(hipMipmappedArray_t mipmappedArray);
hipError_t hipMipmappedArrayDestroy(hipMipmappedArray_t hMipmappedArray);
hipError_t hipMemPoolTrimTo(hipMemPool_t mem_pool, size_t min_bytes_to_hold);

/* Pools. */
hipError_t hipMemPoolCreate(hipMemPool_t *mem_pool, const hipMemPoolProps *pool_props);
hipError_t hipMemPoolDestroy(hipMemPool_t mem_pool);
hipError_t hipDeviceGetDefaultMemPool(hipMemPool_t *mem_pool, int device);

/* Copies. */
hipError_t hipMemcpy(void *dst, const void *src, size_t sizeBytes, hipMemcpyKind kind);
hipError_t hipMemset(void *dst, int value, size_t sizeBytes);

/* Queries. */
hipError_t hipMemGetInfo(size_t *free, size_t *total);
hipError_t hipDeviceTotalMem(size_t *bytes, hipDevice_t device);
hipError_t hipDeviceGetAttribute(int *pi, hipDeviceAttribute_t attr, int deviceId);
hipError_t hipGetDevicePropertiesR0000(hipDeviceProp_tR0000 *prop, int deviceId);
hipError_t hipGetDevicePropertiesR0600(hipDeviceProp_tR0600 *prop, int deviceId);
#ifdef FIXTURE_ROCM5_PROPS
hipError_t hipGetDeviceProperties(hipDeviceProp_tR0000 *prop, int deviceId);
#else
#define hipGetDeviceProperties hipGetDevicePropertiesR0600
#endif
hipError_t hipMemPtrGetInfo(void *ptr, size_t *size);
const char *hipGetErrorString(hipError_t error);
const char *hipGetErrorName(hipError_t error);

/* Lookups. */
hipError_t hipGetProcAddress(const char *symbol, void **pfn, int hipVersion, uint64_t flags,
                             hipDriverProcAddressQueryResult *symbolStatus);
hipError_t hipGetDriverEntryPoint(const char *symbol, void **funcPtr, unsigned long long flags,
                                  hipDriverEntryPointQueryResult *status);

/* hipsim introspection (not HIP; only the simulator exports these). */
hipError_t hipsimGetUsage(int device, size_t *live, size_t *peak);
hipError_t hipsimGetProcessUsage(int device, size_t *bytes);
hipError_t hipsimGetManagedCount(size_t *count, size_t *bytes);
hipError_t hipsimGetAllocationCount(size_t *count);
hipError_t hipsimGetPoolCachedBytes(int device, size_t *bytes);
hipError_t hipsimGetLastCuMask(uint32_t *words, uint32_t capacity, uint32_t *len);
hipError_t hipsimGetStreamCuMask(hipStream_t stream, uint32_t *words, uint32_t capacity, uint32_t *len);
int hipsimGetAbiMajor(void);

#ifdef __cplusplus
}
#endif

#endif
