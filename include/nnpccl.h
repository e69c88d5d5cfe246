/*
 * nnpccl.h — the public C API of nnpccl, a collective-communication runtime
 * for accelerator rings (shared memory on one host, libfabric between hosts).
 *
 * Conventions follow NCCL's, so framework backends that already speak NCCL
 * feel at home:
 *   - every function returns an nnpccl_result_t;
 *   - in-place operation is expressed by pointer equality (see each
 *     collective); buffers that overlap in any other way are refused
 *     (NNPCCL_ERR_INVALID_ARGUMENT), as is a count whose buffer, from 1 GiB
 *     on, does not end in mapped memory;
 *   - an invalid argument (NNPCCL_ERR_INVALID_ARGUMENT) has no effect and
 *     leaves the communicator usable, and so does a call its forced
 *     algorithms cannot plan (NNPCCL_ERR_INVALID_USAGE naming the rule,
 *     refused alike on every rank with the same rules, before the call is
 *     numbered or anything is sent); any other error is fatal for that
 *     communicator, which must then be aborted or destroyed and re-created:
 *     a local failure (out of memory while starting a call, say) also sets
 *     its async error, makes later calls fail at once with it, and fails
 *     the peers, naming this rank and its reason;
 *   - nnpccl_get_last_error() returns a message naming what was wrong.
 * Buffers are host memory. The runtime progresses itself: nonblocking
 * operations complete without the caller having to poll.
 *
 * Thread safety: a communicator may be used from one thread at a time for
 * issuing operations; nnpccl_wait/nnpccl_test and
 * nnpccl_comm_get_async_error may be called from any thread;
 * nnpccl_comm_abort may be called from any thread at any time: during a
 * nonblocking init, during a collective, during another thread's call.
 * From a signal handler it is async-signal-safe when the handler
 * interrupted a call of the same thread on the same communicator (a
 * watchdog's SIGALRM during a collective): it then only marks the
 * communicator, the interrupted call returns NNPCCL_ERR_REMOTE within a
 * few milliseconds (at once if it was not waiting), and the communicator
 * is freed as that call returns. A handler that fires again on that
 * thread (a repeating timer) may abort the same handle again at any later
 * point, during that teardown or after it: abort then takes no lock and
 * allocates nothing, and returns NNPCCL_ERR_INVALID_USAGE (still being
 * freed) or NNPCCL_ERR_INVALID_ARGUMENT (freed), until a new communicator
 * is given the same address. Anywhere else in a handler (a handler that
 * interrupted no call on comm, or runs on another thread) abort frees
 * memory and joins threads like any call, which is only safe where the
 * handler cannot have interrupted malloc or another nnpccl call: abort
 * from a thread instead (the handler can wake it). The library's own
 * threads block asynchronous signals, so a process-directed signal runs
 * its handler on one of the application's threads.
 *
 * Leaving: a rank that destroys its communicator, or whose process ends or
 * dies, while other ranks are inside or later enter a call that needs it
 * makes those calls fail within about a second (NNPCCL_ERR_REMOTE, naming
 * the rank and, when it had one, its own error); a call that does not
 * need it (the others finishing the last call it took part in) is not
 * affected.
 *
 * fork(): a communicator belongs to the process that created it. In a
 * child forked after init, every call on it or on one of its requests
 * (destroy, abort, wait, test and nnpccl_request_free included) fails at
 * once with NNPCCL_ERR_INVALID_USAGE ("communicator created by pid X used
 * in pid Y"), sends nothing, frees nothing and waits on no lock a thread
 * of the parent held at the fork; the request stays as it was, and the
 * parent's communicator and its job are unaffected. The child may create
 * communicators of its own.
 */
#ifndef NNPCCL_H
#define NNPCCL_H

#include <stddef.h>
#include <stdint.h>

/** Marks the functions the shared library exports; everything else in it
 *  is hidden. */
#if defined(__GNUC__) || defined(__clang__)
#define NNPCCL_API __attribute__((visibility("default")))
#else
#define NNPCCL_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/** Library version: MAJOR.MINOR.PATCH. */
#define NNPCCL_MAJOR 0
#define NNPCCL_MINOR 1
#define NNPCCL_PATCH 0
/** The version as one integer: MAJOR*10000 + MINOR*100 + PATCH. */
#define NNPCCL_VERSION_CODE (NNPCCL_MAJOR * 10000 + NNPCCL_MINOR * 100 + NNPCCL_PATCH)

/** Result of every call. */
typedef enum {
    NNPCCL_SUCCESS = 0,              /**< the call did what was asked */
    NNPCCL_ERR_INVALID_ARGUMENT = 1, /**< an argument was wrong; nothing happened; the communicator stays usable */
    NNPCCL_ERR_INVALID_USAGE = 2,    /**< the call is not allowed in this state, or ranks disagree about the call */
    NNPCCL_ERR_SYSTEM = 3,           /**< the operating system or a library refused (memory, sockets, shared memory) */
    NNPCCL_ERR_INTERNAL = 4,         /**< a bug in nnpccl; please report it with the message */
    NNPCCL_ERR_REMOTE = 5,           /**< a peer failed, died or aborted */
    NNPCCL_ERR_TIMEOUT = 6,          /**< a deadline passed (NNPCCL_TIMEOUT) while waiting for a peer */
    NNPCCL_IN_PROGRESS = 7           /**< a nonblocking init or operation has not finished yet */
} nnpccl_result_t;

/** Element types. A reduction on float16 or bfloat16 combines two values
 *  at a time, each step in float32 and rounded back to nearest even: a sum
 *  over p ranks rounds p - 1 times, as NCCL's does, so its last bits may
 *  depend on the algorithm (the order in which partial sums meet). Every
 *  rank gets the same bits. */
typedef enum {
    NNPCCL_INT8 = 0,
    NNPCCL_UINT8 = 1,
    NNPCCL_INT32 = 2,
    NNPCCL_UINT32 = 3,
    NNPCCL_INT64 = 4,
    NNPCCL_UINT64 = 5,
    NNPCCL_FLOAT16 = 6,
    NNPCCL_BFLOAT16 = 7,
    NNPCCL_FLOAT32 = 8,
    NNPCCL_FLOAT64 = 9,
    NNPCCL_NUM_DATATYPES = 10,
    /* Not datatypes: they make the type as wide as int, so that whatever
     * int a caller passes is a value the library may read and refuse. */
    NNPCCL_DATATYPE_RESERVED_MIN_ = -2147483647 - 1,
    NNPCCL_DATATYPE_RESERVED_MAX_ = 2147483647
} nnpccl_datatype_t;

/** Reduction operations. Integer sum and prod wrap around (two's complement).
 *  avg is the sum divided by the number of ranks after the sum (integer
 *  types: the wrapped sum divided with truncation toward zero). For
 *  floating-point types min and max are IEEE 754's minimum and maximum: a
 *  NaN on any rank makes the result NaN, and -0 counts below +0. */
typedef enum {
    NNPCCL_SUM = 0,
    NNPCCL_PROD = 1,
    NNPCCL_MIN = 2,
    NNPCCL_MAX = 3,
    NNPCCL_AVG = 4,
    NNPCCL_NUM_OPS = 5,
    /* Not operations: int-wide, as for nnpccl_datatype_t. */
    NNPCCL_REDOP_RESERVED_MIN_ = -2147483647 - 1,
    NNPCCL_REDOP_RESERVED_MAX_ = 2147483647
} nnpccl_redop_t;

/** Opaque communicator. */
typedef struct nnpccl_comm *nnpccl_comm_t;
/** Opaque handle of a nonblocking operation. */
typedef struct nnpccl_request *nnpccl_request_t;

/** Rendezvous token: the root's address and a random job secret. Made by
 *  nnpccl_get_unique_id on one rank and handed to all others by the
 *  application (MPI_Bcast, a file, ...). Treat it as a secret. */
#define NNPCCL_UNIQUE_ID_BYTES 128
typedef struct {
    char internal[NNPCCL_UNIQUE_ID_BYTES];
} nnpccl_unique_id_t;

/** Per-communicator settings. Initialise with NNPCCL_CONFIG_INIT; a field
 *  left at its "unset" value takes the environment variable's value or the
 *  default. struct_size comes first so that the structure can grow without
 *  breaking the ABI. */
typedef struct {
    size_t struct_size;  /**< sizeof(nnpccl_config_t) of the caller */
    int timeout_sec;     /**< deadline of every wait, seconds; 0 = NNPCCL_TIMEOUT or 300 */
    size_t chunk_bytes;  /**< pipelining chunk; 0 = NNPCCL_CHUNK_SIZE or the default */
    int blocking;        /**< 1 (default): init returns when the communicator is ready; 0: init returns
                              NNPCCL_IN_PROGRESS at once and builds it in the background (see
                              nnpccl_comm_init_rank); any other value is an invalid argument */
    const char *algorithms; /**< forced algorithms in NNPCCL_ALGO's syntax, for this communicator only
                                 (e.g. "allreduce:direct:0-8K,ring:8K-max;broadcast:ring"); NULL = NNPCCL_ALGO;
                                 "" = none forced, whatever NNPCCL_ALGO says; read during init only */
} nnpccl_config_t;

/** Static initialiser for nnpccl_config_t. */
#define NNPCCL_CONFIG_INIT {sizeof(nnpccl_config_t), 0, 0, 1, NULL}

/** Writes the version code (NNPCCL_VERSION_CODE of the library) to *version. */
NNPCCL_API nnpccl_result_t nnpccl_get_version(int *version);

/** A static, human-readable name of a result code. Never NULL. */
NNPCCL_API const char *nnpccl_get_error_string(nnpccl_result_t result);

/** The detailed message of the last error on this communicator (or, with
 *  comm == NULL, of the last error in this thread that had no communicator,
 *  such as a failed init). After a nonblocking init failed, the init's
 *  message until another call's error replaces it. Never NULL; "" when there
 *  was none. The string stays valid until the next call on the same
 *  communicator/thread. */
NNPCCL_API const char *nnpccl_get_last_error(nnpccl_comm_t comm);

/** Makes a new unique id and starts the rendezvous root in this process.
 *  Call on exactly one process per communicator, before init. The root
 *  listens on the interface NNPCCL_SOCKET_IFNAME names, or the first
 *  non-loopback IPv4 interface that is up, or 127.0.0.1. */
NNPCCL_API nnpccl_result_t nnpccl_get_unique_id(nnpccl_unique_id_t *id);

/** Creates the communicator of rank `rank` out of `nranks`. Collective: every
 *  rank calls it with the same id and nranks. Returns when all ranks have
 *  joined, or NNPCCL_ERR_TIMEOUT when they have not by the deadline.
 *  config may be NULL (defaults).
 *
 *  Nonblocking init (config->blocking = 0, as NCCL's): the arguments and the
 *  config are checked first (an error returns at once, *comm is NULL); then
 *  *comm is set to a valid handle and NNPCCL_IN_PROGRESS returned while a
 *  thread of the library joins the other ranks and builds the communicator.
 *  Poll nnpccl_comm_get_async_error (a few milliseconds apart; it never
 *  waits): NNPCCL_IN_PROGRESS while init runs, NNPCCL_SUCCESS once the
 *  communicator is ready, or the init's error (nnpccl_get_last_error(comm)
 *  gives its message). Until it is ready, every other call on it, rank and
 *  size included, returns NNPCCL_ERR_INVALID_USAGE at once, saying so.
 *  nnpccl_comm_abort or nnpccl_comm_destroy, from any thread, stop a running
 *  init within milliseconds. A failed nonblocking init still needs one of
 *  them to free the handle. Ranks may mix blocking and nonblocking init. */
NNPCCL_API nnpccl_result_t nnpccl_comm_init_rank(nnpccl_comm_t *comm, int nranks, nnpccl_unique_id_t id,
                                                 int rank, const nnpccl_config_t *config);

/** Creates a communicator from the launcher's environment:
 *  rank/size from RANK/WORLD_SIZE (torchrun), OMPI_COMM_WORLD_RANK/SIZE
 *  (Open MPI), PMI_RANK/PMI_SIZE (MPICH hydra) or SLURM_PROCID/SLURM_NTASKS
 *  (srun); the root at NNPCCL_ROOT=host:port or MASTER_ADDR/MASTER_PORT.
 *  Rank 0 runs the root. When no address is set and the launcher says all
 *  ranks share this host, they meet through a private file that rank 0
 *  writes (with a random secret) and removes after init, in
 *  $XDG_RUNTIME_DIR or else /tmp/nnpccl-rendezvous-UID (made 0700); a
 *  directory or file there that is not this user's alone is refused. The job secret comes from NNPCCL_JOB_SECRET when
 *  set (32 hex digits); otherwise it is derived from the launcher's job id,
 *  which guards against stray jobs but not against an attacker on the
 *  network. config->blocking = 0 works as for nnpccl_comm_init_rank: the
 *  environment is read (and rank 0's root started) before it returns;
 *  waiting for the rendezvous file and for the other ranks happens in the
 *  background. */
NNPCCL_API nnpccl_result_t nnpccl_comm_init_from_env(nnpccl_comm_t *comm, const nnpccl_config_t *config);

/** Waits for the communicator's pending operations, then frees it. Collective
 *  in the sense that peers must still be alive for pending operations to
 *  finish; a failed communicator is freed at once. On a communicator whose
 *  nonblocking init is still running it behaves as nnpccl_comm_abort (there
 *  is nothing pending to wait for, and the init could wait until its
 *  deadline); after a failed nonblocking init it only frees the handle. */
NNPCCL_API nnpccl_result_t nnpccl_comm_destroy(nnpccl_comm_t comm);

/** Fails every pending operation of the communicator (they return
 *  NNPCCL_ERR_REMOTE on this rank; peers see this rank go away) and frees it.
 *  Safe from any thread at any time. Calls other threads are making on the
 *  communicator return an error and abort waits for them to leave. A
 *  nonblocking init that is still running stops waiting at once; abort
 *  joins its thread and releases everything it had built (sockets, shared
 *  memory, threads) before returning, and the ranks whose init was waiting
 *  for this one fail too: NNPCCL_ERR_REMOTE naming this rank, or
 *  NNPCCL_ERR_TIMEOUT at their deadline if it had not joined yet. The handle
 *  is invalid once abort returns: later calls with it are refused
 *  (NNPCCL_ERR_INVALID_ARGUMENT) unless a new communicator has since been
 *  given the same address. From a signal handler that interrupted a call of
 *  this thread on comm, abort returns at once and the communicator is
 *  freed as the interrupted call returns (see "Thread safety" above); its
 *  message is then that thread's nnpccl_get_last_error(NULL). */
NNPCCL_API nnpccl_result_t nnpccl_comm_abort(nnpccl_comm_t comm);

/** This process's rank in the communicator. NNPCCL_ERR_INVALID_USAGE until a
 *  nonblocking init has made it ready. */
NNPCCL_API nnpccl_result_t nnpccl_comm_rank(nnpccl_comm_t comm, int *rank);

/** The number of ranks in the communicator. NNPCCL_ERR_INVALID_USAGE until a
 *  nonblocking init has made it ready. */
NNPCCL_API nnpccl_result_t nnpccl_comm_size(nnpccl_comm_t comm, int *size);

/** The communicator's asynchronous state, without waiting for anything:
 *  NNPCCL_IN_PROGRESS while a nonblocking init is still running;
 *  NNPCCL_SUCCESS while it is ready and healthy; otherwise the error that
 *  made it fail (a failed init, a dead peer, a timeout, an abort), whose
 *  message nnpccl_get_last_error(comm) then gives. Between calls it looks
 *  at the peers (at most every 0.1 s), so a watchdog that polls it hears of
 *  a peer that died or aborted without making a call; a peer that destroyed
 *  its communicator cleanly is not an error here (only a call that needs
 *  it fails). The function itself
 *  returns NNPCCL_SUCCESS when it could read the state, and
 *  NNPCCL_ERR_INVALID_USAGE when another thread is destroying or aborting
 *  the communicator. */
NNPCCL_API nnpccl_result_t nnpccl_comm_get_async_error(nnpccl_comm_t comm, nnpccl_result_t *async_error);

/* ---- Collectives ----------------------------------------------------------
 * Every rank of the communicator calls the same collectives in the same
 * order with matching count, datatype, op and root. Counts are in elements;
 * where a count is per rank (per block), count*nranks elements must still
 * fit in memory arithmetic, or the call is an invalid argument.
 * A blocking call returns when this rank's buffers may be reused. On a
 * communicator whose nonblocking init has not made it ready, every
 * collective returns NNPCCL_ERR_INVALID_USAGE at once and does nothing. */

/** recvbuf[i] = op over ranks of sendbuf[i], i < count, on every rank.
 *  In place when sendbuf == recvbuf. */
NNPCCL_API nnpccl_result_t nnpccl_allreduce(const void *sendbuf, void *recvbuf, size_t count,
                                            nnpccl_datatype_t datatype, nnpccl_redop_t op, nnpccl_comm_t comm);

/** sendbuf holds nranks*recvcount elements; rank r receives block r of the
 *  reduction. In place when recvbuf == sendbuf + rank*recvcount elements. */
NNPCCL_API nnpccl_result_t nnpccl_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                                                 nnpccl_datatype_t datatype, nnpccl_redop_t op,
                                                 nnpccl_comm_t comm);

/** recvbuf (nranks*sendcount elements) gets every rank's sendbuf, in rank
 *  order. In place when sendbuf == recvbuf + rank*sendcount elements. */
NNPCCL_API nnpccl_result_t nnpccl_allgather(const void *sendbuf, void *recvbuf, size_t sendcount,
                                            nnpccl_datatype_t datatype, nnpccl_comm_t comm);

/** recvbuf on every rank gets root's sendbuf (sendbuf is read on root only).
 *  In place when sendbuf == recvbuf. */
NNPCCL_API nnpccl_result_t nnpccl_broadcast(const void *sendbuf, void *recvbuf, size_t count,
                                            nnpccl_datatype_t datatype, int root, nnpccl_comm_t comm);

/** recvbuf on root gets the reduction of every rank's sendbuf (recvbuf is
 *  written on root only and may be NULL elsewhere). In place when
 *  sendbuf == recvbuf. */
NNPCCL_API nnpccl_result_t nnpccl_reduce(const void *sendbuf, void *recvbuf, size_t count,
                                         nnpccl_datatype_t datatype, nnpccl_redop_t op, int root,
                                         nnpccl_comm_t comm);

/** recvbuf on root (nranks*sendcount elements) gets every rank's sendbuf
 *  (sendcount elements), in rank order (recvbuf is written on root only and
 *  may be NULL elsewhere). In place when, on root,
 *  sendbuf == recvbuf + root*sendcount elements; other ranks' pointers do
 *  not count. */
NNPCCL_API nnpccl_result_t nnpccl_gather(const void *sendbuf, void *recvbuf, size_t sendcount,
                                         nnpccl_datatype_t datatype, int root, nnpccl_comm_t comm);

/** Root's sendbuf holds nranks*recvcount elements; rank r's recvbuf
 *  (recvcount elements) gets block r (sendbuf is read on root only and may
 *  be NULL elsewhere). In place when, on root,
 *  recvbuf == sendbuf + root*recvcount elements; other ranks' pointers do
 *  not count. */
NNPCCL_API nnpccl_result_t nnpccl_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                                          nnpccl_datatype_t datatype, int root, nnpccl_comm_t comm);

/** sendbuf and recvbuf hold nranks*count elements: block j of sendbuf goes
 *  to rank j, and block i of recvbuf comes from rank i. In place when
 *  sendbuf == recvbuf (the runtime first copies the outgoing blocks aside:
 *  nranks*count more elements of memory for the call). */
NNPCCL_API nnpccl_result_t nnpccl_alltoall(const void *sendbuf, void *recvbuf, size_t count,
                                           nnpccl_datatype_t datatype, nnpccl_comm_t comm);

/** Returns when every rank has entered the barrier. */
NNPCCL_API nnpccl_result_t nnpccl_barrier(nnpccl_comm_t comm);

/* ---- Point to point ---------------------------------------------------------
 * nnpccl_send on rank a with peer b pairs with nnpccl_recv on rank b with
 * peer a: the n-th send from a to b with the n-th recv on b from a (sends
 * to b and receives from b are counted apart, and each pair of ranks
 * apart from every other). The pair must agree on count and datatype, or
 * both ranks' communicators fail with NNPCCL_ERR_INVALID_USAGE (the
 * sender's send may have returned already; then a later call of the sender
 * that waits for a peer fails). Count 0 still pairs (and the buffer may
 * then be NULL). Ranks that take no part in a send and recv do not see
 * them: they need not call anything, and a well-matched pair does not
 * affect their collectives (a mismatched pair fails the communicator on
 * every rank, as any fatal error does). peer must be another rank: a rank
 * cannot send to itself (NNPCCL_ERR_INVALID_ARGUMENT).
 *
 * Ordering: a send or recv starts only after every collective this rank
 * issued before it has finished, and a collective only after every earlier
 * send and recv; among themselves, sends and receives that are pending
 * together progress together, except that two sends to the same peer, two
 * receives from the same peer, and two calls whose buffers overlap where
 * one of them writes run in the order they were issued. Sends and receives
 * share their streams with the collectives, as in NCCL: a send and its recv
 * must stand between the same two collectives on both ranks (a send before
 * an allreduce on one rank and its recv after it on the other is a
 * mismatch, NNPCCL_ERR_INVALID_USAGE).
 *
 * Buffering: a send hands its data to the transport, whose buffers between
 * two ranks hold a few chunks (config.chunk_bytes or NNPCCL_CHUNK_SIZE
 * each; NNPCCL_SHM_SLOTS of them between ranks of one host). A blocking
 * send of a message that fits returns at once; a longer one returns only
 * when the receiver has taken all but the last few chunks. So two ranks
 * that both make a blocking send of a long message to each other before
 * receiving wait for each other until the deadline (NNPCCL_ERR_TIMEOUT).
 * To exchange, post nnpccl_isend and nnpccl_irecv on both ranks and wait
 * for both requests (or order the calls: one rank receives first). */

/** Sends count elements of sendbuf to rank peer, whose matching nnpccl_recv
 *  receives them. Returns when sendbuf may be reused. */
NNPCCL_API nnpccl_result_t nnpccl_send(const void *sendbuf, size_t count, nnpccl_datatype_t datatype, int peer,
                                       nnpccl_comm_t comm);

/** Receives count elements into recvbuf from rank peer's matching
 *  nnpccl_send. Returns when they are in recvbuf. */
NNPCCL_API nnpccl_result_t nnpccl_recv(void *recvbuf, size_t count, nnpccl_datatype_t datatype, int peer,
                                       nnpccl_comm_t comm);

/* ---- Nonblocking forms -----------------------------------------------------
 * Same arguments as the blocking form plus *request, which receives a handle
 * to wait on. Buffers must not be touched until the request has completed.
 * Operations complete in the order they were issued (sends and receives
 * that progress together too: a request is done only once every earlier
 * one is). */

NNPCCL_API nnpccl_result_t nnpccl_iallreduce(const void *sendbuf, void *recvbuf, size_t count,
                                             nnpccl_datatype_t datatype, nnpccl_redop_t op,
                                             nnpccl_comm_t comm, nnpccl_request_t *request);
NNPCCL_API nnpccl_result_t nnpccl_ireduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                                                  nnpccl_datatype_t datatype, nnpccl_redop_t op,
                                                  nnpccl_comm_t comm, nnpccl_request_t *request);
NNPCCL_API nnpccl_result_t nnpccl_iallgather(const void *sendbuf, void *recvbuf, size_t sendcount,
                                             nnpccl_datatype_t datatype, nnpccl_comm_t comm,
                                             nnpccl_request_t *request);
NNPCCL_API nnpccl_result_t nnpccl_ibroadcast(const void *sendbuf, void *recvbuf, size_t count,
                                             nnpccl_datatype_t datatype, int root, nnpccl_comm_t comm,
                                             nnpccl_request_t *request);
NNPCCL_API nnpccl_result_t nnpccl_ireduce(const void *sendbuf, void *recvbuf, size_t count,
                                          nnpccl_datatype_t datatype, nnpccl_redop_t op, int root,
                                          nnpccl_comm_t comm, nnpccl_request_t *request);
NNPCCL_API nnpccl_result_t nnpccl_igather(const void *sendbuf, void *recvbuf, size_t sendcount,
                                          nnpccl_datatype_t datatype, int root, nnpccl_comm_t comm,
                                          nnpccl_request_t *request);
NNPCCL_API nnpccl_result_t nnpccl_iscatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                                           nnpccl_datatype_t datatype, int root, nnpccl_comm_t comm,
                                           nnpccl_request_t *request);
NNPCCL_API nnpccl_result_t nnpccl_ialltoall(const void *sendbuf, void *recvbuf, size_t count,
                                            nnpccl_datatype_t datatype, nnpccl_comm_t comm,
                                            nnpccl_request_t *request);
NNPCCL_API nnpccl_result_t nnpccl_ibarrier(nnpccl_comm_t comm, nnpccl_request_t *request);
NNPCCL_API nnpccl_result_t nnpccl_isend(const void *sendbuf, size_t count, nnpccl_datatype_t datatype, int peer,
                                        nnpccl_comm_t comm, nnpccl_request_t *request);
NNPCCL_API nnpccl_result_t nnpccl_irecv(void *recvbuf, size_t count, nnpccl_datatype_t datatype, int peer,
                                        nnpccl_comm_t comm, nnpccl_request_t *request);

/** Blocks until the request completes and frees it. Returns the operation's
 *  result. The handle is invalid afterwards: wait, test and free refuse it
 *  (NNPCCL_ERR_INVALID_ARGUMENT) as they refuse any handle that is not a
 *  live request, unless a newer request has taken its memory. */
NNPCCL_API nnpccl_result_t nnpccl_wait(nnpccl_request_t request);

/** Sets *done to 1 if the request has completed (the request is then freed
 *  and its result returned) or 0 if not (NNPCCL_SUCCESS returned, the
 *  request stays valid). */
NNPCCL_API nnpccl_result_t nnpccl_test(nnpccl_request_t request, int *done);

/** Releases a request without waiting; the operation still runs to
 *  completion, and its error, if any, shows in the communicator's async
 *  error. */
NNPCCL_API nnpccl_result_t nnpccl_request_free(nnpccl_request_t request);

#ifdef __cplusplus
}
#endif

#endif /* NNPCCL_H */
