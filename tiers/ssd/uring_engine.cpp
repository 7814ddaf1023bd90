#include "tiers/ssd/uring_engine.hpp"

#include "tiers/ssd/kill_points.hpp"

#ifdef KVTIER_HAVE_URING

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>

#include <liburing.h>

#include <climits>
#include <cstring>
#include <deque>
#include <thread>
#include <unordered_map>

#include <sys/eventfd.h>
#include <sys/uio.h>
#include <unistd.h>

namespace kvtier::tiers::ssd {

namespace {

constexpr unsigned ring_depth = 256;
constexpr uint64_t wake_key = 0;

class uring_engine final : public io_engine {
public:
  explicit uring_engine(completion_sink sink)
    : sink_(std::move(sink))
    , helper_(2) {}

  /// Sets up the ring and the engine thread; false with `why` if it can't.
  caf::error start() {
    if (int rc = io_uring_queue_init(ring_depth, &ring_, 0); rc < 0)
      return make_error(ec::invalid_config,
                        std::string{"io_uring "}
                          + "unavailable: " + std::strerror(-rc));
    wake_fd_ = ::eventfd(0, EFD_CLOEXEC);
    if (wake_fd_ < 0) {
      io_uring_queue_exit(&ring_);
      return errno_error(errno, "eventfd for io_uring");
    }
    thread_ = std::thread{[this] { loop(); }};
    return {};
  }

  ~uring_engine() override {
    helper_.join();
    if (!thread_.joinable())
      return;
    {
      std::lock_guard guard{mtx_};
      stopping_ = true;
    }
    wake();
    thread_.join();
    io_uring_queue_exit(&ring_);
    ::close(wake_fd_);
  }

  void submit(io_op op) override {
    bool native =
      op.kind != io_kind::call && op.target && op.target->native_handle() >= 0;
    if (!native) {
      boost::asio::post(helper_, [this, op = std::move(op)]() mutable {
        auto c = run_now(op);
        op = io_op{}; // what it held goes before the owner hears of it
        sink_(std::move(c));
      });
      return;
    }
    if (op.kind == io_kind::write) {
      using piece = std::span<const std::byte>;
      const piece one[] = {{op.data, op.length}};
      std::span<const piece> src = one;
      if (!op.pieces.empty())
        src = op.pieces;
      kill_point_write(op.target->native_handle(), op.offset, src,
                       "a file (io_uring)");
    } else if (op.kind == io_kind::sync) {
      kill_point(kill_step::sync, "a file (io_uring)");
    }
    {
      std::lock_guard guard{mtx_};
      incoming_.push_back(std::move(op));
    }
    wake();
  }

  const char* name() const noexcept override {
    return "io_uring";
  }

private:
  struct pending {
    io_op op;
    size_t done = 0;
    /// A gathered write's iovecs for its part in the ring (they must
    /// stay valid until that part completes).
    std::vector<iovec> iov;
  };

  /// `p`'s gathered pieces past its first `p.done` bytes, as iovecs (at
  /// most IOV_MAX: a partial completion submits the rest).
  static void gather(pending& p) {
    p.iov.clear();
    size_t skip = p.done;
    for (auto piece : p.op.pieces) {
      if (skip >= piece.size()) {
        skip -= piece.size();
        continue;
      }
      if (p.iov.size() == IOV_MAX)
        break;
      p.iov.push_back(
        {const_cast<std::byte*>(piece.data()) + skip, piece.size() - skip});
      skip = 0;
    }
  }

  void wake() {
    uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(wake_fd_, &one, sizeof one);
  }

  void arm_wake() {
    auto* sqe = io_uring_get_sqe(&ring_);
    io_uring_prep_read(sqe, wake_fd_, &wake_buf_, sizeof wake_buf_, 0);
    io_uring_sqe_set_data64(sqe, wake_key);
  }

  /// Puts the next part of `p` into the ring; false when the ring is full.
  bool prep(uint64_t key, pending& p) {
    if (in_ring_ + 1 >= ring_depth)
      return false;
    auto* sqe = io_uring_get_sqe(&ring_);
    if (sqe == nullptr)
      return false;
    ++in_ring_;
    auto& op = p.op;
    int fd = op.target->native_handle();
    auto left =
      static_cast<unsigned>(std::min<size_t>(op.length - p.done, 1u << 30));
    if (op.kind == io_kind::read)
      io_uring_prep_read(sqe, fd, op.data + p.done, left, op.offset + p.done);
    else if (op.kind == io_kind::write && !op.pieces.empty()) {
      gather(p);
      io_uring_prep_writev(sqe, fd, p.iov.data(),
                           static_cast<unsigned>(p.iov.size()),
                           op.offset + p.done);
    } else if (op.kind == io_kind::write)
      io_uring_prep_write(sqe, fd, op.data + p.done, left, op.offset + p.done);
    else
      io_uring_prep_fsync(sqe, fd, 0);
    io_uring_sqe_set_data64(sqe, key);
    return true;
  }

  /// Moves owner submissions into the ring as far as it has room.
  void take_incoming() {
    {
      std::lock_guard guard{mtx_};
      for (auto& op : incoming_) {
        auto key = next_key_++;
        live_.emplace(key, pending{std::move(op), 0, {}});
        waiting_.push_back(key);
      }
      incoming_.clear();
    }
    while (!waiting_.empty() && prep(waiting_.front(), live_[waiting_.front()]))
      waiting_.pop_front();
  }

  void finish(uint64_t key, caf::error err) {
    auto node = live_.extract(key);
    auto& p = node.mapped();
    io_completion c{p.op.tag, std::move(err), p.done};
    p.op = io_op{}; // what it held goes before the owner hears of it
    sink_(std::move(c));
  }

  void on_cqe(uint64_t key, int res) {
    --in_ring_;
    auto& p = live_[key];
    if (res < 0) {
      finish(key, errno_error(-res, "io_uring op"));
      return;
    }
    p.done += static_cast<size_t>(res);
    if (p.op.kind == io_kind::sync || res == 0 || p.done >= p.op.length) {
      finish(key, {});
      return;
    }
    waiting_.push_back(key); // partial: submit the rest
  }

  bool stop_now() {
    std::lock_guard guard{mtx_};
    return stopping_ && incoming_.empty() && live_.empty();
  }

  void loop() {
    arm_wake();
    for (;;) {
      io_uring_submit(&ring_);
      io_uring_cqe* cqe = nullptr;
      if (io_uring_wait_cqe(&ring_, &cqe) < 0)
        continue;
      unsigned head;
      unsigned seen = 0;
      bool woke = false;
      io_uring_for_each_cqe(&ring_, head, cqe) {
        ++seen;
        auto key = io_uring_cqe_get_data64(cqe);
        if (key == wake_key)
          woke = true;
        else
          on_cqe(key, cqe->res);
      }
      io_uring_cq_advance(&ring_, seen);
      if (woke) {
        if (stop_now())
          return;
        arm_wake();
      }
      take_incoming();
      if (stop_now()) {
        wake(); // the armed read completes, then the loop exits above
      }
    }
  }

  completion_sink sink_;
  io_uring ring_;
  int wake_fd_ = -1;
  uint64_t wake_buf_ = 0;
  boost::asio::thread_pool helper_;
  std::thread thread_;
  std::mutex mtx_;
  std::vector<io_op> incoming_;
  bool stopping_ = false;
  // Engine thread only:
  std::unordered_map<uint64_t, pending> live_;
  std::deque<uint64_t> waiting_;
  uint64_t next_key_ = 1;
  unsigned in_ring_ = 0;
};

} // namespace

caf::expected<std::unique_ptr<io_engine>>
make_uring_engine(completion_sink sink) {
  auto engine = std::make_unique<uring_engine>(std::move(sink));
  if (auto err = engine->start())
    return err;
  return std::unique_ptr<io_engine>{std::move(engine)};
}

} // namespace kvtier::tiers::ssd

#else

namespace kvtier::tiers::ssd {

caf::expected<std::unique_ptr<io_engine>> make_uring_engine(completion_sink) {
  return make_error(ec::invalid_config,
                    "io_uring unavailable: built without liburing");
}

} // namespace kvtier::tiers::ssd

#endif
