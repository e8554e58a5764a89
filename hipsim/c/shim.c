/* Runtime-internal door calls, made the way the real libamdhip64 can make them: through the
 * PLT of the exported symbol. Built with -fPIC and without -fno-plt, so the call below becomes
 * a R_X86_64_JUMP_SLOT relocation against hipMalloc@@hip_4.2 in libamdhip64.so, which the loader
 * resolves (to an audit hook's wrapper, if the hook redirected the definition and did not
 * point the runtime's own slot back at the real function). */
#include <stddef.h>

typedef int hipError_t;
hipError_t hipMalloc(void **ptr, size_t size);

hipError_t hipsim_shim_malloc_via_plt(void **ptr, size_t size) {
    return hipMalloc(ptr, size);
}

/* The runtime reading its environment, the way ROCr and HIP do: libc's getenv through the PLT
 * (an audit module that redirects libc's getenv answers it). */
#include <stdlib.h>

const char *hipsim_shim_getenv_via_plt(const char *name) {
    return getenv(name);
}
