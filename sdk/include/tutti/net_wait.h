/* Optional extension of a net plugin: a blocking wait on the plugin's comms.
 *
 * A Tutti rank on the host backend sends and receives on its own network connections (isend / irecv / test from
 * the thread that called the collective) and, while it waits for a transfer, polls test() for a while. Without
 * this extension a rank that has polled long enough sleeps and hands its connections to the proxy thread, which
 * polls them and wakes the rank once data moved: two threads scheduled per message where ranks outnumber cores.
 * A plugin that exports `tuttiNetWait_v1` lets the rank sleep in the kernel until one of its comms can move data
 * instead, and go on polling test() itself.
 *
 * Export, besides an ncclNetPlugin_vN table:
 *   extern "C" const tuttiNetWait_v1_t tuttiNetWait_v1 = { ... };
 * A core that does not know the symbol ignores it; a plugin without it works as before. C. */
#ifndef TUTTI_SDK_NET_WAIT_H_
#define TUTTI_SDK_NET_WAIT_H_

#include <tutti/net_common.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TUTTI_NET_WAIT_SYMBOL "tuttiNetWait_v1"

typedef struct {
  /* Blocks until one of the comms can move data, or until timeoutUs microseconds have passed. `comms` are send and
   * receive comms of this plugin (as connect / accept returned them), each with requests in flight that the
   * calling thread has just test()ed without completing them; on a receive comm the wait ends when data (or the end
   * of the connection) arrives, on a send comm when there is room to write. A spurious return is allowed; so is a
   * missed one, as long as the wait ends by the timeout. *ready is set to 1 when something may move, 0 on timeout,
   * and -1 when the plugin cannot wait on these comms this way (e.g. their data moves on helper threads): the core
   * then waits as it would without the extension. Any thread may call it, several at once on different comms; the
   * plugin must not change the comms' state (only test() progresses requests). An error return ends the wait as
   * failed. */
  ncclResult_t (*waitComms)(void* const* comms, int nComms, int timeoutUs, int* ready);
} tuttiNetWait_v1_t;

#ifdef __cplusplus
}
#endif

#endif /* TUTTI_SDK_NET_WAIT_H_ */
