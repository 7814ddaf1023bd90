#include "actors/codec.hpp"

#include "tiers/entry_message.hpp"

namespace kvtier::actors {

void write_error(msg::Error::Builder out, const caf::error& err) {
  if (!err)
    return;
  if (err.category() != caf::atom("kvtier")) {
    out.setCode(static_cast<uint8_t>(ec::io_error));
    out.setContext(describe(err));
    return;
  }
  out.setCode(err.code());
  auto& ctx = err.context();
  if (ctx.size() == 1 && ctx.match_element<std::string>(0))
    out.setContext(ctx.get_as<std::string>(0));
}

caf::error read_error(msg::Error::Reader in) {
  if (in.getCode() == 0)
    return {};
  return make_error(static_cast<ec>(in.getCode()), in.getContext().cStr());
}

std::optional<std::string> session_of(msg::RequestIdentity::Reader r) {
  if (r.getSession().isId())
    return std::string{r.getSession().getId().cStr()};
  return std::nullopt;
}

tiers::admission_request admission_of(msg::RequestIdentity::Reader r) {
  return {r.getId(), r.getPrompt().size(), r.getMaxNewTokens()};
}

sealed_flush nothing_to_flush() {
  msg::draft<msg::FlushStateReply> d;
  d.root().initResult().setDurable(true);
  return std::move(d).seal();
}

sealed_flush flush_without_store(uint64_t held, std::string_view what) {
  if (held == 0)
    return nothing_to_flush();
  msg::draft<msg::FlushStateReply> d;
  auto out = d.root().initResult();
  out.setPending(held);
  write_errors(out,
               {make_error(ec::not_found, "no store: " + std::to_string(held)
                                            + " " + std::string{what}
                                            + " cannot be made durable")});
  return std::move(d).seal();
}

void write_errors(msg::DurabilityResult::Builder out,
                  const std::vector<caf::error>& errors) {
  if (errors.empty())
    return;
  auto list = out.initErrors(static_cast<unsigned>(errors.size()));
  for (unsigned i = 0; i < errors.size(); ++i)
    write_error(list[i], errors[i]);
}

void write_evidence(msg::DurabilityResult::Builder out,
                    const tiers::ssd::durability_evidence& ev) {
  out.setDurable(ev.durable);
  out.setPending(ev.pending);
  out.setDropped(ev.dropped);
  out.setFailed(ev.failed);
  out.setEntries(ev.entries);
  out.setLongestDurablePrefix(ev.longest_durable_prefix);
  out.setRemovalsPending(ev.removals_pending);
}

tiers::ram_key key_of(msg::EntryKey::Reader k) {
  return {false, k.getNs().cStr(), tiers::read_tokens(k.getTokens())};
}

} // namespace kvtier::actors
