#pragma once
/// \file
/// SHA-256 of a module's parameters and buffers (names, shapes, dtypes and bytes, in registration order),
/// so two runs can be compared exactly. Uses OpenSSL's libcrypto.
#include <cstdint>
#include <stdexcept>
#include <string>

#include <fmt/format.h>
#include <openssl/evp.h>
#include <torch/nn/module.h>
#include <torch/types.h>

#include <policytrain/detail/config.hpp>
#include <policytrain/detail/format.hpp>

namespace policytrain::io {

/// Hex SHA-256 over every named parameter and buffer of `m`.
POLICYTRAIN_DECL std::string params_sha256(const torch::nn::Module& m)
#if POLICYTRAIN_DEFINE
{
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  if (!ctx || EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) != 1) throw std::runtime_error("policytrain::io::params_sha256: OpenSSL SHA-256 unavailable");
  auto feed = [&](const std::string& name, const torch::Tensor& t) {
    auto c = t.detach().to(torch::kCPU).contiguous();
    const std::string head = name + "|" + c10::str(c.sizes()) + "|" + std::string(c.dtype().name()) + "|";
    EVP_DigestUpdate(ctx, head.data(), head.size());
    EVP_DigestUpdate(ctx, c.data_ptr(), c.numel() * c.element_size());
  };
  for (const auto& p : m.named_parameters(true)) feed(p.key(), p.value());
  for (const auto& b : m.named_buffers(true)) feed(b.key(), b.value());
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  EVP_DigestFinal_ex(ctx, md, &len);
  EVP_MD_CTX_free(ctx);
  std::string hex;
  for (unsigned i = 0; i < len; ++i) hex += policytrain::detail::format("{:02x}", md[i]);
  return hex;
}
#else
;
#endif

}  // namespace policytrain::io
