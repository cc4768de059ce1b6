// devapi_kernels.h compiled by nvcc: the device API's headers and the kernels written against them build
// for the GPU (sm_80, sm_90) as they do for the emulator. Running them needs a device communicator on the
// cuda backend, which Tutti does not make yet; this object is a build check.
#include "devapi_kernels.h"

__global__ void allReduceLsaKernel(KernelArgs a) { allReduceLsa(a); }
__global__ void alltoAllGinKernel(KernelArgs a) { alltoAllGin(a); }
__global__ void barrierWithTimeoutKernel(TimeoutArgs a) { barrierWithTimeout(a); }
