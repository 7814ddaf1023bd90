#include "runtime/net/tls.hpp"

#include "messages/error.hpp"

#include <caf/openssl/manager.hpp>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <cstring>
#include <fstream>
#include <memory>

namespace kvtier::net {

namespace {

std::string ssl_errors() {
  std::string out;
  while (auto e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty())
      out += "; ";
    out += buf;
  }
  return out.empty() ? "no detail" : out;
}

caf::error bad_file(const char* key, const std::string& path,
                    const std::string& why) {
  ERR_clear_error();
  return make_error(ec::invalid_config,
                    std::string{key} + " = \"" + path + "\": " + why);
}

int passphrase_cb(char* buf, int size, int, void* user) {
  auto* p = static_cast<const std::string*>(user);
  if (size <= 0)
    return 0;
  auto n = std::min<size_t>(p->size(), static_cast<size_t>(size) - 1);
  std::memcpy(buf, p->data(), n);
  buf[n] = '\0';
  return static_cast<int>(n);
}

} // namespace

void configure_tls(caf::actor_system_config& cfg, const tls_files& f) {
  cfg.openssl_certificate = f.certificate;
  cfg.openssl_key = f.key;
  cfg.openssl_cafile = f.ca;
  cfg.openssl_passphrase = f.passphrase;
  cfg.openssl_capath.clear();
  cfg.load<caf::openssl::manager>();
}

bool tls_configured(const caf::actor_system_config& cfg, const tls_files& f) {
  return cfg.openssl_certificate == f.certificate && cfg.openssl_key == f.key
         && cfg.openssl_cafile == f.ca && cfg.openssl_passphrase == f.passphrase
         && cfg.openssl_capath.empty();
}

caf::error check_tls_files(const tls_files& f) {
  for (auto [key, path] : {std::pair{"cluster.tls-certificate", &f.certificate},
                           std::pair{"cluster.tls-key", &f.key},
                           std::pair{"cluster.tls-ca", &f.ca}}) {
    if (path->empty())
      return make_error(ec::invalid_config,
                        std::string{key} + " is not set (cluster.tls = true)");
    if (!std::ifstream{*path})
      return bad_file(key, *path,
                      std::string{"cannot be read ("} + std::strerror(errno)
                        + ")");
  }
  ERR_clear_error();
  std::unique_ptr<SSL_CTX, void (*)(SSL_CTX*)> ctx{SSL_CTX_new(TLS_method()),
                                                   SSL_CTX_free};
  if (!ctx)
    return make_error(ec::io_error,
                      "cannot create an OpenSSL context: " + ssl_errors());
  if (SSL_CTX_use_certificate_chain_file(ctx.get(), f.certificate.c_str()) != 1)
    return bad_file("cluster.tls-certificate", f.certificate,
                    "not a PEM certificate chain (" + ssl_errors() + ")");
  std::string pass = f.passphrase;
  SSL_CTX_set_default_passwd_cb(ctx.get(), passphrase_cb);
  SSL_CTX_set_default_passwd_cb_userdata(ctx.get(), &pass);
  if (SSL_CTX_use_PrivateKey_file(ctx.get(), f.key.c_str(), SSL_FILETYPE_PEM)
      != 1)
    return bad_file("cluster.tls-key", f.key,
                    "is no PEM private key, does not match "
                    "cluster.tls-certificate, or cluster.tls-passphrase does "
                    "not open it ("
                      + ssl_errors() + ")");
  if (SSL_CTX_check_private_key(ctx.get()) != 1)
    return bad_file("cluster.tls-key", f.key,
                    "does not match cluster.tls-certificate \"" + f.certificate
                      + "\" (" + ssl_errors() + ")");
  if (SSL_CTX_load_verify_locations(ctx.get(), f.ca.c_str(), nullptr) != 1)
    return bad_file("cluster.tls-ca", f.ca,
                    "not a PEM CA certificate (" + ssl_errors() + ")");
  return {};
}

} // namespace kvtier::net
