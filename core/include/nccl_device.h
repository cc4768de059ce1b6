/* NCCL's device API (NCCL 2.28+): device communicators, teams, load/store pointers into windows, barriers
 * and GIN, for kernels. See nccl_device/core.h for what Tutti's implementation covers. */
#ifndef NCCL_DEVICE_H_
#define NCCL_DEVICE_H_

#include "nccl_device/core.h"
#include "nccl_device/coop.h"
#include "nccl_device/ptr.h"
#include "nccl_device/lsa_barrier.h"
#include "nccl_device/gin.h"
#include "nccl_device/gin_barrier.h"
#include "nccl_device/ll_a2a.h"

#endif /* NCCL_DEVICE_H_ */
