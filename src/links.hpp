// What a communicator sends through (docs/design.md, "Init", steps 6 and
// 7): the transports it opened, kept apart from the route to each peer
// over one of them, and with link emulation a pacing decorator over each
// transport and the host's shared table of simulated links. Init fills
// it (transport_choice.cpp opens and routes, init.cpp decorates); the
// engine drives active(), the executor sends through routes().
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "shared_memory.hpp"
#include "transport.hpp"

namespace nnpccl {

class Links {
public:
    Links() = default;
    Links(const Links &) = delete;
    Links &operator=(const Links &) = delete;
    ~Links() { clear(); }

    // Keeps a transport opened for this communicator; returns it, for routes.
    Transport *add(std::unique_ptr<Transport> transport);
    // By peer: the transport each goes over (null for this rank and any
    // peer no transport reaches).
    void set_routes(std::vector<Transport *> routes) { routes_ = std::move(routes); }
    // Wraps every transport in what `decorate` makes of it, and sends each
    // route through its transport's decorator.
    void decorate(const std::function<std::unique_ptr<Transport>(Transport *)> &decorate);
    // The emulation's table of busy intervals, shared by the host's ranks;
    // the decorators point into it.
    SharedRegion &link_table() { return link_table_; }

    const std::vector<Transport *> &routes() const { return routes_; }
    // What the engine drives: the decorators where there are any.
    std::vector<Transport *> active() const;
    // Releases everything, what depends on something before it: the
    // routes, the decorators, their table, the transports.
    void clear();

private:
    std::vector<std::unique_ptr<Transport>> transports_;
    SharedRegion link_table_;
    std::vector<std::unique_ptr<Transport>> decorators_;
    std::vector<Transport *> routes_;
};

} // namespace nnpccl
