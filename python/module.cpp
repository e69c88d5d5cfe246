// The nnpccl_torch Python module: importing it registers the "nnpccl"
// backend with torch.distributed.
#include "process_group_nnpccl.hpp"

#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>

namespace py = pybind11;

namespace {

// Holds the process group for Python. Its destructor may join the
// completion thread, whose future callbacks can need the GIL (Python comm
// hooks), so the GIL is released while it runs: torch's own process groups
// are held the same way (IntrusivePtrNoGilDestructor, private to torch).
template <typename T> class NoGilDestructorPtr {
  public:
    NoGilDestructorPtr() = default;
    NoGilDestructorPtr(const NoGilDestructorPtr &) = default;
    NoGilDestructorPtr(NoGilDestructorPtr &&) noexcept = default;
    NoGilDestructorPtr &operator=(const NoGilDestructorPtr &) = default;
    NoGilDestructorPtr &operator=(NoGilDestructorPtr &&) noexcept = default;
    NoGilDestructorPtr(c10::intrusive_ptr<T> impl) : impl_(std::move(impl)) {}
    // pybind11 builds holders from raw pointers it got from new.
    explicit NoGilDestructorPtr(T *impl) : impl_(c10::intrusive_ptr<T>::unsafe_steal_from_new(impl)) {}
    ~NoGilDestructorPtr() {
        if (impl_ && PyGILState_Check()) {
            py::gil_scoped_release release;
            impl_.reset();
        }
    }
    T &operator*() const noexcept { return *impl_; }
    T *operator->() const noexcept { return impl_.get(); }
    T *get() const noexcept { return impl_.get(); }

  private:
    c10::intrusive_ptr<T> impl_;
};

} // namespace

PYBIND11_DECLARE_HOLDER_TYPE(T, NoGilDestructorPtr<T>, true);

PYBIND11_MODULE(nnpccl_torch, m) {
    m.doc() = "torch.distributed backend over nnpccl. Importing this module registers the backend "
              "\"nnpccl\": dist.init_process_group(\"nnpccl\", ...).";
    // Registers c10d's Store and ProcessGroup with pybind11, which the class
    // below derives from and takes.
    py::module_ dist = py::module_::import("torch.distributed");

    using nnpccl_torch::ProcessGroupNnpccl;
    py::class_<ProcessGroupNnpccl, NoGilDestructorPtr<ProcessGroupNnpccl>, NNPCCL_TORCH_BASE>(
        m, "ProcessGroupNnpccl",
        "A c10d process group over an nnpccl communicator of its own. torch.distributed creates it "
        "for backend \"nnpccl\" with the group's store, rank, size and timeout.")
        .def(py::init([](const c10::intrusive_ptr<::c10d::Store> &store, int rank, int size,
                         std::chrono::milliseconds timeout) {
                 // Init waits for every rank of the group; the others may need
                 // the GIL meanwhile (threads of this process, a Python store).
                 py::gil_scoped_release release;
                 return NoGilDestructorPtr<ProcessGroupNnpccl>(
                     c10::make_intrusive<ProcessGroupNnpccl>(store, rank, size, timeout));
             }),
             py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"));

    m.attr("BACKEND_NAME") = "nnpccl";
    py::object backend = dist.attr("Backend");
    // A second module object (importlib.reload) must not register twice.
    if (!py::hasattr(backend, "NNPCCL"))
        backend.attr("register_backend")("nnpccl", m.attr("ProcessGroupNnpccl"));
}
