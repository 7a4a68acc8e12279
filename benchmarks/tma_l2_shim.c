/* LD_PRELOAD probe for the L2 promotion of TMA descriptors (benchmark-only, never shipped).

CuTe DSL encodes each TMA descriptor on the host through the runtime's _cuTensorMapEncodeTiled
(same arguments as the driver's cuTensorMapEncodeTiled) with an L2 promotion the Python API does
not expose; DeepGEMM asks for 256 B. This shim stands in for both entry points:
  BSPROF_TMA_LOG=1   print each encode's box, swizzle, L2 promotion and the 128 descriptor bytes
  BSPROF_TMA_L2=N    encode with promotion N instead (0 none, 1 64 B, 2 128 B, 3 256 B)
Build: gcc -shared -fPIC -O2 -o tma_l2_shim.so tma_l2_shim.c -ldl */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

typedef int (*encode_fn)(void *, int, unsigned, void *, const unsigned long long *, const unsigned long long *,
                         const unsigned *, const unsigned *, int, int, int, int);

static encode_fn driver_encode(void) {
    static encode_fn fn;
    if (!fn) {
        void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
        if (!lib) lib = dlopen("libcuda.so.1", RTLD_NOW);
        fn = lib ? (encode_fn)dlsym(lib, "cuTensorMapEncodeTiled") : 0;
    }
    return fn;
}

static int encode(const char *entry, void *map, int dtype, unsigned rank, void *addr,
                  const unsigned long long *dims, const unsigned long long *strides, const unsigned *box,
                  const unsigned *estrides, int interleave, int swizzle, int l2, int oob) {
    const char *want = getenv("BSPROF_TMA_L2");
    int use = (want && *want) ? atoi(want) : l2;
    encode_fn fn = driver_encode();
    int rc = fn ? fn(map, dtype, rank, addr, dims, strides, box, estrides, interleave, swizzle, use, oob) : 999;
    if (getenv("BSPROF_TMA_LOG")) {
        fprintf(stderr, "tma-encode %s dtype=%d rank=%u addr=%p interleave=%d swizzle=%d oob=%d l2=%d->%d rc=%d",
                entry, dtype, rank, addr, interleave, swizzle, oob, l2, use, rc);
        fprintf(stderr, " dims=");
        for (unsigned i = 0; i < rank; i++) fprintf(stderr, "%llu,", dims[i]);
        fprintf(stderr, " strides=");
        for (unsigned i = 0; i + 1 < rank; i++) fprintf(stderr, "%llu,", strides[i]);
        fprintf(stderr, " box=");
        for (unsigned i = 0; i < rank; i++) fprintf(stderr, "%u,", box[i]);
        fprintf(stderr, " estrides=");
        for (unsigned i = 0; i < rank; i++) fprintf(stderr, "%u,", estrides[i]);
        fprintf(stderr, " bytes=");
        for (int i = 0; i < 128; i++) fprintf(stderr, "%02x", ((unsigned char *)map)[i]);
        fprintf(stderr, "\n");
    }
    return rc;
}

int cuTensorMapEncodeTiled(void *map, int dtype, unsigned rank, void *addr, const unsigned long long *dims,
                           const unsigned long long *strides, const unsigned *box, const unsigned *estrides,
                           int interleave, int swizzle, int l2, int oob) {
    return encode("driver", map, dtype, rank, addr, dims, strides, box, estrides, interleave, swizzle, l2, oob);
}

int _cuTensorMapEncodeTiled(void *map, int dtype, unsigned rank, void *addr, const unsigned long long *dims,
                            const unsigned long long *strides, const unsigned *box, const unsigned *estrides,
                            int interleave, int swizzle, int l2, int oob) {
    return encode("cute", map, dtype, rank, addr, dims, strides, box, estrides, interleave, swizzle, l2, oob);
}
