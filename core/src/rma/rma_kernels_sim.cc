// The emulator's entries of the one-sided kernels (rma_kernels.h); null in builds without the sim backend.
#include "rma/kernel_fns.h"

#ifdef TUTTI_HAVE_SIM
#include "rma/rma_kernels.h"

namespace tutti::rma {
namespace {
void simSignal(const void* args) { dev::signalBody(*static_cast<const dev::SignalArgs*>(args)); }
void simWait(const void* args) { dev::waitBody(*static_cast<const dev::WaitArgs*>(args)); }
}  // namespace
const void* simSignalKernel() { return reinterpret_cast<const void*>(&simSignal); }
const void* simWaitKernel() { return reinterpret_cast<const void*>(&simWait); }
}  // namespace tutti::rma
#else
namespace tutti::rma {
const void* simSignalKernel() { return nullptr; }
const void* simWaitKernel() { return nullptr; }
}  // namespace tutti::rma
#endif
