#include "links.hpp"

#include <utility>

namespace nnpccl {

Transport *Links::add(std::unique_ptr<Transport> transport) {
    transports_.push_back(std::move(transport));
    return transports_.back().get();
}

void Links::decorate(const std::function<std::unique_ptr<Transport>(Transport *)> &decorate) {
    for (auto &inner : transports_) {
        decorators_.push_back(decorate(inner.get()));
        for (Transport *&hop : routes_)
            if (hop == inner.get()) hop = decorators_.back().get();
    }
}

std::vector<Transport *> Links::active() const {
    std::vector<Transport *> out;
    for (const auto &t : decorators_.empty() ? transports_ : decorators_) out.push_back(t.get());
    return out;
}

void Links::clear() {
    routes_.clear();
    decorators_.clear();
    link_table_ = SharedRegion();
    transports_.clear();
}

} // namespace nnpccl
