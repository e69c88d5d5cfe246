#include "operation_descriptor.hpp"

#include <iterator>

#include "collective.hpp"
#include "dtype.hpp"
#include "status.hpp"

namespace nnpccl {

std::string describe(const OperationDescriptor &d) {
    const bool known = d.collective < std::size(kAllCollectives);
    const auto coll = static_cast<Collective>(d.collective);
    const char *name = known ? collective_name(coll) : "an unknown collective";
    std::string text = format("%s #%llu (count %llu", name, static_cast<unsigned long long>(d.sequence),
                              static_cast<unsigned long long>(d.count));
    if (valid_datatype(d.datatype)) text += std::string(", ") + datatype_name(static_cast<nnpccl_datatype_t>(d.datatype));
    if (valid_redop(d.op)) text += std::string(", ") + redop_name(static_cast<nnpccl_redop_t>(d.op));
    if (d.root >= 0 && known && coll == Collective::Send) text += format(", to rank %d", d.root);
    else if (d.root >= 0 && known && coll == Collective::Recv) text += format(", from rank %d", d.root);
    else if (d.root >= 0) text += format(", root %d", d.root);
    return text + ")";
}

} // namespace nnpccl
