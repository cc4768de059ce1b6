// Options the p2p transport reads (environment; the YAML config's plugin `options:` land there too).
#pragma once

namespace tutti::p2p {

// NCCL_P2P_DISABLE=1 makes canConnect refuse every pair (as in NCCL).
bool p2pDisabled();

}  // namespace tutti::p2p
