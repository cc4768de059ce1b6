// The GPU's one-sided kernels (rma_kernels.h), compiled by nvcc into libtutti with the collective kernels.
#include "rma/rma_kernels.h"

namespace tutti::rma::dev {

__global__ void __launch_bounds__(32, 1) signalKernel(SignalArgs args) { signalBody(args); }
__global__ void __launch_bounds__(32, 1) waitKernel(WaitArgs args) { waitBody(args); }

}  // namespace tutti::rma::dev

namespace tutti::rma {
// For the host code of other files (nvcc ties a kernel's host stub to the file that defines it).
const void* cudaSignalKernel() { return reinterpret_cast<const void*>(&dev::signalKernel); }
const void* cudaWaitKernel() { return reinterpret_cast<const void*>(&dev::waitKernel); }
}  // namespace tutti::rma
