/*
 * nnpccl_inspect.h — what nnpccl plans, for tools and for users who tune.
 *
 * Every collective is run by one of several algorithms, chosen per call by
 * the selector: NNPCCL_ALGO's (or config->algorithms') forced choices first,
 * else measured tuning where the cost model cannot tell close algorithms
 * apart on the host, else the cost model (docs/design.md, "Life of a call").
 * These calls show that choice and the model's figures, and let a program
 * force other algorithms on a live communicator. ccl-bench is built on them
 * and on nnpccl.h alone.
 *
 * Conventions are nnpccl.h's: every call returns an nnpccl_result_t, an
 * invalid argument has no effect, and nnpccl_get_last_error() says what
 * was wrong (with a NULL communicator for calls that take none).
 */
#ifndef NNPCCL_INSPECT_H
#define NNPCCL_INSPECT_H

#include "nnpccl.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The collectives, as the algorithm registry and NNPCCL_ALGO name them. */
typedef enum {
    NNPCCL_COLL_ALLREDUCE = 0,
    NNPCCL_COLL_REDUCE_SCATTER = 1,
    NNPCCL_COLL_ALLGATHER = 2,
    NNPCCL_COLL_BROADCAST = 3,
    NNPCCL_COLL_REDUCE = 4,
    NNPCCL_COLL_BARRIER = 5,
    NNPCCL_COLL_GATHER = 6,
    NNPCCL_COLL_SCATTER = 7,
    NNPCCL_COLL_ALLTOALL = 8,
    NNPCCL_COLL_SEND = 9,
    NNPCCL_COLL_RECV = 10,
    NNPCCL_NUM_COLLECTIVES = 11,
    /* Not collectives: int-wide, as for nnpccl_datatype_t. */
    NNPCCL_COLLECTIVE_RESERVED_MIN_ = -2147483647 - 1,
    NNPCCL_COLLECTIVE_RESERVED_MAX_ = 2147483647
} nnpccl_collective_t;

/** "allreduce", "reduce_scatter", ...; NULL for a value that is none. */
NNPCCL_API const char *nnpccl_collective_name(nnpccl_collective_t collective);
/** The collective named `name` (as nnpccl_collective_name spells it). */
NNPCCL_API nnpccl_result_t nnpccl_collective_from_name(const char *name, nnpccl_collective_t *collective);
/** Bytes per element; 0 for a value that is no datatype. */
NNPCCL_API size_t nnpccl_datatype_size(nnpccl_datatype_t datatype);
/** nccl-tests' names: "int8", "uint8", "int32", "uint32", "int64", "uint64",
 *  "half", "bfloat16", "float", "double"; NULL for a value that is no
 *  datatype. */
NNPCCL_API const char *nnpccl_datatype_name(nnpccl_datatype_t datatype);
/** The datatype named `name`: its name above or an alias ("float32", "fp16",
 *  "f64", "bf16", "i32", ...). */
NNPCCL_API nnpccl_result_t nnpccl_datatype_from_name(const char *name, nnpccl_datatype_t *datatype);
/** "sum", "prod", "min", "max", "avg"; NULL for a value that is no op. */
NNPCCL_API const char *nnpccl_redop_name(nnpccl_redop_t op);
/** The op named `name` (as nnpccl_redop_name spells it). */
NNPCCL_API nnpccl_result_t nnpccl_redop_from_name(const char *name, nnpccl_redop_t *op);

/** One algorithm of the registry. The strings live as long as the library. */
typedef struct {
    const char *name;        /**< as NNPCCL_ALGO names it: "ring", "halving_doubling", ... */
    const char *summary;     /**< one line */
    const char *constraints; /**< when it applies, in words ("" = always) */
    unsigned serves;         /**< bit (1u << c) for every nnpccl_collective_t c it runs */
} nnpccl_algorithm_info_t;

/** Algorithms in the registry (the order ties are broken in). */
NNPCCL_API int nnpccl_algorithm_count(void);
/** The registry's `index`-th algorithm, 0 <= index < nnpccl_algorithm_count(). */
NNPCCL_API nnpccl_result_t nnpccl_algorithm_get(int index, nnpccl_algorithm_info_t *info);

/** One call, described as the collective functions of nnpccl.h take it:
 *  `count` is theirs (the per-rank block for the block-wise collectives),
 *  `root` is the root or the peer of a send or recv (ignored where there is
 *  none), and in place is read off the pointers as the call would. */
typedef struct {
    nnpccl_collective_t collective;
    const void *sendbuf;
    void *recvbuf;
    size_t count;
    nnpccl_datatype_t datatype;
    nnpccl_redop_t op;
    int root;
} nnpccl_call_t;

/** Replaces the algorithms the communicator forces (config->algorithms or
 *  NNPCCL_ALGO) with `rules`, in NNPCCL_ALGO's syntax; "" forces none and
 *  NULL restores those it was made with. Collective: every rank makes the
 *  same change between the same two calls, or their plans differ (a call
 *  whose ranks then run different algorithms fails on them with
 *  NNPCCL_ERR_INVALID_USAGE naming both). A bad token is an invalid
 *  argument naming it, and nothing changes. */
NNPCCL_API nnpccl_result_t nnpccl_comm_set_algorithms(nnpccl_comm_t comm, const char *rules);

/** The algorithm the next call like `call` runs on this communicator,
 *  copied to `name` (`name_bytes` with its terminating NUL; "" while the
 *  ranks are still measuring which one). `tuning_calls_left`, when not
 *  NULL, receives how many more calls like it the communicator will spend
 *  measuring before it decides (an upper bound during its first
 *  collectives; the same on every rank), so that a benchmark can run them
 *  as warm-up. Plans nothing that the call itself would not. Call it from
 *  the thread that issues the communicator's calls. */
NNPCCL_API nnpccl_result_t nnpccl_comm_get_algorithm(nnpccl_comm_t comm, const nnpccl_call_t *call, char *name,
                                                     size_t name_bytes, size_t *tuning_calls_left);

/** One algorithm's prediction for a call. */
typedef struct {
    const char *algorithm; /**< its name */
    int applies;           /**< 0: it cannot run this call here, and why_not says why */
    double time_us;        /**< predicted time, when it applies */
    double busbw_gbps;     /**< the bus bandwidth that time gives (nccl-tests' busbw) */
    int chosen;            /**< 1 for the selector's choice */
    int measured;          /**< 1 where the ranks would time it before choosing (measured tuning) */
    char why_not[256];
} nnpccl_prediction_t;

/** What the selector does with a call on a machine, without running it. */
typedef struct {
    char topology[64];       /**< the machine's name ("flat", "nnpt-hcm8", ...) */
    int nranks;
    size_t chunk_bytes;      /**< the chosen algorithm's largest message (its pipelining chunk) */
    double host_reduce_us_per_byte; /**< the model's sum speed (measured with NNPCCL_TUNE=1) */
    double ranks_per_core;   /**< as if the ranks ran on this host */
    int algorithms_forced;   /**< 1 when NNPCCL_ALGO forces anything */
    int tunes;               /**< 1 when the ranks would measure close algorithms on this machine */
    int forced;              /**< 1 when the choice is NNPCCL_ALGO's */
    char chosen[32];         /**< the algorithm; "" when none applies (error says why) */
    double injection_gbps;   /**< the slowest chip's injection bandwidth */
    double lower_bound_us;   /**< the call's bus bytes at that bandwidth: no algorithm can beat it */
    double lower_bound_busbw_gbps;
    char error[256];
} nnpccl_explanation_t;

/** Plans `call` (its buffers are not read) as a job of `nranks` ranks (0:
 *  one on every chip of the topology) on
 *  `topology` (a preset name or a topology file, NULL or "" for flat, as
 *  NNPCCL_TOPO) would, with the settings of the environment, and reports
 *  every algorithm serving the collective, in registry order, in
 *  predictions[0..*count) (at most `capacity`), and the choice in
 *  *explanation. A call no algorithm can run is no error: explanation->
 *  chosen is "" and ->error says why. With both buffers NULL the call is
 *  planned out of place. */
NNPCCL_API nnpccl_result_t nnpccl_explain(const char *topology, int nranks, const nnpccl_call_t *call,
                                          nnpccl_prediction_t *predictions, int capacity, int *count,
                                          nnpccl_explanation_t *explanation);

/** As nnpccl_explain, with `rules` (NNPCCL_ALGO's syntax, e.g.
 *  "allreduce:ring:0-64K") in place of the environment's NNPCCL_ALGO: the
 *  plan a job with NNPCCL_ALGO=rules would make, so that a program can ask
 *  about a rule without setting the environment. NULL keeps the
 *  environment's; "" forces nothing. Rules that do not parse are an
 *  invalid argument naming the token (as NNPCCL_ALGO). */
NNPCCL_API nnpccl_result_t nnpccl_explain_with_rules(const char *topology, int nranks, const nnpccl_call_t *call,
                                                     const char *rules, nnpccl_prediction_t *predictions,
                                                     int capacity, int *count, nnpccl_explanation_t *explanation);

#ifdef __cplusplus
}
#endif

#endif /* NNPCCL_INSPECT_H */
