#include "tiers/ssd/io_engine.hpp"

#include "tiers/ssd/uring_engine.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>

namespace kvtier::tiers::ssd {

io_engine::~io_engine() = default;

io_completion run_now(const io_op& op) {
  io_completion c{op.tag, {}, 0};
  switch (op.kind) {
    case io_kind::read: {
      auto n = op.target->read_at(op.offset, {op.data, op.length});
      if (n)
        c.bytes = *n;
      else
        c.err = n.error();
      break;
    }
    case io_kind::write: {
      auto n = op.pieces.empty()
                 ? op.target->write_at(op.offset, {op.data, op.length})
                 : op.target->write_gathered_at(op.offset, op.pieces);
      if (n)
        c.bytes = *n;
      else
        c.err = n.error();
      break;
    }
    case io_kind::sync: c.err = op.target->sync(); break;
    case io_kind::call: c.err = op.call(); break;
  }
  return c;
}

namespace {

class threads_engine final : public io_engine {
public:
  threads_engine(completion_sink sink, unsigned threads)
    : sink_(std::move(sink))
    , pool_(threads) {}

  ~threads_engine() override {
    pool_.join();
  }

  void submit(io_op op) override {
    boost::asio::post(pool_, [this, op = std::move(op)]() mutable {
      auto c = run_now(op);
      op = io_op{}; // what it held goes before the owner hears of it
      sink_(std::move(c));
    });
  }

  const char* name() const noexcept override {
    return "threads";
  }

private:
  completion_sink sink_;
  boost::asio::thread_pool pool_;
};

} // namespace

caf::expected<engine_choice> parse_engine_choice(std::string_view text) {
  if (text == "auto")
    return engine_choice::automatic;
  if (text == "uring")
    return engine_choice::uring;
  if (text == "threads")
    return engine_choice::threads;
  return make_error(ec::invalid_config,
                    "io engine '" + std::string{text}
                      + "': expected auto, uring or threads");
}

caf::expected<std::unique_ptr<io_engine>>
make_io_engine(engine_choice choice, completion_sink sink, unsigned threads) {
  if (choice != engine_choice::threads) {
    auto uring = make_uring_engine(sink);
    if (uring || choice == engine_choice::uring)
      return uring;
  }
  return std::unique_ptr<io_engine>{
    std::make_unique<threads_engine>(std::move(sink), threads ? threads : 1)};
}

completion_sink completion_queue::sink() {
  return [this](io_completion c) { push(std::move(c)); };
}

void completion_queue::push(io_completion c) {
  {
    std::lock_guard guard{mtx_};
    items_.push_back(std::move(c));
  }
  cv_.notify_one();
}

std::vector<io_completion>
completion_queue::wait(std::chrono::milliseconds timeout) {
  std::unique_lock guard{mtx_};
  cv_.wait_for(guard, timeout, [this] { return !items_.empty(); });
  return std::exchange(items_, {});
}

} // namespace kvtier::tiers::ssd
