// `model_geometry::parse_layers` and `layers_text`: an engine's own layer
// description as text (tiers/geometry.hpp has the grammar), and back.
#include "tiers/geometry.hpp"

#include <cctype>
#include <limits>

namespace kvtier::tiers {

namespace {

/// A recursive-descent reader over one description. Errors name the
/// 1-based character position and what was expected there.
class layers_parser {
public:
  explicit layers_parser(std::string_view text)
    : text_(text) {}

  caf::expected<std::vector<layer_spec>> all() {
    std::vector<layer_spec> out;
    if (auto err = list(out, 0))
      return err;
    skip_space();
    if (pos_ != text_.size())
      return fail("',' or the end of the description");
    return out;
  }

private:
  static constexpr int max_depth = 8;

  caf::error list(std::vector<layer_spec>& out, int depth) {
    do {
      if (auto err = group(out, depth))
        return err;
    } while (eat(','));
    return {};
  }

  caf::error group(std::vector<layer_spec>& out, int depth) {
    skip_space();
    uint64_t count = 1;
    if (pos_ < text_.size() && std::isdigit(uchar(text_[pos_]))) {
      auto n = number("a repeat count");
      if (!n)
        return n.error();
      if (!eat('*'))
        return fail("'*' after the repeat count " + std::to_string(*n));
      count = *n;
    }
    std::vector<layer_spec> items;
    skip_space();
    if (eat('(')) {
      if (depth + 1 >= max_depth)
        return fail("at most " + std::to_string(max_depth)
                    + " levels of parentheses");
      if (auto err = list(items, depth + 1))
        return err;
      if (!eat(')'))
        return fail("')' or ','");
    } else {
      auto s = spec();
      if (!s)
        return s.error();
      items.push_back(*s);
    }
    if (count * items.size() > model_geometry::max_layers - out.size())
      return fail("at most " + std::to_string(model_geometry::max_layers)
                  + " layers in all");
    for (uint64_t i = 0; i < count; ++i)
      out.insert(out.end(), items.begin(), items.end());
    return {};
  }

  caf::expected<layer_spec> spec() {
    skip_space();
    auto start = pos_;
    while (pos_ < text_.size() && std::isalpha(uchar(text_[pos_])))
      ++pos_;
    auto kind = text_.substr(start, pos_ - start);
    layer_spec l;
    if (kind == "kv" || kind == "ring") {
      l.kind = kind == "kv" ? layer_kind::kv : layer_kind::ring;
      if (!eat(':'))
        return fail("':' and the bytes per token after '" + std::string{kind}
                    + "'");
      auto bpt = number("the bytes per token", uint32_max);
      if (!bpt)
        return bpt.error();
      l.bytes_per_token = static_cast<uint32_t>(*bpt);
      if (l.kind == layer_kind::ring) {
        if (!eat(':'))
          return fail("':' and the window in tokens after ring:"
                      + std::to_string(*bpt));
        auto w = number("the window in tokens", uint32_max);
        if (!w)
          return w.error();
        l.window = static_cast<uint32_t>(*w);
      }
      return l;
    }
    if (kind == "recurrent" || kind == "object") {
      l.kind = kind == "recurrent" ? layer_kind::recurrent : layer_kind::object;
      if (!eat(':'))
        return fail("':' and the state bytes after '" + std::string{kind}
                    + "'");
      auto bytes = number("the state bytes");
      if (!bytes)
        return bytes.error();
      l.state_bytes = *bytes;
      return l;
    }
    pos_ = start;
    return fail("a layer kind (kv, ring, recurrent, object) or '('");
  }

  /// A positive decimal no larger than `max`.
  caf::expected<uint64_t> number(const std::string& what,
                                 uint64_t max = uint64_t{1} << 40) {
    skip_space();
    auto start = pos_;
    uint64_t v = 0;
    while (pos_ < text_.size() && std::isdigit(uchar(text_[pos_]))) {
      v = v * 10 + static_cast<uint64_t>(text_[pos_] - '0');
      ++pos_;
      if (v > max) {
        pos_ = start;
        return fail(what + " (a number from 1 to " + std::to_string(max) + ")");
      }
    }
    if (pos_ == start || v == 0) {
      pos_ = start;
      return fail(what + " (a positive number)");
    }
    return v;
  }

  bool eat(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  void skip_space() {
    while (pos_ < text_.size() && std::isspace(uchar(text_[pos_])))
      ++pos_;
  }

  caf::error fail(const std::string& expected) const {
    std::string found = pos_ < text_.size()
                          ? "'" + std::string{text_.substr(pos_, 12)} + "'"
                          : "the end";
    return make_error(ec::invalid_config,
                      "at character " + std::to_string(pos_ + 1) + " of \""
                        + std::string{text_} + "\": expected " + expected
                        + ", found " + found);
  }

  static unsigned char uchar(char c) {
    return static_cast<unsigned char>(c);
  }

  static constexpr uint64_t uint32_max = std::numeric_limits<uint32_t>::max();

  std::string_view text_;
  size_t pos_ = 0;
};

std::string spec_text(const layer_spec& l) {
  switch (l.kind) {
    case layer_kind::kv: return "kv:" + std::to_string(l.bytes_per_token);
    case layer_kind::ring:
      return "ring:" + std::to_string(l.bytes_per_token) + ":"
             + std::to_string(l.window);
    case layer_kind::recurrent:
      return "recurrent:" + std::to_string(l.state_bytes);
    case layer_kind::object: return "object:" + std::to_string(l.state_bytes);
  }
  return "?";
}

/// Runs of equal layers as `n*spec`, joined by commas.
std::string runs_text(const layer_spec* l, size_t n) {
  std::string out;
  for (size_t i = 0; i < n;) {
    size_t j = i + 1;
    while (j < n && l[j] == l[i])
      ++j;
    out += (out.empty() ? "" : ",")
           + (j - i > 1 ? std::to_string(j - i) + "*" : std::string{})
           + spec_text(l[i]);
    i = j;
  }
  return out;
}

} // namespace

caf::expected<model_geometry>
model_geometry::parse_layers(std::string_view text) {
  auto layers = layers_parser{text}.all();
  if (!layers)
    return layers.error();
  return model_geometry{"custom", std::move(*layers)};
}

std::string model_geometry::layers_text() const {
  auto n = layers.size();
  bool uniform = true;
  for (size_t i = 1; i < n && uniform; ++i)
    uniform = layers[i] == layers[0];
  if (uniform)
    return runs_text(layers.data(), n);
  // The shortest period of two or more layers that repeats to the end.
  for (size_t p = 2; p <= n / 2; ++p) {
    if (n % p != 0)
      continue;
    bool repeats = true;
    for (size_t i = p; i < n && repeats; ++i)
      repeats = layers[i] == layers[i % p];
    if (repeats)
      return std::to_string(n / p) + "*(" + runs_text(layers.data(), p) + ")";
  }
  return runs_text(layers.data(), n);
}

} // namespace kvtier::tiers
