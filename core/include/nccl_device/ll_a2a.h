/* LL all-to-all sessions of NCCL's device API: the slot arithmetic answers; the sessions themselves are not
 * implemented by Tutti (ncclLLA2ACreateRequirement refuses with ncclInvalidUsage). */
#ifndef NCCL_DEVICE_LL_A2A_H_
#define NCCL_DEVICE_LL_A2A_H_

#include "core.h"

/* Slots a session needs for messages of up to maxElts elements of maxEltSize bytes (8-byte payload words). */
NCCL_EXTERN_C int ncclLLA2ACalcSlots(int maxElts, int maxEltSize);
NCCL_EXTERN_C ncclResult_t ncclLLA2ACreateRequirement(int nBlocks, int nSlots, ncclLLA2AHandle_t* outHandle,
                                                      ncclDevResourceRequirements_t* outReq);

#endif /* NCCL_DEVICE_LL_A2A_H_ */
