// The fault loop of issue #11, in the style of SQLite's and RocksDB's fault
// tests: a fixed workload (publish, eviction, pressure relief, boundary,
// idle demotion, flush, close) runs once without faults to count its
// storage operations (L), then once for every N in 1..L with the Nth
// storage operation failing (EIO) and once with it stalling (it blocks
// until the case ends; the storage deadline answers the calls waiting on
// it). After every step:
//   - every state served verifies byte for byte (the oracle);
//   - every published entry whose bytes are all still alive is servable:
//     RAM finds it (`peek_prefix_len`, which includes entries evicted or
//     superseded whose writes are pending or failed). (An extension whose
//     own buffer died shares its alive ones with an ancestor checked so.)
//   - the bytes the report says RAM holds equal the live buffer bytes
//     (`buffer::live_bytes()`; the test holds no state between steps),
//     beside the SSD tier's own buffers of the writes and reads it runs
//     (`ssd.io_buffer_bytes`: headers, read buffers); messages in flight
//     are let go first.
// After close: once the stalled operation runs on, no buffer is alive.
// Prints how many cases ran and how many faults fired.
#define BOOST_TEST_MODULE runtime_handoff_faults
#include <boost/test/unit_test.hpp>

#include "runtime/service.hpp"
#include "runtime/tools/oracle.hpp"
#include "tests/runtime/service_fixture.hpp"
#include "tests/tiers/check_helpers.hpp"
#include "tiers/ssd/faulty_file_system.hpp"
#include "tiers/ssd/memory_file_system.hpp"

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <numeric>
#include <thread>

using namespace kvtier;
using runtime::state_source;
using tiers::ssd::fault_kind;
using tiers::ssd::fs_op;

using testing::eventually;

namespace {

using clock_type = std::chrono::steady_clock;

/// The error of `r` rendered, or "" (Boost builds a check's message even
/// when the check passes).
template <class T>
std::string why(const caf::expected<T>& r) {
  return r ? std::string{} : describe(r.error());
}

tiers::token_seq seq(size_t n, tiers::token first) {
  tiers::token_seq t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

/// One published entry: its tokens and its buffers, watched weakly.
struct published {
  tiers::token_seq tokens;
  std::vector<std::weak_ptr<const buffer>> bufs;

  /// Every byte of it is still in memory (somewhere).
  bool alive() const {
    for (auto& b : bufs)
      if (b.expired())
        return false;
    return true;
  }
};

struct totals {
  uint64_t cases = 0, fired = 0, served = 0, checks = 0;
};

const char* const steps[] = {"publish",  "eviction", "relief", "boundary",
                             "demotion", "flush",    "close"};

/// One run of the workload; `nth` 0 runs it without a fault.
class run {
public:
  run(uint64_t nth, fault_kind kind, totals& t)
    : nth_(nth)
    , kind_(kind)
    , t_(t) {
    opts_.ram_cap_bytes = 1ull << 20; // 4096 tiny-dense tokens
    opts_.ssd_dir = "/ssd";
    opts_.ssd_cap_bytes = 64ull << 20;
    opts_.write_behind_cap_bytes = 16ull << 20;
    opts_.io_engine = "threads";
    opts_.model = "tiny-dense";
    opts_.model_scale = 1.0;
    opts_.write_behind = false;
    opts_.storage_deadline_ms = 200;
    opts_.retry_backoff_ms = 5;
    opts_.write_attempts = 2;
  }

  ~run() {
    faulty_.clear();
    svc_.reset();
  }

  /// Runs every step; returns the storage operations it made.
  uint64_t go() {
    svc_ = std::make_unique<runtime::service>(opts_,
                                              runtime::service_parts{&faulty_});
    BOOST_REQUIRE_MESSAGE(!svc_->start_error(), describe(svc_->start_error()));
    auto first = faulty_.total(); // the start's own operations not counted
    if (nth_ > 0)
      faulty_.inject_any(nth_, kind_);
    for (auto* s : steps) {
      BOOST_TEST_CONTEXT("fault " << to_string(kind_) << " at op " << nth_
                                  << ", step " << s) {
        step(s);
        check(std::string{s} == "close");
      }
    }
    auto ops = faulty_.total() - first;
    t_.fired += faulty_.fired();
    faulty_.release();
    // Closed: once what was stalled ran on, nothing holds a buffer.
    BOOST_CHECK_MESSAGE(eventually([] { return buffer::live_bytes() == 0; }),
                        "fault " << to_string(kind_) << " at op " << nth_
                                 << ": " << buffer::live_bytes()
                                 << " bytes alive after close");
    return ops;
  }

private:
  void step(const std::string& s) {
    if (s == "publish") {
      for (int c = 0; c < 4; ++c)
        turn(c, 600);
    } else if (s == "eviction") {
      for (int round = 0; round < 2; ++round)
        for (int c = 0; c < 4; ++c)
          turn(c, 300); // 4 x 1200 tokens: over the 4096-token cap
    } else if (s == "relief") {
      auto r = svc_->relieve_pressure([this] {
        auto rep = svc_->report();
        return !rep || rep->ram.bytes <= opts_.ram_cap_bytes / 2;
      });
      BOOST_CHECK(static_cast<bool>(r)); // an answer, maybe with an error
    } else if (s == "boundary") {
      BOOST_CHECK(static_cast<bool>(svc_->boundary(300 * 256)));
    } else if (s == "demotion") {
      BOOST_CHECK(static_cast<bool>(svc_->demote_idle(0)));
    } else if (s == "flush") {
      BOOST_CHECK(static_cast<bool>(svc_->flush()));
    } else if (s == "close") {
      BOOST_CHECK(static_cast<bool>(svc_->close()));
    }
  }

  /// One turn of conversation `c`: its prompt grows by `more` tokens; the
  /// served prefix is verified and extended, the result published.
  void turn(int c, size_t more) {
    auto& conv = convs_[c];
    auto next =
      seq(more, static_cast<tiers::token>(100000 * (c + 1) + conv.size() + 1));
    auto prompt = conv;
    prompt.insert(prompt.end(), next.begin(), next.end());
    runtime::state_request req{static_cast<uint64_t>(c + 1), prompt, 8, {}};
    auto acq = svc_->acquire(req, "ns");
    BOOST_REQUIRE_MESSAGE(acq, why(acq));
    tiers::entry state;
    if (acq->source != state_source::none && acq->usable_tokens > 0) {
      ++t_.served;
      auto err = oracle_.verify(acq->state);
      BOOST_REQUIRE_MESSAGE(!err, "a served state is wrong: " << describe(err));
      auto ext = oracle_.extend(acq->state, prompt);
      BOOST_REQUIRE(ext);
      state = std::move(*ext);
    } else {
      state = oracle_.prefill("ns", prompt);
    }
    acq->state = {}; // the lent views go: the published state holds them
    published p{prompt, {}};
    std::vector<buffer_ref> bufs;
    tiers::collect_buffers(state, bufs);
    p.bufs.assign(bufs.begin(), bufs.end());
    bufs.clear();
    auto r = svc_->publish(req, std::move(state));
    BOOST_REQUIRE_MESSAGE(r, why(r));
    entries_.push_back(std::move(p));
    conv = prompt;
  }

  void check(bool closed) {
    ++t_.checks;
    if (closed)
      return; // a closed service serves nothing; `go` checks it freed all
    // Every entry whose bytes live is servable from RAM.
    for (auto& e : entries_) {
      auto p = e.tokens;
      p.push_back(0); // no conversation continues with token 0
      bool ok = eventually([&] {
        if (!e.alive())
          return true;
        auto len = svc_->peek_prefix_len(p, "ns");
        return len && *len >= e.tokens.size();
      });
      BOOST_CHECK_MESSAGE(ok, "an entry of " << e.tokens.size()
                                             << " tokens is alive in memory "
                                                "but not servable");
    }
    // What RAM says it holds is what lives, beside the SSD tier's own
    // buffers of the writes and reads it runs (headers, read buffers).
    uint64_t ram = 0, io = 0;
    bool same = eventually([&] {
      auto rep = svc_->report();
      ram = rep ? rep->ram.bytes : 0;
      io = rep ? rep->ssd.io_buffer_bytes : 0;
      return rep && ram + io == buffer::live_bytes();
    });
    BOOST_CHECK_MESSAGE(same, "RAM reports " << ram << " bytes (SSD I/O " << io
                                             << "), " << buffer::live_bytes()
                                             << " are alive");
  }

  uint64_t nth_;
  fault_kind kind_;
  totals& t_;
  runtime::service_options opts_;
  tiers::ssd::memory_file_system memory_;
  tiers::ssd::faulty_file_system faulty_{memory_};
  runtime::oracle_engine oracle_{*tiers::model_geometry::preset("tiny-dense")};
  std::unique_ptr<runtime::service> svc_;
  tiers::token_seq convs_[4];
  std::vector<published> entries_;
};

} // namespace

BOOST_AUTO_TEST_CASE(every_failing_or_stalled_storage_op_keeps_ram_honest) {
  totals t;
  BOOST_REQUIRE_EQUAL(buffer::live_bytes(), 0u);
  uint64_t length = run{0, fault_kind::eio, t}.go();
  ++t.cases;
  BOOST_REQUIRE_GT(length, 20u);
  // KVTIER_FAULT_LOOP_LIMIT=K (a debugging aid) runs N = 1..K only.
  uint64_t limit = length;
  if (auto* l = std::getenv("KVTIER_FAULT_LOOP_LIMIT"))
    limit = std::min<uint64_t>(length, std::strtoull(l, nullptr, 10));
  for (auto kind : {fault_kind::eio, fault_kind::stall})
    for (uint64_t n = 1; n <= limit; ++n) {
      auto t0 = clock_type::now();
      run{n, kind, t}.go();
      ++t.cases;
      if (std::getenv("KVTIER_FAULT_LOOP_VERBOSE"))
        std::cerr << to_string(kind) << " at " << n << ": "
                  << std::chrono::duration_cast<std::chrono::milliseconds>(
                       clock_type::now() - t0)
                       .count()
                  << " ms\n";
    }
  BOOST_TEST_MESSAGE("fault loop: " << length << " storage operations, "
                                    << t.cases << " cases, " << t.fired
                                    << " faults fired, " << t.served
                                    << " states served and verified, "
                                    << t.checks << " invariant checks");
  std::cout << "fault loop: " << length << " storage operations, " << t.cases
            << " cases, " << t.fired << " faults fired, " << t.served
            << " states served and verified\n";
  BOOST_CHECK_GT(t.fired, length); // most cases reached their fault
}
