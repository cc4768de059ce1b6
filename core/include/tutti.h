/* Tutti's extensions to the NCCL API.
 *
 * Host streams: on the host backend (no GPU) a collective given stream == NULL returns when it is
 * complete. To run host-backend calls asynchronously, create a host stream and pass it wherever NCCL takes
 * a cudaStream_t: calls on one stream run in order, and tuttiStreamSynchronize waits for them.
 *
 * Host streams are also the CUDA streams of the sim backend (device: sim), and come with what CUDA programs
 * use around NCCL calls: events (record, wait, query), host functions, and stream capture into graphs that
 * replay the captured collectives. As in CUDA, a stream that waits on an event recorded in a capture joins
 * that capture, and must be joined back (the capturing stream waits on an event recorded last on it) before
 * the capture ends. Only the sim (and cuda) backends' operations can be captured. */
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

/* Events of host streams. A wait holds the stream until the last record made before the wait has run; an
 * event carries the error of the stream it was recorded on, so the waiting stream reports it too. */
typedef struct tuttiEvent_st* tuttiEvent_t;
ncclResult_t tuttiEventCreate(tuttiEvent_t* event);
ncclResult_t tuttiEventDestroy(tuttiEvent_t event);
ncclResult_t tuttiEventRecord(tuttiEvent_t event, cudaStream_t stream);
ncclResult_t tuttiStreamWaitEvent(cudaStream_t stream, tuttiEvent_t event);
/* ncclSuccess once the last record has run (or when none was made), ncclInProgress before, or its error. */
ncclResult_t tuttiEventQuery(tuttiEvent_t event);
ncclResult_t tuttiEventSynchronize(tuttiEvent_t event);
/* Runs fn(arg) on the stream's thread after the work enqueued before it. */
ncclResult_t tuttiLaunchHostFunc(cudaStream_t stream, void (*fn)(void*), void* arg);

/* Capture: work given to a capturing stream is recorded, not run; tuttiStreamEndCapture returns it as a
 * graph, which tuttiGraphLaunch runs (in order with the stream's other work) as often as wanted. */
typedef struct tuttiGraph_st* tuttiGraph_t;
ncclResult_t tuttiStreamBeginCapture(cudaStream_t stream);
ncclResult_t tuttiStreamEndCapture(cudaStream_t stream, tuttiGraph_t* graph);
/* *capturing = 1 while the stream records into a capture (one it began or joined), else 0. */
ncclResult_t tuttiStreamIsCapturing(cudaStream_t stream, int* capturing);
ncclResult_t tuttiGraphLaunch(tuttiGraph_t graph, cudaStream_t stream);
/* A launch already queued still runs; the graph's resources go when the last one has. */
ncclResult_t tuttiGraphDestroy(tuttiGraph_t graph);

/* Deterministic reductions. With the switch on, element i of the result of ncclAllReduce, ncclReduceScatter
 * and ncclReduce on a floating datatype (fp64, fp32, fp16, bf16, fp8 e4m3/e5m2) is a function of the n ranks'
 * input bits for element i, n, the datatype and the op (and a PreMulSum scalar) alone: not of the count, the
 * element's position or the buffer's alignment, the algorithm, protocol, channels, chunk sizes, in-place or
 * not, group fusion, ranks as threads or processes, the transports, the backend, or the run. ReduceScatter's
 * output equals the matching slice of AllReduce, and Reduce's root result equals AllReduce's. Integer
 * reductions and Min/Max of integers are exact in any order and are deterministic with the switch off too.
 *
 * The order: ranks are cut into blocks by the binary digits of n, largest first (n = 7: ranks 0-3, 4-5, 6);
 * each block is a perfect binary tree over its ranks in rank order, ((x0 + x1) + (x2 + x3)); the block
 * results combine from the last backwards, B0 + (B1 + B2). Inputs are widened exactly to double (fp64, fp32)
 * or float (fp16, bf16, fp8), the tree runs there, and the result is rounded once to the datatype
 * (fp8 saturating). PreMulSum multiplies each widened input by the widened scalar first; Avg divides the
 * sum by n in the wide type. A NaN result is always the type's positive quiet NaN without payload (fp64
 * 0x7ff8000000000000, fp32 0x7fc00000, fp16 0x7e00, bf16 0x7fc0, e4m3 0x7f, e5m2 0x7e), whatever NaNs or
 * infinities produced it: CPUs and GPUs do not agree on NaN payloads.
 *
 * Turn it on with `deterministic: true` in the YAML config, TUTTI_DETERMINISTIC=1 in the environment (which
 * overrides the file) for communicators created afterwards, or per communicator with
 * tuttiCommSetDeterministic. Every rank of a communicator must use the same setting (like the collectives
 * themselves, the calls of all ranks must match). */
ncclResult_t tuttiCommSetDeterministic(ncclComm_t comm, int enable);  /* enable: 0 or 1; applies to later calls */
ncclResult_t tuttiCommGetDeterministic(ncclComm_t comm, int* enabled);

/* The deterministic reduction of n host arrays of count elements, computed on the calling thread: the same
 * bits as a deterministic ncclAllReduce of those inputs on n ranks (inputs[r] is rank r's). op is ncclSum,
 * ncclProd, ncclMax, ncclMin or ncclAvg; preMulScalars, when not NULL, holds n values of `datatype`, the
 * scalar of each rank's ncclRedOpCreatePreMulSum op, and op must be ncclSum. output may be one of the inputs. */
ncclResult_t tuttiDeterministicReduce(const void* const* inputs, int n, void* output, size_t count,
                                      ncclDataType_t datatype, ncclRedOp_t op, const void* preMulScalars);

#ifdef __cplusplus
}
#endif

#endif /* TUTTI_H_ */
