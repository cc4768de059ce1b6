/* Tutti's extensions to the NCCL API.
 *
 * Host streams: on the host backend (no GPU) a collective given stream == NULL returns when it is
 * complete. To run host-backend calls asynchronously, create a host stream and pass it wherever NCCL takes
 * a cudaStream_t: calls on one stream run in order, and tuttiStreamSynchronize waits for them. */
#ifndef TUTTI_H_
#define TUTTI_H_

#include "nccl.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Creates a host stream; *stream can be passed to any NCCL call of a host-backend communicator. */
ncclResult_t tuttiStreamCreate(cudaStream_t* stream);
/* Waits for all work enqueued on `stream`; returns the first error of that work (and clears it). */
ncclResult_t tuttiStreamSynchronize(cudaStream_t stream);
/* ncclSuccess when all enqueued work is complete, ncclInProgress while some is pending, or its error. */
ncclResult_t tuttiStreamQuery(cudaStream_t stream);
/* Waits for pending work, then destroys the stream. */
ncclResult_t tuttiStreamDestroy(cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* TUTTI_H_ */
