// TLS between nodes (`cluster.tls`, docs/cluster.md "Security"): CAF's
// OpenSSL module (caf::openssl::manager) carries the middleman's BASP over
// TLS. CAF 0.17.6 turns on peer verification as soon as any `openssl.*`
// key is set: every connection, in both directions, asks
// SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT against the CA file,
// so a peer without a certificate signed by `cluster.tls-ca` (another
// CA's, a self-signed one, none, or plaintext) fails the handshake before
// one byte of BASP is read. Host names are not checked: the CA is the
// cluster's own, so holding one of its certificates is what a member is.
//
// CAF loads the files anew for every connection and throws from its
// multiplexer thread when they do not load, so `check_tls_files` loads them
// once at start (certificate chain, key with its passphrase, key matching
// the certificate, the CA) and refuses to start with an error naming the
// file instead.
//
// Plain functions; any thread.
#pragma once

#include <caf/actor_system_config.hpp>
#include <caf/error.hpp>

#include <string>

namespace kvtier::net {

/// The TLS settings of a node or a client (`cluster.tls-*`).
struct tls_files {
  std::string certificate;
  std::string key;
  std::string ca;
  std::string passphrase;
};

/// Loads CAF's OpenSSL module into `cfg` and sets its `openssl.*` fields to
/// `f` (before the actor system starts; needs the middleman loaded too).
void configure_tls(caf::actor_system_config& cfg, const tls_files& f);

/// Whether `cfg` carries exactly `f` in its `openssl.*` fields.
bool tls_configured(const caf::actor_system_config& cfg, const tls_files& f);

/// Loads the certificate chain, the key (with the passphrase), checks that
/// they match, and loads the CA: `ec::invalid_config` naming the option and
/// the file that is missing, unreadable or not what it should be.
caf::error check_tls_files(const tls_files& f);

} // namespace kvtier::net
