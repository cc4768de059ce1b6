// The sim backend: a communicator's operations run as the device kernels (device/kernels) on the CPU SIMT
// emulator (device/simt), over the same connections, transports and proxies as the host backend.
//
// One group of one communicator becomes one work item for the host executor (or a host stream). It builds
// the launch's connection table and work items (one per channel and collective, one list of sends and one of
// receives on two more blocks), announces the receive steps to network proxies, then launches one kernel per
// run of work items of one datatype, in order. While a kernel runs, the launching thread watches it as a GPU
// host would: it raises the kernel's abort word when the communicator is aborted or a peer process died, and
// rings the network proxy.
#pragma once

#include "device/host/launch.h"

#include <vector>

namespace tutti::sim {

// Whether this build has the sim backend (its kernels compiled for the emulator).
bool available();

// Appends the launch's work (one item) to *items. Self send/receive pairs are copied here directly.
ncclResult_t launchItems(host::CommLaunch& launch, std::vector<host::WorkItem>* items);

}  // namespace tutti::sim
