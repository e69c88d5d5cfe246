#include "fabric_library.hpp"

#include <dlfcn.h>

namespace nnpccl {

namespace {

constexpr const char *kLibraryName = "libfabric.so.1";

struct Opened {
    FabricLibrary functions;
    Status status;
};

// dlsym gives each function's default version, the one a link against
// libfabric would have bound.
template <typename Function> bool resolve(void *handle, const char *name, Function *out, std::string *error) {
    dlerror();
    *out = reinterpret_cast<Function>(dlsym(handle, name));
    if (*out != nullptr) return true;
    const char *why = dlerror();
    *error = why != nullptr ? why : format("%s has no %s", kLibraryName, name);
    return false;
}

Opened open_once() {
    Opened opened;
    auto failed = [](const std::string &why) {
        return system_error("ofi: cannot load %s (%s); the ofi transport needs libfabric: install libfabric1",
                            kLibraryName, why.c_str());
    };
    void *handle = dlopen(kLibraryName, RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
        const char *why = dlerror();
        opened.status = failed(why != nullptr ? why : "dlopen failed");
        return opened;
    }
    FabricLibrary &f = opened.functions;
    std::string why;
    if (!resolve(handle, "fi_getinfo", &f.getinfo, &why) || !resolve(handle, "fi_freeinfo", &f.freeinfo, &why) ||
        !resolve(handle, "fi_dupinfo", &f.dupinfo, &why) || !resolve(handle, "fi_fabric", &f.fabric, &why) ||
        !resolve(handle, "fi_strerror", &f.strerror, &why)) {
        dlclose(handle);
        opened.status = failed(why);
    }
    return opened;
}

} // namespace

Status open_fabric_library(const FabricLibrary **out) {
    static const Opened *opened = new Opened(open_once()); // never destroyed: communicators may close at exit
    if (!opened->status) return opened->status;
    *out = &opened->functions;
    return Status::ok();
}

} // namespace nnpccl
