/* NCCL tuner plugin ABI, every version Tutti loads (v2..v6), with v6 pinned as the current one, and the
 * algorithm / protocol indices of the cost table (values identical to NCCL's). C. */
#ifndef TUTTI_SDK_TUNER_H_
#define TUTTI_SDK_TUNER_H_

#include <tutti/common.h>
#include <tutti/tuner_v6.h>
#include <tutti/tuner_v5.h>
#include <tutti/tuner_v4.h>
#include <tutti/tuner_v3.h>
#include <tutti/tuner_v2.h>

typedef ncclTuner_v6_t ncclTuner_t;
typedef ncclTunerConstants_v5_t ncclTunerConstants_t;
typedef ncclNvlDomainInfo_v6_t ncclNvlDomainInfo_t;

#define NCCL_TUNER_PLUGIN_SYMBOL "ncclTunerPlugin_v6"

/* Row index of the cost table. */
#define NCCL_ALGO_UNDEF -1
#define NCCL_ALGO_TREE 0
#define NCCL_ALGO_RING 1
#define NCCL_ALGO_COLLNET_DIRECT 2
#define NCCL_ALGO_COLLNET_CHAIN 3
#define NCCL_ALGO_NVLS 4
#define NCCL_ALGO_NVLS_TREE 5
#define NCCL_ALGO_PAT 6
#define NCCL_NUM_ALGORITHMS NCCL_NUM_ALGORITHMS_V5

/* Column index of the cost table (its row length is NCCL_NUM_PROTOCOLS). */
#define NCCL_PROTO_UNDEF -1
#define NCCL_PROTO_LL 0
#define NCCL_PROTO_LL128 1
#define NCCL_PROTO_SIMPLE 2
#define NCCL_NUM_PROTOCOLS NCCL_NUM_PROTOCOLS_V5

/* Cost of an unavailable algorithm/protocol pair. */
#define NCCL_ALGO_PROTO_IGNORE -1.0

#define NCCL_HW_NVLINK 0
#define NCCL_HW_PCI 1
#define NCCL_HW_NET 2
#define NCCL_NUM_HW_LINKS NCCL_NUM_HW_LINKS_V5

#define NCCL_VOLTA_COMPCAP_IDX 0
#define NCCL_AMPERE_COMPCAP_IDX 1
#define NCCL_HOPPER_COMPCAP_IDX 2
#define NCCL_BLACKWELL_COMPCAP_IDX 3
#define NCCL_NUM_COMPCAPS NCCL_NUM_COMPCAPS_V5

#define NCCL_TUNING_SCALE_1NODE 0
#define NCCL_TUNING_SCALE_2NODES 1
#define NCCL_TUNING_SCALE_4NODES 2
#define NCCL_NUM_TUNING_SCALES NCCL_NUM_TUNING_SCALES_V5

/* Tutti extension, optional: a tuner library that exports
 *   const int tuttiTunerStateless = 1;
 * declares that getCollInfo's answer (cost table and channel count) depends only on its arguments and on what its
 * context learnt at init. The core then keeps the chain's decision per (collective, size, channel limits) and asks
 * the chain once per distinct call instead of on every call, when every tuner of the chain declares it. A tuner
 * that adapts to what it observes must not export it. */
#define TUTTI_TUNER_STATELESS_SYMBOL "tuttiTunerStateless"

#endif /* TUTTI_SDK_TUNER_H_ */
