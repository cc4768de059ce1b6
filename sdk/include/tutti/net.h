/* NCCL net plugin ABI, every version Tutti loads (v6..v12), with v12 pinned as the current one.
 * A net plugin exports one `const ncclNet_vN_t ncclNetPlugin_vN` (or several versions); the core probes
 * the newest first. C. */
#ifndef TUTTI_SDK_NET_H_
#define TUTTI_SDK_NET_H_

#include <tutti/net_common.h>
#include <tutti/net_v12.h>
#include <tutti/net_v11.h>
#include <tutti/net_v10.h>
#include <tutti/net_v9.h>
#include <tutti/net_v8.h>
#include <tutti/net_v7.h>
#include <tutti/net_v6.h>

#define NCCL_NET_MAX_DEVS_PER_NIC NCCL_NET_MAX_DEVS_PER_NIC_V12

typedef ncclNet_v12_t ncclNet_t;
typedef ncclNetProperties_v12_t ncclNetProperties_t;
typedef ncclNetAttr_v12_t ncclNetAttr_t;
typedef ncclNetVDeviceProps_v12_t ncclNetVDeviceProps_t;
typedef ncclNetCommConfig_v12_t ncclNetCommConfig_t;

#define NCCL_NET_PLUGIN_SYMBOL ncclNetPlugin_v12

#endif /* TUTTI_SDK_NET_H_ */
