#include "core/digest.h"

#include <openssl/evp.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <memory>

namespace kernelgym {

std::string Sha256Hex(const std::vector<std::string>& parts) {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr);
  for (const std::string& part : parts) {
    const uint64_t size = part.size();
    EVP_DigestUpdate(ctx.get(), &size, sizeof(size));
    EVP_DigestUpdate(ctx.get(), part.data(), part.size());
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_DigestFinal_ex(ctx.get(), digest, &length);
  static const char* kHex = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) {
    hex += kHex[digest[i] >> 4];
    hex += kHex[digest[i] & 15];
  }
  return hex;
}

namespace {

bool LeftByTools(const std::filesystem::path& name) {
  const std::string text = name.string();
  return text == "__pycache__" || (!text.empty() && text[0] == '.');
}

}  // namespace

std::string TaskFolderDigest(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> files;
  std::error_code error;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, error);
       !error && it != std::filesystem::recursive_directory_iterator(); it.increment(error)) {
    if (LeftByTools(it->path().filename())) {
      if (it->is_directory()) it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file()) files.push_back(it->path().lexically_relative(dir));
  }
  std::sort(files.begin(), files.end());
  std::vector<std::string> parts;
  for (const auto& file : files) {
    parts.push_back(file.generic_string());
    std::ifstream in(dir / file, std::ios::binary);
    parts.push_back(in ? std::string(std::istreambuf_iterator<char>(in), {}) : std::string());
  }
  return Sha256Hex(parts);
}

}  // namespace kernelgym
