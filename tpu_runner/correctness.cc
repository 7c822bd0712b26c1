#include "tpu_runner/correctness.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace kernelgym {
namespace {

template <typename T>
T Load(std::span<const std::byte> buffer, int64_t i) {
  T value;
  std::memcpy(&value, buffer.data() + i * sizeof(T), sizeof(T));
  return value;
}

template <typename T>
void CompareTyped(const TensorSpec& spec, std::span<const std::byte> expected, std::span<const std::byte> actual,
                  OutputCheck& check) {
  const double atol = spec.tolerance.atol, rtol = spec.tolerance.rtol;
  for (int64_t i = 0; i < check.elements; ++i) {
    const double e = static_cast<double>(Load<T>(expected, i));
    const double a = static_cast<double>(Load<T>(actual, i));
    bool ok;
    double abs_err = 0, rel_err = 0;
    if constexpr (std::is_floating_point_v<T>) {
      if (!std::isfinite(e) || !std::isfinite(a)) {
        ok = (std::isnan(e) && std::isnan(a)) || (e == a);
        if (!ok && std::isfinite(e)) ++check.non_finite;
        abs_err = ok ? 0 : std::numeric_limits<double>::infinity();
        rel_err = abs_err;
      } else {
        abs_err = std::fabs(a - e);
        rel_err = abs_err / std::max(std::fabs(e), std::numeric_limits<double>::min());
        ok = abs_err <= atol + rtol * std::fabs(e);
      }
    } else {
      abs_err = std::fabs(a - e);
      rel_err = abs_err / std::max(std::fabs(e), 1.0);
      ok = Load<T>(actual, i) == Load<T>(expected, i);  // exact, also above 2^53
    }
    check.max_abs_error = std::max(check.max_abs_error, abs_err);
    if (std::isfinite(e) && e != 0) check.max_rel_error = std::max(check.max_rel_error, rel_err);
    if (!ok) {
      if (check.mismatches == 0) {
        check.first_mismatch = i;
        check.expected = e;
        check.actual = a;
      }
      ++check.mismatches;
    }
  }
}

}  // namespace

OutputCheck CompareOutput(const TensorSpec& spec, std::span<const std::byte> expected,
                          std::span<const std::byte> actual) {
  OutputCheck check;
  check.output = spec.name;
  check.elements = spec.NumElements();
  const std::size_t bytes = spec.NumBytes();
  if (expected.size() != bytes || actual.size() != bytes) {
    check.mismatches = check.elements;
    check.first_mismatch = 0;
    return check;
  }
  switch (spec.dtype) {
    case DType::kFloat32: CompareTyped<float>(spec, expected, actual, check); break;
    case DType::kFloat64: CompareTyped<double>(spec, expected, actual, check); break;
    case DType::kInt32: CompareTyped<int32_t>(spec, expected, actual, check); break;
    case DType::kInt64: CompareTyped<int64_t>(spec, expected, actual, check); break;
  }
  if (check.first_mismatch >= 0) {
    int64_t rest = check.first_mismatch;
    check.first_mismatch_index.assign(spec.shape.size(), 0);
    for (std::size_t d = spec.shape.size(); d-- > 0;) {
      check.first_mismatch_index[d] = rest % spec.shape[d];
      rest /= spec.shape[d];
    }
  }
  return check;
}

namespace {

template <typename T>
bool WithinTolerance(const T* e, const T* a, std::size_t n, double atol, double rtol) {
  std::size_t bad = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double ei = static_cast<double>(e[i]), ai = static_cast<double>(a[i]);
    bad += !(std::fabs(ai - ei) <= atol + rtol * std::fabs(ei));  // NaN compares false: bad
  }
  return bad == 0;
}

template <typename T>
bool Identical(const T* e, const T* a, std::size_t n) {
  std::size_t bad = 0;
  for (std::size_t i = 0; i < n; ++i) bad += e[i] != a[i];
  return bad == 0;
}

}  // namespace

bool OutputWithinTolerance(const TensorSpec& spec, std::span<const std::byte> expected,
                           std::span<const std::byte> actual) {
  const std::size_t bytes = spec.NumBytes(), n = static_cast<std::size_t>(spec.NumElements());
  if (expected.size() != bytes || actual.size() != bytes) return false;
  const double atol = spec.tolerance.atol, rtol = spec.tolerance.rtol;
  switch (spec.dtype) {
    case DType::kFloat32:
      return WithinTolerance(reinterpret_cast<const float*>(expected.data()), reinterpret_cast<const float*>(actual.data()), n, atol, rtol);
    case DType::kFloat64:
      return WithinTolerance(reinterpret_cast<const double*>(expected.data()), reinterpret_cast<const double*>(actual.data()), n, atol, rtol);
    case DType::kInt32:
      return Identical(reinterpret_cast<const int32_t*>(expected.data()), reinterpret_cast<const int32_t*>(actual.data()), n);
    case DType::kInt64:
      return Identical(reinterpret_cast<const int64_t*>(expected.data()), reinterpret_cast<const int64_t*>(actual.data()), n);
  }
  return false;
}

void FillPoison(DType dtype, std::span<std::byte> buffer, int variant) {
  auto fill = [&](auto value) {
    using T = decltype(value);
    const std::size_t n = buffer.size() / sizeof(T);
    T* out = reinterpret_cast<T*>(buffer.data());
    for (std::size_t i = 0; i < n; ++i) out[i] = value;
  };
  switch (dtype) {
    case DType::kFloat32:
      fill(variant == 0 ? std::numeric_limits<float>::quiet_NaN() : -3.0e38f);
      break;
    case DType::kFloat64:
      fill(variant == 0 ? std::numeric_limits<double>::quiet_NaN() : -1.0e300);
      break;
    case DType::kInt32: fill(static_cast<int32_t>(variant == 0 ? 0x7eadbeef : -0x21524111)); break;
    case DType::kInt64: fill(static_cast<int64_t>(variant == 0 ? 0x7eadbeefcafef00dLL : -0x2152411035014ff3LL)); break;
  }
}

}  // namespace kernelgym
