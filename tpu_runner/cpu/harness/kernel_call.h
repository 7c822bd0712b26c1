// Calling `kernel` with any task signature. Every argument is integer-class (a pointer or an
// int64_t), and the x86-64 SysV ABI passes those identically, so a call through a function type
// of N uint64_t parameters is exact: no code generation, no libffi in the timed region.
#pragma once

#include <cstdint>
#include <vector>

namespace kernelgym {

inline constexpr std::size_t kMaxKernelArgs = 16;

inline void CallKernel(void* fn, const std::vector<uint64_t>& a) {
  using U = uint64_t;
  switch (a.size()) {
#define KG_ARGS_1 a[0]
#define KG_ARGS_2 KG_ARGS_1, a[1]
#define KG_ARGS_3 KG_ARGS_2, a[2]
#define KG_ARGS_4 KG_ARGS_3, a[3]
#define KG_ARGS_5 KG_ARGS_4, a[4]
#define KG_ARGS_6 KG_ARGS_5, a[5]
#define KG_ARGS_7 KG_ARGS_6, a[6]
#define KG_ARGS_8 KG_ARGS_7, a[7]
#define KG_ARGS_9 KG_ARGS_8, a[8]
#define KG_ARGS_10 KG_ARGS_9, a[9]
#define KG_ARGS_11 KG_ARGS_10, a[10]
#define KG_ARGS_12 KG_ARGS_11, a[11]
#define KG_ARGS_13 KG_ARGS_12, a[12]
#define KG_ARGS_14 KG_ARGS_13, a[13]
#define KG_ARGS_15 KG_ARGS_14, a[14]
#define KG_ARGS_16 KG_ARGS_15, a[15]
#define KG_TYPES_1 U
#define KG_TYPES_2 KG_TYPES_1, U
#define KG_TYPES_3 KG_TYPES_2, U
#define KG_TYPES_4 KG_TYPES_3, U
#define KG_TYPES_5 KG_TYPES_4, U
#define KG_TYPES_6 KG_TYPES_5, U
#define KG_TYPES_7 KG_TYPES_6, U
#define KG_TYPES_8 KG_TYPES_7, U
#define KG_TYPES_9 KG_TYPES_8, U
#define KG_TYPES_10 KG_TYPES_9, U
#define KG_TYPES_11 KG_TYPES_10, U
#define KG_TYPES_12 KG_TYPES_11, U
#define KG_TYPES_13 KG_TYPES_12, U
#define KG_TYPES_14 KG_TYPES_13, U
#define KG_TYPES_15 KG_TYPES_14, U
#define KG_TYPES_16 KG_TYPES_15, U
#define KG_CASE(n) \
  case n: reinterpret_cast<void (*)(KG_TYPES_##n)>(fn)(KG_ARGS_##n); break;
    KG_CASE(1) KG_CASE(2) KG_CASE(3) KG_CASE(4) KG_CASE(5) KG_CASE(6) KG_CASE(7) KG_CASE(8)
    KG_CASE(9) KG_CASE(10) KG_CASE(11) KG_CASE(12) KG_CASE(13) KG_CASE(14) KG_CASE(15) KG_CASE(16)
#undef KG_CASE
    default: break;
  }
}

}  // namespace kernelgym
