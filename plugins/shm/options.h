// Options the shm transport reads (environment; the YAML config's plugin `options:` land there too).
#pragma once

namespace tutti::shm {

// NCCL_SHM_DISABLE=1 makes canConnect refuse every pair (as in NCCL).
bool shmDisabled();

}  // namespace tutti::shm
