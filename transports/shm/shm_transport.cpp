#include "shm_transport.hpp"

#include <fcntl.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <thread>

#include "bootstrap.hpp"
#include "bootstrap_wire.hpp"
#include "log.hpp"
#include "shared_memory.hpp"

namespace nnpccl {

namespace {

constexpr uint64_t kSegmentMagic = 0x6e6e7063636c7368ull; // "nnpcclsh"

constexpr size_t kCacheLine = 64;
constexpr size_t kPage = 4096;
// Queues a rank populates at set-up, at most (see populate_queues()).
constexpr size_t kPopulateBudget = size_t{256} << 20;
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 // Linux 5.14; older kernels refuse it and the pages fault in as used
#endif

size_t round_up(size_t v, size_t to) { return (v + to - 1) / to * to; }

int64_t monotonic_ns() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

long futex(std::atomic<uint32_t> *addr, int op, uint32_t value, const timespec *timeout) {
    // The segment is shared between processes: no FUTEX_PRIVATE_FLAG.
    return syscall(SYS_futex, reinterpret_cast<uint32_t *>(addr), op, value, timeout, nullptr, 0);
}

// A peer's segment that cannot be opened or mapped is usually the sign of
// a peer that failed or aborted during set-up (its descriptor is gone):
// give the bootstrap a moment to say so, and report that instead.
Status peer_failure_or(Bootstrap &bootstrap, Status original) {
    const Deadline grace = Deadline::after_seconds(1);
    while (!grace.passed()) {
        if (Status job = bootstrap.check_job(); !job) return job;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return original;
}

} // namespace

struct ShmTransport::Segment {
    uint64_t magic;
    uint32_t nranks;
    uint32_t channels;
    uint32_t slots;
    uint32_t owner_rank;
    uint64_t slot_bytes;
    int32_t owner_pid;
    // Whether the owner registered for MEMBARRIER_CMD_GLOBAL_EXPEDITED
    // (see ring_if_asleep()).
    uint32_t registered_membarrier;
    alignas(kCacheLine) std::atomic<uint32_t> doorbell;
    std::atomic<uint32_t> sleepers;
    std::atomic<uint32_t> aborted; // the result this rank failed with; 0 while it has not
    // Why, for the peers' messages: written once (by whoever takes
    // abort_claimed) before `aborted` is set.
    std::atomic<uint32_t> abort_claimed;
    char abort_reason[512];
    // CLOCK_MONOTONIC (one clock for every process of a host) of this
    // rank's last sign of life: its last check_peers(), or its start.
    std::atomic<int64_t> alive_ns;
    // Set when this rank has left without failing (its communicator was
    // destroyed): its process may then end at any time, and that is no
    // death. Peers that still run the last calls without it must not fail
    // for it, and when one of them waits for it all the same, a timeout
    // says it has left.
    std::atomic<uint32_t> departed;
};

// One inbound stream: a ring of kCells cells, then `slots` slots. Every
// message takes the cell of its position in the stream: the control words
// (`ready`: the position plus one once the message is there; its size), 40
// bytes where the sender's header rides, then kInlineBytes of room.
// A message that fits there is carried in its cell; a larger one in slot
// (position mod slots). The sender fills the message, then the control
// line's size and, last, `ready`; the receiver polls `ready`. Each side
// counts its own position, and the sender reads `tail` (the receiver's
// count of messages given back) only when its own copy says the cell, or
// for a large message the slot, may still be in use.
//
// Why cells: small messages (the descriptor and a few floats) then cost
// the receiver the one or few lines of their cell, in a ring it reads in
// order, which the hardware prefetches; and a stream holds kCells of them,
// so a rank that only sends (a broadcast's root) runs that many calls
// ahead of its receivers rather than `slots`.
constexpr uint64_t kCells = 64;
constexpr size_t kCellBytes = 256;
constexpr uint64_t kInSlot = uint64_t{1} << 63; // in a control line's size: the message is in its slot

struct ShmTransport::Queue {
    alignas(kCacheLine) std::atomic<uint64_t> tail;
    // Followed by the cells, from the next line, then the slots.
};

// A cell's first line: the control words, then the sender's header
// (header_room(): an operation's descriptor exactly), then the first bytes
// of a message carried in the cell, so a message of up to 8 bytes with its
// descriptor is one line.
struct ShmTransport::SlotControl {
    std::atomic<uint64_t> ready;
    uint64_t bytes;
    unsigned char header[40];
};
static_assert(sizeof(ShmTransport::SlotControl) == 56);

namespace {

constexpr size_t kInlineBytes = kCellBytes - sizeof(ShmTransport::SlotControl);
constexpr size_t kSlotsOffset = sizeof(ShmTransport::Queue) + kCells * kCellBytes;
static_assert(kCellBytes % kCacheLine == 0);

size_t slot_stride(size_t slot_bytes) { return round_up(slot_bytes, kCacheLine); }
size_t segment_header_bytes() { return round_up(sizeof(ShmTransport::Segment), kPage); }
size_t queue_bytes(int slots, size_t slot_bytes) {
    return round_up(kSlotsOffset + static_cast<size_t>(slots) * slot_stride(slot_bytes), kPage);
}

} // namespace

size_t ShmTransport::resident_bytes(int local_ranks, int channels, int slots, size_t slot_bytes) {
    const size_t peers = static_cast<size_t>(std::max(local_ranks, 1) - 1);
    return static_cast<size_t>(std::max(local_ranks, 1)) * segment_header_bytes() +
           2 * peers * static_cast<size_t>(channels) * queue_bytes(slots, slot_bytes);
}

// The deepest queues, up to options.slots, whose pages fit options.bytes.
// Every queue gets the same depth: which peers and channels the algorithms
// use is known only per call, and any of them may. Cost: one size per
// candidate depth, at most 63.
Status ShmTransport::fit_slots(int local_ranks, int channels, const ShmOptions &options, size_t slot_bytes,
                               int *slots) {
    constexpr int kMinSlots = 2; // NNPCCL_SHM_SLOTS' least: one slot being filled while the other drains
    int fit = options.slots;
    while (fit > kMinSlots && resident_bytes(local_ranks, channels, fit, slot_bytes) > options.bytes) --fit;
    const size_t least = resident_bytes(local_ranks, channels, fit, slot_bytes);
    if (least > options.bytes) {
        const size_t need_mib = (least + (1 << 20) - 1) >> 20;
        if (options.bytes_set)
            return invalid_argument("NNPCCL_SHM_BYTES=%zu is too small for %d ranks on this host: their queues (%d "
                                    "channels, %d slots of %zu bytes, to and from each local peer) need %zu MiB per "
                                    "rank; raise it, or lower NNPCCL_CHUNK_SIZE",
                                    options.bytes, local_ranks, channels, fit, slot_bytes, need_mib);
        LOG_INFO("shm: %d local ranks need %zu MiB of queues per rank even at %d slots, more than the default %zu "
                 "MiB; NNPCCL_SHM_BYTES with a smaller NNPCCL_CHUNK_SIZE bounds it",
                 local_ranks, need_mib, fit, options.bytes >> 20);
    }
    *slots = fit;
    return Status::ok();
}

ShmTransport::Queue *ShmTransport::queue(int owner, int sender, int channel) const {
    char *base = reinterpret_cast<char *>(segments_[static_cast<size_t>(owner)]);
    size_t index = static_cast<size_t>(sender) * static_cast<size_t>(channels_) + static_cast<size_t>(channel);
    return reinterpret_cast<Queue *>(base + segment_header_bytes() + index * queue_stride_);
}

Status ShmTransport::map_own_segment(int numa_node, int *fd_out) {
    // Our own segment: anonymous shared memory (a memfd), sized sparsely
    // (pages are only backed once a peer actually sends). It never has a
    // name in /dev/shm, so no crash at any moment can leave a file behind;
    // peers map it through /proc/<pid>/fd/<fd> while this rank holds it
    // open, which the kernel allows only to processes of the same user
    // that may inspect this one.
    const int fd = static_cast<int>(syscall(SYS_memfd_create, "nnpccl-shm", MFD_CLOEXEC));
    if (fd < 0) return errno_error("memfd_create of the shared-memory segment");
    Status st;
    if (ftruncate(fd, static_cast<off_t>(segment_bytes_)) != 0) st = errno_error("ftruncate of the shm segment");
    void *mem = MAP_FAILED;
    if (st) {
        mem = mmap(nullptr, segment_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (mem == MAP_FAILED) {
            const int map_errno = errno;
            st =
                system_error("mmap of this rank's %zu-byte shm segment: %s%s", segment_bytes_, std::strerror(map_errno),
                             map_errno == ENOMEM ? " (out of address space or memory: ulimit -v may be too low)" : "");
        }
    }
    if (!st) {
        close(fd);
        return st;
    }
    if (numa_node >= 0 && numa_node < 64) {
        // Peers write these pages, and first touch would put them on the
        // writer's node: ask for the reader's (this rank's) node instead.
        unsigned long mask = 1ul << numa_node;
        if (syscall(SYS_mbind, mem, segment_bytes_, 1 /* MPOL_PREFERRED */, &mask, 64, 0) != 0)
            LOG_INFO("shm: could not prefer NUMA node %d for the segment: %s", numa_node, std::strerror(errno));
    }
    auto *seg = static_cast<Segment *>(mem);
    seg->magic = kSegmentMagic;
    seg->nranks = static_cast<uint32_t>(nranks_);
    seg->channels = static_cast<uint32_t>(channels_);
    seg->slots = static_cast<uint32_t>(slots_);
    seg->owner_rank = static_cast<uint32_t>(rank_);
    seg->slot_bytes = slot_bytes_;
    seg->owner_pid = static_cast<int32_t>(getpid());
    seg->registered_membarrier = syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0, 0) == 0 ? 1 : 0;
    seg->alive_ns.store(monotonic_ns(), std::memory_order_relaxed);
    segments_[static_cast<size_t>(rank_)] = seg;
    pids_[static_cast<size_t>(rank_)] = getpid();
    *fd_out = fd;
    return Status::ok();
}

Status ShmTransport::map_peer_segment(int peer, const std::string &announcement) {
    long peer_pid = 0, peer_fd = 0;
    if (!parse_pid_fd(announcement, &peer_pid, &peer_fd)) {
        return invalid_usage("rank %d announced a malformed shm segment '%.64s' (expected 'PID FD')", peer,
                             announcement.c_str());
    }
    std::string path = format("/proc/%ld/fd/%ld", peer_pid, peer_fd);
    int pfd = open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (pfd < 0) {
        return errno_error(format("opening the shared memory of rank %d (%s); ranks that cannot see each other's "
                                  "/proc (other users, other PID namespaces) need NNPCCL_TRANSPORT=ofi",
                                  peer, path.c_str()));
    }
    struct stat info {};
    void *pmem = MAP_FAILED;
    const bool same_size = fstat(pfd, &info) == 0 && static_cast<size_t>(info.st_size) == segment_bytes_;
    if (same_size) pmem = mmap(nullptr, segment_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, pfd, 0);
    const int map_errno = errno;
    close(pfd);
    if (same_size && pmem == MAP_FAILED) {
        return system_error("cannot map the shm segment of rank %d (%zu bytes): %s%s", peer, segment_bytes_,
                            std::strerror(map_errno),
                            map_errno == ENOMEM ? " (out of address space or memory: an address-space limit, "
                                                  "ulimit -v, may be too low; NNPCCL_SHM_BYTES or a smaller "
                                                  "NNPCCL_CHUNK_SIZE makes the segments smaller)"
                                                : "");
    }
    if (pmem == MAP_FAILED) {
        return system_error("cannot map the shm segment of rank %d (size %lld, expected %zu): do all ranks use "
                            "the same NNPCCL_CHUNK_SIZE, NNPCCL_SHM_SLOTS and NNPCCL_SHM_BYTES?",
                            peer, static_cast<long long>(info.st_size), segment_bytes_);
    }
    const auto *theirs = static_cast<const Segment *>(pmem);
    if (theirs->magic != kSegmentMagic || theirs->owner_rank != static_cast<uint32_t>(peer) ||
        theirs->owner_pid != peer_pid || theirs->nranks != static_cast<uint32_t>(nranks_) ||
        theirs->channels != static_cast<uint32_t>(channels_) || theirs->slots != static_cast<uint32_t>(slots_) ||
        theirs->slot_bytes != slot_bytes_) {
        munmap(pmem, segment_bytes_);
        return invalid_usage("the shared memory at %s is not rank %d's segment of this job with this layout "
                             "(%d ranks, %d channels, %d slots of %zu bytes)",
                             path.c_str(), peer, nranks_, channels_, slots_, slot_bytes_);
    }
    segments_[static_cast<size_t>(peer)] = static_cast<Segment *>(pmem);
    pids_[static_cast<size_t>(peer)] = static_cast<pid_t>(peer_pid);
    return Status::ok();
}

Status ShmTransport::create(Bootstrap &bootstrap, const std::vector<int> &local_peers, int channels,
                            const ShmOptions &options, size_t message_bytes, int numa_node, const Deadline &deadline,
                            std::unique_ptr<ShmTransport> *out) {
    // Every rank of the host computes the same depth from the same inputs:
    // a rank set differently fails the layout check below.
    int slots = 0;
    NNPCCL_TRY(fit_slots(static_cast<int>(local_peers.size()), channels, options, message_bytes, &slots));
    std::unique_ptr<ShmTransport> t(new ShmTransport());
    t->rank_ = bootstrap.rank();
    t->nranks_ = bootstrap.nranks();
    t->channels_ = channels;
    t->slots_ = slots;
    t->slot_bytes_ = message_bytes;
    t->queue_stride_ = queue_bytes(t->slots_, t->slot_bytes_);
    t->slot_stride_ = slot_stride(t->slot_bytes_);
    const size_t streams = static_cast<size_t>(t->nranks_) * static_cast<size_t>(channels);
    t->sent_.assign(streams, 0);
    t->sending_in_slot_.assign(streams, 0);
    t->freed_seen_.assign(streams, 0);
    t->received_.assign(streams, 0);
    t->arrived_seen_.assign(streams, 0);
    t->segment_bytes_ = segment_header_bytes() + streams * t->queue_stride_;
    t->segments_.assign(static_cast<size_t>(t->nranks_), nullptr);
    t->pids_.assign(static_cast<size_t>(t->nranks_), 0);

    int fd = -1;
    NNPCCL_TRY(t->map_own_segment(numa_node, &fd));

    // Everyone learns where everyone's segment is; each rank maps those of its local peers.
    std::string mine = std::to_string(getpid()) + " " + std::to_string(fd);
    std::vector<std::string> all;
    Status st = bootstrap.allgather(mine, deadline, &all);
    const bool gathered = st.is_ok();
    for (int peer : local_peers) {
        if (!st || peer == t->rank_) continue;
        st = t->map_peer_segment(peer, all[static_cast<size_t>(peer)]);
    }
    // Every rank of the host sees the same segments, so all decide alike.
    t->asymmetric_fences_ = st.is_ok();
    for (Segment *mapped : t->segments_)
        if (mapped != nullptr && mapped->registered_membarrier == 0) t->asymmetric_fences_ = false;
    // Once every rank has mapped what it needs, the descriptor has served:
    // the mappings keep the memory alive.
    if (gathered && !st) st = peer_failure_or(bootstrap, st);
    if (st) t->populate_queues(local_peers);
    Status barrier = st ? bootstrap.barrier(deadline) : st;
    close(fd);
    if (!barrier) return barrier;
    LOG_INFO("shm transport: %zu local ranks, %d channels, %d slots of %zu bytes: %zu KiB of queues per rank "
             "(NNPCCL_SHM_BYTES %zu KiB); %s",
             local_peers.size(), channels, t->slots_, t->slot_bytes_,
             resident_bytes(static_cast<int>(local_peers.size()), channels, t->slots_, t->slot_bytes_) >> 10,
             options.bytes >> 10,
             t->asymmetric_fences_ ? "sleepers fence the senders (membarrier)" : "senders fence after each message");
    *out = std::move(t);
    return Status::ok();
}

// Faults in, in one system call per queue, the pages this rank's mappings
// will touch: its inbound queues from its local peers and its outbound
// queues in theirs. Otherwise every page faults at its first message: a
// job's first calls run many times slower than its later ones, and the
// tuner's first trials are skewed by it (docs/performance.md, "Scratch and
// first touch"). One MADV_POPULATE_WRITE per queue costs far less than a
// fault per page at first use. Past kPopulateBudget per rank (many ranks
// on one host, or huge chunks) the queues stay sparse, as memory that
// algorithms using few peers never touch.
void ShmTransport::populate_queues(const std::vector<int> &local_peers) {
    const size_t queues = 2 * (local_peers.size() - 1) * static_cast<size_t>(channels_);
    if (queues * queue_stride_ > kPopulateBudget) {
        LOG_INFO("shm: %zu MiB of queues exceed the %zu MiB populated at set-up; their pages fault in as used",
                 (queues * queue_stride_) >> 20, kPopulateBudget >> 20);
        return;
    }
    for (int peer : local_peers) {
        if (peer == rank_) continue;
        for (int c = 0; c < channels_; ++c)
            for (Queue *q : {queue(rank_, peer, c), queue(peer, rank_, c)}) {
                if (madvise(q, queue_stride_, MADV_POPULATE_WRITE) != 0) {
                    LOG_INFO("shm: cannot populate the queues (%s); their pages fault in as used",
                             std::strerror(errno));
                    return;
                }
                for (size_t o = 0; o < queue_stride_; o += kPage) (void)reinterpret_cast<volatile char *>(q)[o];
            }
    }
}

ShmTransport::~ShmTransport() {
    if (rank_ >= 0 && segments_[static_cast<size_t>(rank_)] != nullptr)
        segments_[static_cast<size_t>(rank_)]->departed.store(1, std::memory_order_release);
    for (Segment *seg : segments_)
        if (seg != nullptr) munmap(seg, segment_bytes_);
}

ShmTransport::SlotControl *ShmTransport::cell(Queue *q, uint64_t position) const {
    return reinterpret_cast<SlotControl *>(reinterpret_cast<char *>(q) + sizeof(Queue) +
                                           (position % kCells) * kCellBytes);
}

char *ShmTransport::message_at(Queue *q, uint64_t position, bool in_slot) const {
    if (!in_slot) return reinterpret_cast<char *>(cell(q, position) + 1);
    return reinterpret_cast<char *>(q) + kSlotsOffset + (position % static_cast<uint64_t>(slots_)) * slot_stride_;
}

size_t ShmTransport::header_room() const { return sizeof(SlotControl::header); }

void ShmTransport::ring(int rank) {
    Segment *seg = segments_[static_cast<size_t>(rank)];
    seg->doorbell.fetch_add(1, std::memory_order_seq_cst);
    if (seg->sleepers.load(std::memory_order_seq_cst) != 0) futex(&seg->doorbell, FUTEX_WAKE, INT_MAX, nullptr);
}

// The waker's half of the doorbell's handshake (wait_for_event() has the
// sleeper's): the store that made the news visible, a fence, then the
// sleepers count. A rank that is not asleep is not rung at all, so a
// message between ranks that poll costs no read-modify-write of a line
// both sides write. The fence is a full one (which waits for the store to
// reach the peer) unless every rank of the host registered for
// MEMBARRIER_CMD_GLOBAL_EXPEDITED: then the sleeper, on its slow path
// anyway, has membarrier(2) execute that fence on every running rank for
// it, and here the store and the load need only stay in order in the
// compiler. Either way one side's barrier falls between the other's store
// and load, so the two cannot miss each other.
void ShmTransport::ring_if_asleep(int rank) {
    Segment *seg = segments_[static_cast<size_t>(rank)];
    if (asymmetric_fences_) std::atomic_signal_fence(std::memory_order_seq_cst);
    else std::atomic_thread_fence(std::memory_order_seq_cst);
    if (seg->sleepers.load(std::memory_order_relaxed) != 0) ring(rank);
}

void *ShmTransport::try_acquire_send(int peer, int channel, size_t bytes) {
    const size_t stream = stream_index(peer, channel);
    const uint64_t head = sent_[stream];
    // A cell is free once the message kCells back was given back; a slot
    // once the message `slots` back was (its slot's last user at the most).
    const bool in_slot = bytes > kInlineBytes;
    const uint64_t in_use = in_slot ? std::min<uint64_t>(kCells, static_cast<uint64_t>(slots_)) : kCells;
    Queue *q = queue(peer, rank_, channel);
    if (head - freed_seen_[stream] >= in_use) {
        freed_seen_[stream] = q->tail.load(std::memory_order_acquire);
        if (head - freed_seen_[stream] >= in_use) return nullptr;
        count_local_event();
    }
    sending_in_slot_[stream] = in_slot;
    return message_at(q, head, in_slot);
}

void *ShmTransport::send_header(int peer, int channel) {
    return cell(queue(peer, rank_, channel), sent_[stream_index(peer, channel)])->header;
}

void ShmTransport::commit_send(int peer, int channel, size_t bytes) {
    const size_t stream = stream_index(peer, channel);
    const uint64_t head = sent_[stream]++;
    SlotControl *control = cell(queue(peer, rank_, channel), head);
    // Where the message was written, as acquired: a message may come out
    // shorter than the size it was acquired for.
    control->bytes = bytes | (sending_in_slot_[stream] ? kInSlot : 0);
    control->ready.store(head + 1, std::memory_order_release);
    ring_if_asleep(peer);
}

const void *ShmTransport::try_peek_recv(int peer, int channel, size_t *bytes) {
    const size_t stream = stream_index(peer, channel);
    const uint64_t tail = received_[stream];
    Queue *q = queue(rank_, peer, channel);
    SlotControl *control = cell(q, tail);
    if (control->ready.load(std::memory_order_acquire) != tail + 1) return nullptr;
    if (arrived_seen_[stream] == tail) {
        arrived_seen_[stream] = tail + 1;
        count_local_event();
    }
    const uint64_t word = control->bytes;
    *bytes = word & ~kInSlot;
    return message_at(q, tail, (word & kInSlot) != 0);
}

const void *ShmTransport::recv_header(int peer, int channel) const {
    return cell(queue(rank_, peer, channel), received_[stream_index(peer, channel)])->header;
}

void ShmTransport::release_recv(int peer, int channel) {
    const size_t stream = stream_index(peer, channel);
    const uint64_t tail = ++received_[stream];
    arrived_seen_[stream] = std::max(arrived_seen_[stream], tail);
    Queue *q = queue(rank_, peer, channel);
    q->tail.store(tail, std::memory_order_release);
    // The next cell's lines, ahead of the next peek: when the sender is
    // ahead (a receiver that reduces is the slower side), its message is
    // there, and its payload lines arrive while this call returns instead of
    // one miss after the control line's. When it is not written yet, this
    // costs the sender nothing it would not pay anyway: those lines are
    // still in this core's cache from the cell's last message.
    const char *next = reinterpret_cast<const char *>(cell(q, tail));
    for (size_t line = 0; line < kCellBytes; line += kCacheLine) __builtin_prefetch(next + line);
    ring_if_asleep(peer);
}

uint64_t ShmTransport::event_count() const {
    return segments_[static_cast<size_t>(rank_)]->doorbell.load(std::memory_order_acquire) +
           local_events_.load(std::memory_order_relaxed);
}

// Counts what has changed since this rank last looked: a message it had
// not seen on an inbound stream, a slot given back on an outbound one.
// Cost: one line per stream of each local peer.
bool ShmTransport::notice_changes() {
    bool changed = false;
    for (int peer = 0; peer < nranks_; ++peer) {
        if (segments_[static_cast<size_t>(peer)] == nullptr || peer == rank_) continue;
        for (int c = 0; c < channels_; ++c) {
            const size_t stream = stream_index(peer, c);
            uint64_t &seen = arrived_seen_[stream];
            while (seen - received_[stream] < kCells &&
                   cell(queue(rank_, peer, c), seen)->ready.load(std::memory_order_acquire) == seen + 1) {
                ++seen;
                changed = true;
            }
            const uint64_t freed = queue(peer, rank_, c)->tail.load(std::memory_order_acquire);
            if (freed != freed_seen_[stream]) {
                freed_seen_[stream] = freed;
                changed = true;
            }
        }
    }
    if (changed) count_local_event();
    return changed;
}

// The sleeper's half of the handshake: count itself among the sleepers
// (a full barrier; with asymmetric fences, one on every running rank too),
// then look at the queues once more, then sleep on the doorbell. A peer whose news landed after that look sees the sleeper and
// rings; one whose news landed before it is found by the look.
void ShmTransport::wait_for_event(uint64_t seen, int timeout_ms) {
    Segment *seg = segments_[static_cast<size_t>(rank_)];
    seg->sleepers.fetch_add(1, std::memory_order_seq_cst);
    if (asymmetric_fences_) syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0, 0);
    const uint32_t bell = seg->doorbell.load(std::memory_order_seq_cst);
    notice_changes();
    if (event_count() == seen) {
        timespec ts{timeout_ms / 1000, static_cast<long>(timeout_ms % 1000) * 1000000L};
        futex(&seg->doorbell, FUTEX_WAIT, bell, &ts);
    }
    seg->sleepers.fetch_sub(1, std::memory_order_seq_cst);
}

// A peer's own announcement first: a rank that failed and then exited is
// named for why it failed, not for having exited. An announcement carries
// its reason, so a rank that failed because another died names that one.
Status ShmTransport::check_peers() {
    segments_[static_cast<size_t>(rank_)]->alive_ns.store(monotonic_ns(), std::memory_order_relaxed);
    for (int peer = 0; peer < nranks_; ++peer) {
        Segment *seg = segments_[static_cast<size_t>(peer)];
        if (seg == nullptr || peer == rank_) continue;
        uint32_t why = seg->aborted.load(std::memory_order_acquire);
        if (why != 0) {
            // Ranks that disagreed about a call fail alike everywhere, and a
            // timeout is a timeout wherever it was seen; anything else is a
            // failure elsewhere.
            nnpccl_result_t code = why == NNPCCL_ERR_INVALID_USAGE || why == NNPCCL_ERR_TIMEOUT
                                       ? static_cast<nnpccl_result_t>(why)
                                       : NNPCCL_ERR_REMOTE;
            const std::string reason(seg->abort_reason, strnlen(seg->abort_reason, sizeof seg->abort_reason));
            return Status(
                code, format("rank %d (pid %d) failed: %s", peer, pids_[static_cast<size_t>(peer)], reason.c_str()));
        }
        if (seg->departed.load(std::memory_order_acquire) != 0) continue;
        if (kill(pids_[static_cast<size_t>(peer)], 0) != 0 && errno == ESRCH)
            return remote_error("rank %d (pid %d) has died", peer, pids_[static_cast<size_t>(peer)]);
    }
    return Status::ok();
}

bool ShmTransport::has_left(int peer) const {
    const Segment *seg = peer >= 0 && peer < nranks_ ? segments_[static_cast<size_t>(peer)] : nullptr;
    return seg != nullptr && peer != rank_ && seg->departed.load(std::memory_order_acquire) != 0 &&
           seg->aborted.load(std::memory_order_acquire) == 0;
}

std::string ShmTransport::silent_peers(std::chrono::milliseconds quiet) const {
    const int64_t now = monotonic_ns();
    std::string silent;
    for (int peer = 0; peer < nranks_; ++peer) {
        const Segment *seg = segments_[static_cast<size_t>(peer)];
        if (seg == nullptr || peer == rank_) continue;
        const int64_t since = now - seg->alive_ns.load(std::memory_order_relaxed);
        if (seg->departed.load(std::memory_order_acquire) != 0 && seg->aborted.load(std::memory_order_acquire) == 0)
            silent += format("%srank %d (pid %d) has left: it destroyed its communicator", silent.empty() ? "" : ", ",
                             peer, pids_[static_cast<size_t>(peer)]);
        else if (since >= std::chrono::duration_cast<std::chrono::nanoseconds>(quiet).count())
            silent += format("%srank %d (pid %d) has given no sign of life for %.1f s", silent.empty() ? "" : ", ",
                             peer, pids_[static_cast<size_t>(peer)], static_cast<double>(since) * 1e-9);
    }
    return silent;
}

void ShmTransport::announce_abort(const Status &why) {
    Segment *mine = segments_[static_cast<size_t>(rank_)];
    if (mine->abort_claimed.exchange(1, std::memory_order_acq_rel) != 0) return; // announced already
    const std::string reason = why.message().empty() ? nnpccl_get_error_string(why.code()) : why.message();
    const size_t n = std::min(reason.size(), sizeof mine->abort_reason - 1);
    std::memcpy(mine->abort_reason, reason.data(), n);
    mine->abort_reason[n] = '\0';
    mine->aborted.store(why.code() == NNPCCL_SUCCESS ? NNPCCL_ERR_REMOTE : why.code(), std::memory_order_release);
    for (int peer = 0; peer < nranks_; ++peer)
        if (segments_[static_cast<size_t>(peer)] != nullptr && peer != rank_) ring(peer);
}

} // namespace nnpccl
