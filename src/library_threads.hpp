// The threads the library starts (the progress thread, a nonblocking
// init's thread, the rendezvous root's) take no asynchronous signals. A
// process-directed signal (SIGALRM, SIGINT, SIGTERM) then goes to one of
// the application's threads, whose handler may call nnpccl_comm_abort,
// rather than to a library thread interrupted while it holds the locks
// that abort needs.
#pragma once

#include <pthread.h>
#include <signal.h>

namespace nnpccl {

// Blocks asynchronous signals in the creating thread while it starts one
// of the library's threads (which inherits the mask), then restores them.
// Signals that arrive meanwhile stay pending and are delivered as usual.
class LibraryThreadSignals {
public:
    LibraryThreadSignals() {
        sigset_t blocked;
        sigfillset(&blocked);
        // Faults are the thread's own and cannot wait.
        for (int fault : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS}) sigdelset(&blocked, fault);
        pthread_sigmask(SIG_BLOCK, &blocked, &saved_);
    }
    ~LibraryThreadSignals() { pthread_sigmask(SIG_SETMASK, &saved_, nullptr); }
    LibraryThreadSignals(const LibraryThreadSignals &) = delete;
    LibraryThreadSignals &operator=(const LibraryThreadSignals &) = delete;

private:
    sigset_t saved_;
};

} // namespace nnpccl
