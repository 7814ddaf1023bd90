// The io_uring engine (see io_engine.hpp for the contract). Internal to
// tiers/ssd: build it through `make_io_engine`.
//
// One engine thread owns the ring: it drains the submission list the owner
// fills (woken through an eventfd read kept armed in the ring), submits,
// reaps completions, resubmits the rest of partial reads and writes, and
// calls the sink. Ops on files without a native descriptor and `call` ops
// run on a two-thread helper pool (a checksum pass over a large entry must
// not hold up another entry's open or rename). Without liburing
// (KVTIER_HAVE_URING unset) the factory reports `ec::invalid_config`.
#pragma once

#include "tiers/ssd/io_engine.hpp"

namespace kvtier::tiers::ssd {

/// An io_uring engine, or why io_uring cannot start here.
caf::expected<std::unique_ptr<io_engine>>
make_uring_engine(completion_sink sink);

} // namespace kvtier::tiers::ssd
