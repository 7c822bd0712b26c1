// Parsers of what g++ 12 writes (tpu_runner/diagnostics.h): the -H include trace, the JSON
// diagnostics array and the -fopt-info-vec-all remarks. Every sample below is real g++ 12.2
// output, pasted verbatim; the command that produced it is above it.
#include "tpu_runner/diagnostics.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kernelgym {
namespace {

// clang-format off
// k.cpp (#include <cmath>, <cstdint>, "helper.h"; an undeclared name on line 6, an unused variable on
// line 7), compiled with
//   LC_ALL=C g++ -std=c++20 -O3 -march=native -H -fdiagnostics-format=json -fopt-info-vec-all=rem.txt -Wall -Wextra -c k.cpp
const char* const kHelperErrorStderr = R"GCC(. /usr/include/c++/12/cmath
.. /usr/include/x86_64-linux-gnu/c++/12/bits/c++config.h
... /usr/include/x86_64-linux-gnu/c++/12/bits/os_defines.h
.... /usr/include/features.h
..... /usr/include/features-time64.h
...... /usr/include/x86_64-linux-gnu/bits/wordsize.h
...... /usr/include/x86_64-linux-gnu/bits/timesize.h
....... /usr/include/x86_64-linux-gnu/bits/wordsize.h
..... /usr/include/x86_64-linux-gnu/sys/cdefs.h
...... /usr/include/x86_64-linux-gnu/bits/wordsize.h
...... /usr/include/x86_64-linux-gnu/bits/long-double.h
..... /usr/include/x86_64-linux-gnu/gnu/stubs.h
...... /usr/include/x86_64-linux-gnu/gnu/stubs-64.h
... /usr/include/x86_64-linux-gnu/c++/12/bits/cpu_defines.h
... /usr/include/c++/12/pstl/pstl_config.h
.. /usr/include/c++/12/bits/cpp_type_traits.h
.. /usr/include/c++/12/ext/type_traits.h
.. /usr/include/math.h
... /usr/include/x86_64-linux-gnu/bits/libc-header-start.h
... /usr/include/x86_64-linux-gnu/bits/types.h
.... /usr/include/x86_64-linux-gnu/bits/wordsize.h
.... /usr/include/x86_64-linux-gnu/bits/timesize.h
..... /usr/include/x86_64-linux-gnu/bits/wordsize.h
.... /usr/include/x86_64-linux-gnu/bits/typesizes.h
.... /usr/include/x86_64-linux-gnu/bits/time64.h
... /usr/include/x86_64-linux-gnu/bits/math-vector.h
.... /usr/include/x86_64-linux-gnu/bits/libm-simd-decl-stubs.h
... /usr/include/x86_64-linux-gnu/bits/floatn.h
.... /usr/include/x86_64-linux-gnu/bits/floatn-common.h
..... /usr/include/x86_64-linux-gnu/bits/long-double.h
... /usr/include/x86_64-linux-gnu/bits/flt-eval-method.h
... /usr/include/x86_64-linux-gnu/bits/fp-logb.h
... /usr/include/x86_64-linux-gnu/bits/fp-fast.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls-helper-functions.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls-helper-functions.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls-helper-functions.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls-helper-functions.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls-narrow.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls-narrow.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls-narrow.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls-narrow.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls-narrow.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls-narrow.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls-narrow.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls-narrow.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls-narrow.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls-narrow.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls-narrow.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls-narrow.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls-narrow.h
... /usr/include/x86_64-linux-gnu/bits/iscanonical.h
.. /usr/include/c++/12/bits/std_abs.h
... /usr/include/stdlib.h
.... /usr/include/x86_64-linux-gnu/bits/libc-header-start.h
.... /usr/lib/gcc/x86_64-linux-gnu/12/include/stddef.h
.... /usr/include/x86_64-linux-gnu/bits/waitflags.h
.... /usr/include/x86_64-linux-gnu/bits/waitstatus.h
.... /usr/include/x86_64-linux-gnu/bits/types/locale_t.h
..... /usr/include/x86_64-linux-gnu/bits/types/__locale_t.h
.... /usr/include/x86_64-linux-gnu/sys/types.h
..... /usr/include/x86_64-linux-gnu/bits/types/clock_t.h
..... /usr/include/x86_64-linux-gnu/bits/types/clockid_t.h
..... /usr/include/x86_64-linux-gnu/bits/types/time_t.h
..... /usr/include/x86_64-linux-gnu/bits/types/timer_t.h
..... /usr/lib/gcc/x86_64-linux-gnu/12/include/stddef.h
..... /usr/include/x86_64-linux-gnu/bits/stdint-intn.h
..... /usr/include/endian.h
...... /usr/include/x86_64-linux-gnu/bits/endian.h
....... /usr/include/x86_64-linux-gnu/bits/endianness.h
...... /usr/include/x86_64-linux-gnu/bits/byteswap.h
...... /usr/include/x86_64-linux-gnu/bits/uintn-identity.h
..... /usr/include/x86_64-linux-gnu/sys/select.h
...... /usr/include/x86_64-linux-gnu/bits/select.h
...... /usr/include/x86_64-linux-gnu/bits/types/sigset_t.h
....... /usr/include/x86_64-linux-gnu/bits/types/__sigset_t.h
...... /usr/include/x86_64-linux-gnu/bits/types/struct_timeval.h
...... /usr/include/x86_64-linux-gnu/bits/types/struct_timespec.h
..... /usr/include/x86_64-linux-gnu/bits/pthreadtypes.h
...... /usr/include/x86_64-linux-gnu/bits/thread-shared-types.h
....... /usr/include/x86_64-linux-gnu/bits/pthreadtypes-arch.h
........ /usr/include/x86_64-linux-gnu/bits/wordsize.h
....... /usr/include/x86_64-linux-gnu/bits/atomic_wide_counter.h
....... /usr/include/x86_64-linux-gnu/bits/struct_mutex.h
....... /usr/include/x86_64-linux-gnu/bits/struct_rwlock.h
.... /usr/include/alloca.h
..... /usr/lib/gcc/x86_64-linux-gnu/12/include/stddef.h
.... /usr/include/x86_64-linux-gnu/bits/stdlib-bsearch.h
.... /usr/include/x86_64-linux-gnu/bits/stdlib-float.h
.. /usr/include/c++/12/bits/specfun.h
... /usr/include/c++/12/bits/stl_algobase.h
.... /usr/include/c++/12/bits/functexcept.h
..... /usr/include/c++/12/bits/exception_defines.h
.... /usr/include/c++/12/ext/numeric_traits.h
.... /usr/include/c++/12/bits/stl_pair.h
..... /usr/include/c++/12/type_traits
..... /usr/include/c++/12/bits/move.h
..... /usr/include/c++/12/bits/utility.h
..... /usr/include/c++/12/compare
...... /usr/include/c++/12/concepts
.... /usr/include/c++/12/bits/stl_iterator_base_types.h
..... /usr/include/c++/12/bits/iterator_concepts.h
...... /usr/include/c++/12/bits/ptr_traits.h
...... /usr/include/c++/12/bits/ranges_cmp.h
.... /usr/include/c++/12/bits/stl_iterator_base_funcs.h
..... /usr/include/c++/12/bits/concept_check.h
..... /usr/include/c++/12/debug/assertions.h
.... /usr/include/c++/12/bits/stl_iterator.h
..... /usr/include/c++/12/new
...... /usr/include/c++/12/bits/exception.h
..... /usr/include/c++/12/bits/stl_construct.h
.... /usr/include/c++/12/debug/debug.h
.... /usr/include/c++/12/bits/predefined_ops.h
... /usr/include/c++/12/limits
... /usr/include/c++/12/tr1/gamma.tcc
.... /usr/include/c++/12/tr1/special_function_util.h
... /usr/include/c++/12/tr1/bessel_function.tcc
... /usr/include/c++/12/tr1/beta_function.tcc
... /usr/include/c++/12/tr1/ell_integral.tcc
... /usr/include/c++/12/tr1/exp_integral.tcc
... /usr/include/c++/12/tr1/hypergeometric.tcc
... /usr/include/c++/12/tr1/legendre_function.tcc
... /usr/include/c++/12/tr1/modified_bessel_func.tcc
... /usr/include/c++/12/tr1/poly_hermite.tcc
... /usr/include/c++/12/tr1/poly_laguerre.tcc
... /usr/include/c++/12/tr1/riemann_zeta.tcc
. /usr/include/c++/12/cstdint
.. /usr/lib/gcc/x86_64-linux-gnu/12/include/stdint.h
... /usr/include/stdint.h
.... /usr/include/x86_64-linux-gnu/bits/libc-header-start.h
.... /usr/include/x86_64-linux-gnu/bits/wchar.h
.... /usr/include/x86_64-linux-gnu/bits/wordsize.h
.... /usr/include/x86_64-linux-gnu/bits/stdint-uintn.h
. helper.h
Multiple include guards may be useful for:
/usr/include/c++/12/cmath
/usr/include/features-time64.h
/usr/include/x86_64-linux-gnu/bits/byteswap.h
/usr/include/x86_64-linux-gnu/bits/flt-eval-method.h
/usr/include/x86_64-linux-gnu/bits/fp-fast.h
/usr/include/x86_64-linux-gnu/bits/fp-logb.h
/usr/include/x86_64-linux-gnu/bits/iscanonical.h
/usr/include/x86_64-linux-gnu/bits/libm-simd-decl-stubs.h
/usr/include/x86_64-linux-gnu/bits/math-vector.h
/usr/include/x86_64-linux-gnu/bits/select.h
/usr/include/x86_64-linux-gnu/bits/stdlib-bsearch.h
/usr/include/x86_64-linux-gnu/bits/stdlib-float.h
/usr/include/x86_64-linux-gnu/bits/time64.h
/usr/include/x86_64-linux-gnu/bits/typesizes.h
/usr/include/x86_64-linux-gnu/bits/uintn-identity.h
/usr/include/x86_64-linux-gnu/bits/waitflags.h
/usr/include/x86_64-linux-gnu/bits/waitstatus.h
/usr/include/x86_64-linux-gnu/gnu/stubs-64.h
/usr/include/x86_64-linux-gnu/gnu/stubs.h
[{"kind": "error", "column-origin": 1, "children": [], "escape-source": false, "locations": [{"finish": {"byte-column": 75, "display-column": 75, "line": 6, "file": "k.cpp", "column": 75}, "caret": {"byte-column": 60, "display-column": 60, "line": 6, "file": "k.cpp", "column": 60}}], "message": "'undeclared_thing' was not declared in this scope"}, {"kind": "warning", "locations": [{"finish": {"byte-column": 12, "display-column": 12, "line": 7, "file": "k.cpp", "column": 12}, "caret": {"byte-column": 7, "display-column": 7, "line": 7, "file": "k.cpp", "column": 7}}], "column-origin": 1, "option": "-Wunused-variable", "escape-source": false, "children": [], "option_url": "https://gcc.gnu.org/onlinedocs/gcc/Warning-Options.html#index-Wunused-variable", "message": "unused variable 'unused'"}]
)GCC";

// The runner's own command line (compiler.cc): kernel.cpp includes <cmath> and <omp.h> and uses an
// undeclared name on line 8:
//   LC_ALL=C g++ -std=c++20 -O3 -march=native -fopenmp -fPIC -shared -fvisibility=hidden
//     -fvisibility-inlines-hidden -include prelude.h -H -fdiagnostics-format=json
//     -fopt-info-vec-all=remarks.txt -Wl,--version-script=exports.map -Wl,-z,now -Wl,-z,relro kernel.cpp -o kernel.so
const char* const kRunnerCompileErrorStderr = R"GCC(. /usr/include/c++/12/cmath
.. /usr/include/c++/12/bits/cpp_type_traits.h
.. /usr/include/c++/12/ext/type_traits.h
.. /usr/include/math.h
... /usr/include/x86_64-linux-gnu/bits/libc-header-start.h
... /usr/include/x86_64-linux-gnu/bits/math-vector.h
.... /usr/include/x86_64-linux-gnu/bits/libm-simd-decl-stubs.h
... /usr/include/x86_64-linux-gnu/bits/floatn.h
.... /usr/include/x86_64-linux-gnu/bits/floatn-common.h
..... /usr/include/x86_64-linux-gnu/bits/long-double.h
... /usr/include/x86_64-linux-gnu/bits/flt-eval-method.h
... /usr/include/x86_64-linux-gnu/bits/fp-logb.h
... /usr/include/x86_64-linux-gnu/bits/fp-fast.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls-helper-functions.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls-helper-functions.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls-helper-functions.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls-helper-functions.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls-narrow.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls-narrow.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls-narrow.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls-narrow.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls-narrow.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls-narrow.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls-narrow.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls-narrow.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls-narrow.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls-narrow.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls-narrow.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls-narrow.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls-narrow.h
... /usr/include/x86_64-linux-gnu/bits/iscanonical.h
.. /usr/include/c++/12/bits/std_abs.h
... /usr/include/stdlib.h
.... /usr/include/x86_64-linux-gnu/bits/libc-header-start.h
.... /usr/lib/gcc/x86_64-linux-gnu/12/include/stddef.h
.... /usr/include/x86_64-linux-gnu/bits/waitflags.h
.... /usr/include/x86_64-linux-gnu/bits/waitstatus.h
.... /usr/include/x86_64-linux-gnu/bits/types/locale_t.h
..... /usr/include/x86_64-linux-gnu/bits/types/__locale_t.h
.... /usr/include/x86_64-linux-gnu/sys/types.h
..... /usr/include/x86_64-linux-gnu/bits/types/clock_t.h
..... /usr/include/x86_64-linux-gnu/bits/types/clockid_t.h
..... /usr/include/x86_64-linux-gnu/bits/types/time_t.h
..... /usr/include/x86_64-linux-gnu/bits/types/timer_t.h
..... /usr/lib/gcc/x86_64-linux-gnu/12/include/stddef.h
..... /usr/include/endian.h
...... /usr/include/x86_64-linux-gnu/bits/endian.h
....... /usr/include/x86_64-linux-gnu/bits/endianness.h
...... /usr/include/x86_64-linux-gnu/bits/byteswap.h
...... /usr/include/x86_64-linux-gnu/bits/uintn-identity.h
..... /usr/include/x86_64-linux-gnu/sys/select.h
...... /usr/include/x86_64-linux-gnu/bits/select.h
...... /usr/include/x86_64-linux-gnu/bits/types/sigset_t.h
....... /usr/include/x86_64-linux-gnu/bits/types/__sigset_t.h
...... /usr/include/x86_64-linux-gnu/bits/types/struct_timeval.h
...... /usr/include/x86_64-linux-gnu/bits/types/struct_timespec.h
..... /usr/include/x86_64-linux-gnu/bits/pthreadtypes.h
...... /usr/include/x86_64-linux-gnu/bits/thread-shared-types.h
....... /usr/include/x86_64-linux-gnu/bits/pthreadtypes-arch.h
........ /usr/include/x86_64-linux-gnu/bits/wordsize.h
....... /usr/include/x86_64-linux-gnu/bits/atomic_wide_counter.h
....... /usr/include/x86_64-linux-gnu/bits/struct_mutex.h
....... /usr/include/x86_64-linux-gnu/bits/struct_rwlock.h
.... /usr/include/alloca.h
..... /usr/lib/gcc/x86_64-linux-gnu/12/include/stddef.h
.... /usr/include/x86_64-linux-gnu/bits/stdlib-bsearch.h
.... /usr/include/x86_64-linux-gnu/bits/stdlib-float.h
.. /usr/include/c++/12/bits/specfun.h
... /usr/include/c++/12/bits/stl_algobase.h
.... /usr/include/c++/12/bits/functexcept.h
..... /usr/include/c++/12/bits/exception_defines.h
.... /usr/include/c++/12/ext/numeric_traits.h
.... /usr/include/c++/12/bits/stl_pair.h
..... /usr/include/c++/12/type_traits
..... /usr/include/c++/12/bits/move.h
..... /usr/include/c++/12/bits/utility.h
..... /usr/include/c++/12/compare
...... /usr/include/c++/12/concepts
.... /usr/include/c++/12/bits/stl_iterator_base_types.h
..... /usr/include/c++/12/bits/iterator_concepts.h
...... /usr/include/c++/12/bits/ptr_traits.h
...... /usr/include/c++/12/bits/ranges_cmp.h
.... /usr/include/c++/12/bits/stl_iterator_base_funcs.h
..... /usr/include/c++/12/bits/concept_check.h
..... /usr/include/c++/12/debug/assertions.h
.... /usr/include/c++/12/bits/stl_iterator.h
..... /usr/include/c++/12/new
...... /usr/include/c++/12/bits/exception.h
..... /usr/include/c++/12/bits/stl_construct.h
.... /usr/include/c++/12/debug/debug.h
.... /usr/include/c++/12/bits/predefined_ops.h
... /usr/include/c++/12/limits
... /usr/include/c++/12/tr1/gamma.tcc
.... /usr/include/c++/12/tr1/special_function_util.h
... /usr/include/c++/12/tr1/bessel_function.tcc
... /usr/include/c++/12/tr1/beta_function.tcc
... /usr/include/c++/12/tr1/ell_integral.tcc
... /usr/include/c++/12/tr1/exp_integral.tcc
... /usr/include/c++/12/tr1/hypergeometric.tcc
... /usr/include/c++/12/tr1/legendre_function.tcc
... /usr/include/c++/12/tr1/modified_bessel_func.tcc
... /usr/include/c++/12/tr1/poly_hermite.tcc
... /usr/include/c++/12/tr1/poly_laguerre.tcc
... /usr/include/c++/12/tr1/riemann_zeta.tcc
. /usr/lib/gcc/x86_64-linux-gnu/12/include/omp.h
Multiple include guards may be useful for:
./prelude.h
/usr/include/c++/12/cmath
/usr/include/features-time64.h
/usr/include/x86_64-linux-gnu/bits/byteswap.h
/usr/include/x86_64-linux-gnu/bits/flt-eval-method.h
/usr/include/x86_64-linux-gnu/bits/fp-fast.h
/usr/include/x86_64-linux-gnu/bits/fp-logb.h
/usr/include/x86_64-linux-gnu/bits/iscanonical.h
/usr/include/x86_64-linux-gnu/bits/libm-simd-decl-stubs.h
/usr/include/x86_64-linux-gnu/bits/math-vector.h
/usr/include/x86_64-linux-gnu/bits/select.h
/usr/include/x86_64-linux-gnu/bits/stdlib-bsearch.h
/usr/include/x86_64-linux-gnu/bits/stdlib-float.h
/usr/include/x86_64-linux-gnu/bits/time64.h
/usr/include/x86_64-linux-gnu/bits/typesizes.h
/usr/include/x86_64-linux-gnu/bits/uintn-identity.h
/usr/include/x86_64-linux-gnu/bits/waitflags.h
/usr/include/x86_64-linux-gnu/bits/waitstatus.h
/usr/include/x86_64-linux-gnu/gnu/stubs-64.h
/usr/include/x86_64-linux-gnu/gnu/stubs.h
[{"kind": "error", "column-origin": 1, "children": [], "escape-source": false, "locations": [{"finish": {"byte-column": 30, "display-column": 30, "line": 8, "file": "kernel.cpp", "column": 30}, "caret": {"byte-column": 17, "display-column": 17, "line": 8, "file": "kernel.cpp", "column": 17}}], "message": "'missing_symbol' was not declared in this scope"}]
)GCC";

// Same command (plus -Wl,--no-undefined) on a kernel.cpp that calls an undefined extern "C" function:
// the compile succeeds ("[]") and the link fails.
const char* const kRunnerLinkErrorStderr = R"GCC(. /usr/include/c++/12/cmath
.. /usr/include/c++/12/bits/cpp_type_traits.h
.. /usr/include/c++/12/ext/type_traits.h
.. /usr/include/math.h
... /usr/include/x86_64-linux-gnu/bits/libc-header-start.h
... /usr/include/x86_64-linux-gnu/bits/math-vector.h
.... /usr/include/x86_64-linux-gnu/bits/libm-simd-decl-stubs.h
... /usr/include/x86_64-linux-gnu/bits/floatn.h
.... /usr/include/x86_64-linux-gnu/bits/floatn-common.h
..... /usr/include/x86_64-linux-gnu/bits/long-double.h
... /usr/include/x86_64-linux-gnu/bits/flt-eval-method.h
... /usr/include/x86_64-linux-gnu/bits/fp-logb.h
... /usr/include/x86_64-linux-gnu/bits/fp-fast.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls-helper-functions.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls-helper-functions.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls-helper-functions.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls-helper-functions.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls-narrow.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls-narrow.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls-narrow.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls-narrow.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls-narrow.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls-narrow.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls-narrow.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls-narrow.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls-narrow.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls-narrow.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls-narrow.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls-narrow.h
... /usr/include/x86_64-linux-gnu/bits/mathcalls-narrow.h
... /usr/include/x86_64-linux-gnu/bits/iscanonical.h
.. /usr/include/c++/12/bits/std_abs.h
... /usr/include/stdlib.h
.... /usr/include/x86_64-linux-gnu/bits/libc-header-start.h
.... /usr/lib/gcc/x86_64-linux-gnu/12/include/stddef.h
.... /usr/include/x86_64-linux-gnu/bits/waitflags.h
.... /usr/include/x86_64-linux-gnu/bits/waitstatus.h
.... /usr/include/x86_64-linux-gnu/bits/types/locale_t.h
..... /usr/include/x86_64-linux-gnu/bits/types/__locale_t.h
.... /usr/include/x86_64-linux-gnu/sys/types.h
..... /usr/include/x86_64-linux-gnu/bits/types/clock_t.h
..... /usr/include/x86_64-linux-gnu/bits/types/clockid_t.h
..... /usr/include/x86_64-linux-gnu/bits/types/time_t.h
..... /usr/include/x86_64-linux-gnu/bits/types/timer_t.h
..... /usr/lib/gcc/x86_64-linux-gnu/12/include/stddef.h
..... /usr/include/endian.h
...... /usr/include/x86_64-linux-gnu/bits/endian.h
....... /usr/include/x86_64-linux-gnu/bits/endianness.h
...... /usr/include/x86_64-linux-gnu/bits/byteswap.h
...... /usr/include/x86_64-linux-gnu/bits/uintn-identity.h
..... /usr/include/x86_64-linux-gnu/sys/select.h
...... /usr/include/x86_64-linux-gnu/bits/select.h
...... /usr/include/x86_64-linux-gnu/bits/types/sigset_t.h
....... /usr/include/x86_64-linux-gnu/bits/types/__sigset_t.h
...... /usr/include/x86_64-linux-gnu/bits/types/struct_timeval.h
...... /usr/include/x86_64-linux-gnu/bits/types/struct_timespec.h
..... /usr/include/x86_64-linux-gnu/bits/pthreadtypes.h
...... /usr/include/x86_64-linux-gnu/bits/thread-shared-types.h
....... /usr/include/x86_64-linux-gnu/bits/pthreadtypes-arch.h
........ /usr/include/x86_64-linux-gnu/bits/wordsize.h
....... /usr/include/x86_64-linux-gnu/bits/atomic_wide_counter.h
....... /usr/include/x86_64-linux-gnu/bits/struct_mutex.h
....... /usr/include/x86_64-linux-gnu/bits/struct_rwlock.h
.... /usr/include/alloca.h
..... /usr/lib/gcc/x86_64-linux-gnu/12/include/stddef.h
.... /usr/include/x86_64-linux-gnu/bits/stdlib-bsearch.h
.... /usr/include/x86_64-linux-gnu/bits/stdlib-float.h
.. /usr/include/c++/12/bits/specfun.h
... /usr/include/c++/12/bits/stl_algobase.h
.... /usr/include/c++/12/bits/functexcept.h
..... /usr/include/c++/12/bits/exception_defines.h
.... /usr/include/c++/12/ext/numeric_traits.h
.... /usr/include/c++/12/bits/stl_pair.h
..... /usr/include/c++/12/type_traits
..... /usr/include/c++/12/bits/move.h
..... /usr/include/c++/12/bits/utility.h
..... /usr/include/c++/12/compare
...... /usr/include/c++/12/concepts
.... /usr/include/c++/12/bits/stl_iterator_base_types.h
..... /usr/include/c++/12/bits/iterator_concepts.h
...... /usr/include/c++/12/bits/ptr_traits.h
...... /usr/include/c++/12/bits/ranges_cmp.h
.... /usr/include/c++/12/bits/stl_iterator_base_funcs.h
..... /usr/include/c++/12/bits/concept_check.h
..... /usr/include/c++/12/debug/assertions.h
.... /usr/include/c++/12/bits/stl_iterator.h
..... /usr/include/c++/12/new
...... /usr/include/c++/12/bits/exception.h
..... /usr/include/c++/12/bits/stl_construct.h
.... /usr/include/c++/12/debug/debug.h
.... /usr/include/c++/12/bits/predefined_ops.h
... /usr/include/c++/12/limits
... /usr/include/c++/12/tr1/gamma.tcc
.... /usr/include/c++/12/tr1/special_function_util.h
... /usr/include/c++/12/tr1/bessel_function.tcc
... /usr/include/c++/12/tr1/beta_function.tcc
... /usr/include/c++/12/tr1/ell_integral.tcc
... /usr/include/c++/12/tr1/exp_integral.tcc
... /usr/include/c++/12/tr1/hypergeometric.tcc
... /usr/include/c++/12/tr1/legendre_function.tcc
... /usr/include/c++/12/tr1/modified_bessel_func.tcc
... /usr/include/c++/12/tr1/poly_hermite.tcc
... /usr/include/c++/12/tr1/poly_laguerre.tcc
... /usr/include/c++/12/tr1/riemann_zeta.tcc
Multiple include guards may be useful for:
./prelude.h
/usr/include/c++/12/cmath
/usr/include/features-time64.h
/usr/include/x86_64-linux-gnu/bits/byteswap.h
/usr/include/x86_64-linux-gnu/bits/flt-eval-method.h
/usr/include/x86_64-linux-gnu/bits/fp-fast.h
/usr/include/x86_64-linux-gnu/bits/fp-logb.h
/usr/include/x86_64-linux-gnu/bits/iscanonical.h
/usr/include/x86_64-linux-gnu/bits/libm-simd-decl-stubs.h
/usr/include/x86_64-linux-gnu/bits/math-vector.h
/usr/include/x86_64-linux-gnu/bits/select.h
/usr/include/x86_64-linux-gnu/bits/stdlib-bsearch.h
/usr/include/x86_64-linux-gnu/bits/stdlib-float.h
/usr/include/x86_64-linux-gnu/bits/time64.h
/usr/include/x86_64-linux-gnu/bits/typesizes.h
/usr/include/x86_64-linux-gnu/bits/uintn-identity.h
/usr/include/x86_64-linux-gnu/bits/waitflags.h
/usr/include/x86_64-linux-gnu/bits/waitstatus.h
/usr/include/x86_64-linux-gnu/gnu/stubs-64.h
/usr/include/x86_64-linux-gnu/gnu/stubs.h
[]
/usr/bin/ld: /tmp/ccYo8y1C.o: in function `kernel':
kernel.cpp:(.text+0x27): undefined reference to `helper_not_defined'
collect2: error: ld returned 1 exit status
)GCC";

// k2.cpp: scale(x[i]) called with one argument of two (line 6), declared on line 3; -H trace included.
const char* const kTooFewArgumentsStderr = R"GCC(. /usr/include/c++/12/cstdint
.. /usr/include/x86_64-linux-gnu/c++/12/bits/c++config.h
... /usr/include/x86_64-linux-gnu/c++/12/bits/os_defines.h
.... /usr/include/features.h
..... /usr/include/features-time64.h
...... /usr/include/x86_64-linux-gnu/bits/wordsize.h
...... /usr/include/x86_64-linux-gnu/bits/timesize.h
....... /usr/include/x86_64-linux-gnu/bits/wordsize.h
..... /usr/include/x86_64-linux-gnu/sys/cdefs.h
...... /usr/include/x86_64-linux-gnu/bits/wordsize.h
...... /usr/include/x86_64-linux-gnu/bits/long-double.h
..... /usr/include/x86_64-linux-gnu/gnu/stubs.h
...... /usr/include/x86_64-linux-gnu/gnu/stubs-64.h
... /usr/include/x86_64-linux-gnu/c++/12/bits/cpu_defines.h
... /usr/include/c++/12/pstl/pstl_config.h
.. /usr/lib/gcc/x86_64-linux-gnu/12/include/stdint.h
... /usr/include/stdint.h
.... /usr/include/x86_64-linux-gnu/bits/libc-header-start.h
.... /usr/include/x86_64-linux-gnu/bits/types.h
..... /usr/include/x86_64-linux-gnu/bits/wordsize.h
..... /usr/include/x86_64-linux-gnu/bits/timesize.h
...... /usr/include/x86_64-linux-gnu/bits/wordsize.h
..... /usr/include/x86_64-linux-gnu/bits/typesizes.h
..... /usr/include/x86_64-linux-gnu/bits/time64.h
.... /usr/include/x86_64-linux-gnu/bits/wchar.h
.... /usr/include/x86_64-linux-gnu/bits/wordsize.h
.... /usr/include/x86_64-linux-gnu/bits/stdint-intn.h
.... /usr/include/x86_64-linux-gnu/bits/stdint-uintn.h
Multiple include guards may be useful for:
/usr/include/features-time64.h
/usr/include/x86_64-linux-gnu/bits/libc-header-start.h
/usr/include/x86_64-linux-gnu/bits/long-double.h
/usr/include/x86_64-linux-gnu/bits/time64.h
/usr/include/x86_64-linux-gnu/bits/typesizes.h
/usr/include/x86_64-linux-gnu/gnu/stubs-64.h
/usr/include/x86_64-linux-gnu/gnu/stubs.h
[{"kind": "error", "column-origin": 1, "children": [], "escape-source": false, "locations": [{"finish": {"byte-column": 52, "display-column": 52, "line": 6, "file": "k2.cpp", "column": 52}, "caret": {"byte-column": 47, "display-column": 47, "line": 6, "file": "k2.cpp", "column": 47}, "start": {"byte-column": 42, "display-column": 42, "line": 6, "file": "k2.cpp", "column": 42}}], "message": "too few arguments to function 'float scale(float, float)'"}, {"kind": "note", "column-origin": 1, "children": [], "escape-source": false, "locations": [{"finish": {"byte-column": 18, "display-column": 18, "line": 3, "file": "k2.cpp", "column": 18}, "caret": {"byte-column": 14, "display-column": 14, "line": 3, "file": "k2.cpp", "column": 14}}], "message": "declared here"}]
)GCC";

// k9.cpp: no matching overload (line 7); the candidates are children of the error (without -H).
const char* const kOverloadStderr = R"GCC([{"kind": "error", "column-origin": 1, "children": [{"kind": "note", "escape-source": false, "locations": [{"caret": {"byte-column": 14, "display-column": 14, "line": 3, "file": "k9.cpp", "column": 14}}], "message": "candidate: 'float f(int)'"}, {"kind": "note", "escape-source": false, "locations": [{"caret": {"byte-column": 20, "display-column": 20, "line": 3, "file": "k9.cpp", "column": 20}, "start": {"byte-column": 16, "display-column": 16, "line": 3, "file": "k9.cpp", "column": 16}}], "message": "  no known conversion for argument 1 from 'V' to 'int'"}, {"kind": "note", "escape-source": false, "locations": [{"caret": {"byte-column": 14, "display-column": 14, "line": 4, "file": "k9.cpp", "column": 14}}], "message": "candidate: 'float f(const char*)'"}, {"kind": "note", "escape-source": false, "locations": [{"caret": {"byte-column": 28, "display-column": 28, "line": 4, "file": "k9.cpp", "column": 28}, "start": {"byte-column": 16, "display-column": 16, "line": 4, "file": "k9.cpp", "column": 16}}], "message": "  no known conversion for argument 1 from 'V' to 'const char*'"}], "escape-source": false, "locations": [{"finish": {"byte-column": 13, "display-column": 13, "line": 7, "file": "k9.cpp", "column": 13}, "caret": {"byte-column": 11, "display-column": 11, "line": 7, "file": "k9.cpp", "column": 11}, "start": {"byte-column": 10, "display-column": 10, "line": 7, "file": "k9.cpp", "column": 10}}], "message": "no matching function for call to 'f(V&)'"}]
)GCC";

// k8.cpp: #include <nonexistent_header.h> on line 2.
const char* const kMissingHeaderStderr = R"GCC(. /usr/include/c++/12/cstdint
.. /usr/include/x86_64-linux-gnu/c++/12/bits/c++config.h
... /usr/include/x86_64-linux-gnu/c++/12/bits/os_defines.h
.... /usr/include/features.h
..... /usr/include/features-time64.h
...... /usr/include/x86_64-linux-gnu/bits/wordsize.h
...... /usr/include/x86_64-linux-gnu/bits/timesize.h
....... /usr/include/x86_64-linux-gnu/bits/wordsize.h
..... /usr/include/x86_64-linux-gnu/sys/cdefs.h
...... /usr/include/x86_64-linux-gnu/bits/wordsize.h
...... /usr/include/x86_64-linux-gnu/bits/long-double.h
..... /usr/include/x86_64-linux-gnu/gnu/stubs.h
...... /usr/include/x86_64-linux-gnu/gnu/stubs-64.h
... /usr/include/x86_64-linux-gnu/c++/12/bits/cpu_defines.h
... /usr/include/c++/12/pstl/pstl_config.h
.. /usr/lib/gcc/x86_64-linux-gnu/12/include/stdint.h
... /usr/include/stdint.h
.... /usr/include/x86_64-linux-gnu/bits/libc-header-start.h
.... /usr/include/x86_64-linux-gnu/bits/types.h
..... /usr/include/x86_64-linux-gnu/bits/wordsize.h
..... /usr/include/x86_64-linux-gnu/bits/timesize.h
...... /usr/include/x86_64-linux-gnu/bits/wordsize.h
..... /usr/include/x86_64-linux-gnu/bits/typesizes.h
..... /usr/include/x86_64-linux-gnu/bits/time64.h
.... /usr/include/x86_64-linux-gnu/bits/wchar.h
.... /usr/include/x86_64-linux-gnu/bits/wordsize.h
.... /usr/include/x86_64-linux-gnu/bits/stdint-intn.h
.... /usr/include/x86_64-linux-gnu/bits/stdint-uintn.h
[{"kind": "fatal error", "column-origin": 1, "children": [], "escape-source": false, "locations": [{"finish": {"byte-column": 31, "display-column": 31, "line": 2, "file": "k8.cpp", "column": 31}, "caret": {"byte-column": 10, "display-column": 10, "line": 2, "file": "k8.cpp", "column": 10}}], "message": "nonexistent_header.h: No such file or directory"}]
compilation terminated.
)GCC";

// g++ ... -c nonexist.cpp
const char* const kMissingSourceStderr = R"GCC([{"kind": "fatal error", "column-origin": 1, "children": [], "escape-source": false, "locations": [], "message": "nonexist.cpp: No such file or directory"}]
compilation terminated.
)GCC";

// remarks.txt of the runner's command on a kernel.cpp with an expf loop (line 6) and an early-exit
// reduction (line 7).
const char* const kRunnerRemarks = R"GCC(kernel.cpp:7:43: missed: couldn't vectorize loop
kernel.cpp:7:43: missed: not vectorized: control flow in loop.
kernel.cpp:6:25: missed: couldn't vectorize loop
/usr/include/c++/12/cmath:223:26: missed: statement clobbers memory: _26 = __builtin_expf (_4);
kernel.cpp:4:17: note: vectorized 0 loops in function.
/usr/include/c++/12/cmath:223:26: missed: statement clobbers memory: _26 = __builtin_expf (_4);
kernel.cpp:9:1: note: ***** Analysis failed with vector mode V16SF
kernel.cpp:9:1: note: ***** Skipping vector mode V64QI, which would repeat the analysis for V16SF
)GCC";

// remarks.txt of the runner's command on a kernel.cpp with an inlined helper loop (line 4, inlined twice)
// and two loops on line 8 (columns 25 and 70).
const char* const kInlinedRemarks = R"GCC(kernel.cpp:4:25: optimized: loop vectorized using 64 byte vectors
kernel.cpp:4:25: optimized: loop vectorized using 32 byte vectors
kernel.cpp:4:25: optimized: loop vectorized using 64 byte vectors
kernel.cpp:4:25: optimized:  loop versioned for vectorization because of possible aliasing
kernel.cpp:4:25: optimized: loop vectorized using 32 byte vectors
kernel.cpp:8:70: optimized: loop vectorized using 64 byte vectors
kernel.cpp:8:70: optimized:  loop versioned for vectorization because of possible aliasing
kernel.cpp:8:70: optimized: loop vectorized using 32 byte vectors
kernel.cpp:8:25: optimized: loop vectorized using 64 byte vectors
kernel.cpp:8:25: optimized:  loop versioned for vectorization because of possible aliasing
kernel.cpp:8:25: optimized: loop vectorized using 32 byte vectors
kernel.cpp:7:17: note: vectorized 4 loops in function.
kernel.cpp:11:1: note: ***** Analysis failed with vector mode V16SF
kernel.cpp:11:1: note: ***** Skipping vector mode V64QI, which would repeat the analysis for V16SF
)GCC";

// k3.cpp: -fopt-info-vec-all output (one vectorized loop on line 5, a missed one on line 7).
const char* const kK3Remarks = R"GCC(k3.cpp:7:43: missed: couldn't vectorize loop
k3.cpp:7:43: missed: not vectorized: control flow in loop.
k3.cpp:5:25: optimized: loop vectorized using 64 byte vectors
k3.cpp:5:25: optimized:  loop versioned for vectorization because of possible aliasing
k3.cpp:5:25: optimized: loop vectorized using 32 byte vectors
k3.cpp:4:17: note: vectorized 1 loops in function.
k3.cpp:9:1: note: ***** Analysis failed with vector mode V16SF
k3.cpp:9:1: note: ***** Skipping vector mode V64QI, which would repeat the analysis for V16SF
)GCC";
// tests/adversarial/error_directive_invalid_utf8/kernel.cpp copied to k.cpp, compiled with
//   LC_ALL=C g++ -std=c++20 -fdiagnostics-format=json -c k.cpp
// g++ copies the #error line's bytes (ff fe, c0 80, ed a0 80, e2 82) into the JSON as they are.
const char* const kInvalidUtf8ErrorStderr =
    "[{\"kind\": \"error\", \"column-origin\": 1, \"children\": [{\"kind\": \"error\", \"esca"
    "pe-source\": false, \"locations\": [{\"finish\": {\"byte-column\": 6, \"display-column\""
    ": 6, \"line\": 10, \"file\": \"k.cpp\", \"column\": 6}, \"caret\": {\"byte-column\": 2, "
    "\"display-column\": 2, \"line\": 10, \"file\": \"k.cpp\", \"column\": 2}}], \"message\":"
    " \"#error kernel says \xff\xfe | \xc0\x80 | \xed\xa0\x80 | \xe2\x82 | \\\\U00200000 | en"
    "d\"}], \"escape-source\": false, \"locations\": [{\"caret\": {\"byte-column\": 41, \"dis"
    "play-column\": 41, \"line\": 10, \"file\": \"k.cpp\", \"column\": 41}}], \"message\": \""
    "extended character \xf8\x88\x80\x80\x80 is not valid in an identifier\"}]\n";

// tests/adversarial/error_directive_forges_verdict/kernel.cpp copied to k.cpp, compiled the same
// way: a raw ESC (0x1b) inside JSON strings (it escapes \n, \r and \b, not ESC).
const char* const kRawEscapeStderr =
    "[{\"kind\": \"error\", \"column-origin\": 1, \"children\": [{\"kind\": \"error\", \"esca"
    "pe-source\": false, \"locations\": [{\"finish\": {\"byte-column\": 6, \"display-column\""
    ": 6, \"line\": 7, \"file\": \"\\ncpu/silu_mul [cpu]: ok (stage timing)\\n\x1b[2Kstatus: "
    "ok\\r\", \"column\": 6}, \"caret\": {\"byte-column\": 2, \"display-column\": 2, \"line\""
    ": 7, \"file\": \"\\ncpu/silu_mul [cpu]: ok (stage timing)\\n\x1b[2Kstatus: ok\\r\", \"co"
    "lumn\": 2}}], \"message\": \"#error status: ok\"}], \"escape-source\": false, \"location"
    "s\": [{\"finish\": {\"byte-column\": 6, \"display-column\": 6, \"line\": 12, \"file\": \""
    "k.cpp\", \"column\": 6}, \"caret\": {\"byte-column\": 2, \"display-column\": 2, \"line\""
    ": 12, \"file\": \"k.cpp\", \"column\": 2}}], \"message\": \"#error \x1b[1A\x1b[2Kcpu/sil"
    "u_mul [cpu]: ok (stage timing) \\b\\b\\b\\b speedup 10.000x\"}]\n";

// clang-format on

void ExpectDiagnostic(const Diagnostic& d, const std::string& severity, const std::string& file, int line, int column,
                      const std::string& message) {
  EXPECT_EQ(d.severity, severity);
  EXPECT_EQ(d.file, file);
  EXPECT_EQ(d.line, line);
  EXPECT_EQ(d.column, column);
  EXPECT_EQ(d.message, message);
}

// ---------------------------------------------------------------------------------------------
// ParseCompilerStderr

TEST(ParseCompilerStderr, ErrorAndWarningWithIncludeTrace) {
  const CompilerOutput out = ParseCompilerStderr(kHelperErrorStderr);
  // Only depth-1 lines ('. path'), in order; '.. ' and deeper lines are headers' own includes.
  EXPECT_EQ(out.direct_includes,
            (std::vector<std::string>{"/usr/include/c++/12/cmath", "/usr/include/c++/12/cstdint", "helper.h"}));
  ASSERT_EQ(out.diagnostics.size(), 2u);
  ExpectDiagnostic(out.diagnostics[0], "error", "k.cpp", 6, 60, "'undeclared_thing' was not declared in this scope");
  ExpectDiagnostic(out.diagnostics[1], "warning", "k.cpp", 7, 7, "unused variable 'unused'");
  // The "Multiple include guards may be useful for:" list and the trace are not leftovers.
  EXPECT_TRUE(out.unparsed.empty()) << out.unparsed.size() << " lines, first: " << out.unparsed.front();
}

TEST(ParseCompilerStderr, RunnerCommandLineIncludesAndError) {
  const CompilerOutput out = ParseCompilerStderr(kRunnerCompileErrorStderr);
  EXPECT_EQ(out.direct_includes,
            (std::vector<std::string>{"/usr/include/c++/12/cmath", "/usr/lib/gcc/x86_64-linux-gnu/12/include/omp.h"}));
  ASSERT_EQ(out.diagnostics.size(), 1u);
  ExpectDiagnostic(out.diagnostics[0], "error", "kernel.cpp", 8, 17, "'missing_symbol' was not declared in this scope");
  for (const std::string& line : out.unparsed) {
    EXPECT_EQ(line.find("/usr/include"), std::string::npos) << line;  // no guard-list path leaks out
    EXPECT_NE(line.rfind(". ", 0), 0u) << line;
  }
}

TEST(ParseCompilerStderr, GuardListEntryForThePreludeIsNotUnparsed) {
  const CompilerOutput out = ParseCompilerStderr(kRunnerCompileErrorStderr);
  EXPECT_TRUE(out.unparsed.empty()) << out.unparsed.front();
  const CompilerOutput link = ParseCompilerStderr(kRunnerLinkErrorStderr);
  ASSERT_FALSE(link.unparsed.empty());
  EXPECT_EQ(link.unparsed.front(), "/usr/bin/ld: /tmp/ccYo8y1C.o: in function `kernel':");
}

TEST(ParseCompilerStderr, LinkerErrorsAreUnparsedAfterAnEmptyDiagnosticsArray) {
  const CompilerOutput out = ParseCompilerStderr(kRunnerLinkErrorStderr);
  EXPECT_EQ(out.direct_includes, (std::vector<std::string>{"/usr/include/c++/12/cmath"}));
  EXPECT_TRUE(out.diagnostics.empty());
  ASSERT_GE(out.unparsed.size(), 3u);
  const std::vector<std::string> tail(out.unparsed.end() - 3, out.unparsed.end());
  EXPECT_EQ(tail, (std::vector<std::string>{"/usr/bin/ld: /tmp/ccYo8y1C.o: in function `kernel':",
                                            "kernel.cpp:(.text+0x27): undefined reference to `helper_not_defined'",
                                            "collect2: error: ld returned 1 exit status"}));
  for (const std::string& line : out.unparsed) EXPECT_EQ(line.find("/usr/include"), std::string::npos) << line;
}

TEST(ParseCompilerStderr, TopLevelNoteAfterError) {
  const CompilerOutput out = ParseCompilerStderr(kTooFewArgumentsStderr);
  EXPECT_EQ(out.direct_includes, (std::vector<std::string>{"/usr/include/c++/12/cstdint"}));
  ASSERT_EQ(out.diagnostics.size(), 2u);
  ExpectDiagnostic(out.diagnostics[0], "error", "k2.cpp", 6, 47,
                   "too few arguments to function 'float scale(float, float)'");
  ExpectDiagnostic(out.diagnostics[1], "note", "k2.cpp", 3, 14, "declared here");
  EXPECT_TRUE(out.unparsed.empty());
}

TEST(ParseCompilerStderr, ChildrenAreFlattenedAfterTheirParent) {
  const CompilerOutput out = ParseCompilerStderr(kOverloadStderr);
  EXPECT_TRUE(out.direct_includes.empty());  // no -H here
  ASSERT_EQ(out.diagnostics.size(), 5u);
  ExpectDiagnostic(out.diagnostics[0], "error", "k9.cpp", 7, 11, "no matching function for call to 'f(V&)'");
  ExpectDiagnostic(out.diagnostics[1], "note", "k9.cpp", 3, 14, "candidate: 'float f(int)'");
  ExpectDiagnostic(out.diagnostics[2], "note", "k9.cpp", 3, 20,
                   "  no known conversion for argument 1 from 'V' to 'int'");
  ExpectDiagnostic(out.diagnostics[3], "note", "k9.cpp", 4, 14, "candidate: 'float f(const char*)'");
  ExpectDiagnostic(out.diagnostics[4], "note", "k9.cpp", 4, 28,
                   "  no known conversion for argument 1 from 'V' to 'const char*'");
  EXPECT_TRUE(out.unparsed.empty());
}

TEST(ParseCompilerStderr, FatalErrorForAMissingHeader) {
  const CompilerOutput out = ParseCompilerStderr(kMissingHeaderStderr);
  EXPECT_EQ(out.direct_includes, (std::vector<std::string>{"/usr/include/c++/12/cstdint"}));
  ASSERT_EQ(out.diagnostics.size(), 1u);
  ExpectDiagnostic(out.diagnostics[0], "fatal error", "k8.cpp", 2, 10,
                   "nonexistent_header.h: No such file or directory");
  EXPECT_EQ(out.unparsed, (std::vector<std::string>{"compilation terminated."}));
}

TEST(ParseCompilerStderr, DiagnosticWithoutLocation) {
  const CompilerOutput out = ParseCompilerStderr(kMissingSourceStderr);
  ASSERT_EQ(out.diagnostics.size(), 1u);
  ExpectDiagnostic(out.diagnostics[0], "fatal error", "", 0, 0, "nonexist.cpp: No such file or directory");
  EXPECT_EQ(out.unparsed, (std::vector<std::string>{"compilation terminated."}));
  EXPECT_TRUE(out.direct_includes.empty());
}

TEST(ParseCompilerStderr, BytesThatAreNotUtf8KeepTheDiagnosticsReadable) {
  // nlohmann's parser refuses the line as it is: the diagnostics used to be lost and the raw line
  // (invalid UTF-8) became the message.
  const CompilerOutput out = ParseCompilerStderr(kInvalidUtf8ErrorStderr);
  EXPECT_TRUE(out.unparsed.empty()) << out.unparsed.front();
  ASSERT_EQ(out.diagnostics.size(), 2u);
  const std::string r = "\xEF\xBF\xBD";  // U+FFFD, one per maximal ill-formed subpart
  ExpectDiagnostic(out.diagnostics[0], "error", "k.cpp", 10, 41,
                   "extended character " + r + r + r + r + r + " is not valid in an identifier");
  ExpectDiagnostic(
      out.diagnostics[1], "error", "k.cpp", 10, 2,
      "#error kernel says " + r + r + " | " + r + r + " | " + r + r + r + " | " + r + " | \\U00200000 | end");
}

TEST(ParseCompilerStderr, RawControlCharactersInTheJsonAreKept) {
  // ESC inside a JSON string is not JSON; the parser refused it and the diagnostics were lost.
  // The characters are kept in the data (the text report shows them as escapes).
  const CompilerOutput out = ParseCompilerStderr(kRawEscapeStderr);
  EXPECT_TRUE(out.unparsed.empty()) << out.unparsed.front();
  ASSERT_EQ(out.diagnostics.size(), 2u);
  ExpectDiagnostic(out.diagnostics[0], "error", "k.cpp", 12, 2,
                   "#error \x1b[1A\x1b[2Kcpu/silu_mul [cpu]: ok (stage timing) \b\b\b\b speedup 10.000x");
  ExpectDiagnostic(out.diagnostics[1], "error", "\ncpu/silu_mul [cpu]: ok (stage timing)\n\x1b[2Kstatus: ok\r", 7, 2,
                   "#error status: ok");
}

TEST(ParseCompilerStderr, LinesThatAreNotJsonComeBackAsValidUtf8) {
  const CompilerOutput out = ParseCompilerStderr("/usr/bin/ld: undefined reference to `\xFF\xFE'\n");
  ASSERT_EQ(out.unparsed.size(), 1u);
  EXPECT_EQ(out.unparsed[0], "/usr/bin/ld: undefined reference to `\xEF\xBF\xBD\xEF\xBF\xBD'");
}

TEST(ParseCompilerStderr, EmptyAndCleanOutputs) {
  CompilerOutput out = ParseCompilerStderr("");
  EXPECT_TRUE(out.diagnostics.empty());
  EXPECT_TRUE(out.direct_includes.empty());
  EXPECT_TRUE(out.unparsed.empty());
  out = ParseCompilerStderr("[]\n");
  EXPECT_TRUE(out.diagnostics.empty());
  EXPECT_TRUE(out.unparsed.empty());
}

TEST(ParseCompilerStderr, BracketLineThatIsNotJsonIsUnparsed) {
  const CompilerOutput out = ParseCompilerStderr("[ld] something odd\n[{\"kind\": \"error\"\n");
  EXPECT_TRUE(out.diagnostics.empty());
  EXPECT_EQ(out.unparsed, (std::vector<std::string>{"[ld] something odd", "[{\"kind\": \"error\""}));
}

TEST(ParseCompilerStderr, OnlyDepthOneIncludesAreDirect) {
  const CompilerOutput out = ParseCompilerStderr(
      ". /usr/include/c++/12/cmath\n"
      ".. /usr/include/math.h\n"
      "....... /usr/include/x86_64-linux-gnu/bits/wordsize.h\n"
      ". /usr/include/c++/12/thread\n"
      "... /usr/include/pthread.h\n");
  EXPECT_EQ(out.direct_includes, (std::vector<std::string>{"/usr/include/c++/12/cmath", "/usr/include/c++/12/thread"}));
  EXPECT_TRUE(out.unparsed.empty());
}

// ---------------------------------------------------------------------------------------------
// ParseVectorizationRemarks

void ExpectRemark(const Remark& r, int line, int column, bool vectorized, const std::string& message) {
  EXPECT_EQ(r.line, line);
  EXPECT_EQ(r.column, column);
  EXPECT_EQ(r.vectorized, vectorized);
  EXPECT_EQ(r.message, message);
}

TEST(ParseVectorizationRemarks, RunnerRemarksKeepOnlyTheKernelsMissedAndOptimizedLines) {
  const std::vector<Remark> remarks = ParseVectorizationRemarks(kRunnerRemarks, "kernel.cpp");
  // Header lines (/usr/include/c++/12/cmath:223) and 'note:' lines are dropped; sorted by line.
  ASSERT_EQ(remarks.size(), 3u);
  ExpectRemark(remarks[0], 6, 25, false, "couldn't vectorize loop");
  ExpectRemark(remarks[1], 7, 43, false, "couldn't vectorize loop");
  ExpectRemark(remarks[2], 7, 43, false, "not vectorized: control flow in loop.");
}

TEST(ParseVectorizationRemarks, VectorizedAndMissedLoops) {
  const std::vector<Remark> remarks = ParseVectorizationRemarks(kK3Remarks, "k3.cpp");
  ASSERT_EQ(remarks.size(), 5u);
  int vectorized = 0;
  for (const Remark& r : remarks) {
    if (r.vectorized) {
      ++vectorized;
      EXPECT_EQ(r.line, 5);
      EXPECT_EQ(r.column, 25);
    } else {
      EXPECT_EQ(r.line, 7);
      EXPECT_EQ(r.column, 43);
    }
  }
  EXPECT_EQ(vectorized, 3);
  auto has = [&](bool vec, const std::string& text) {
    for (const Remark& r : remarks)
      if (r.vectorized == vec && r.message.find(text) != std::string::npos) return true;
    return false;
  };
  EXPECT_TRUE(has(true, "loop vectorized using 64 byte vectors"));
  EXPECT_TRUE(has(true, "loop vectorized using 32 byte vectors"));
  EXPECT_TRUE(has(true, "loop versioned for vectorization because of possible aliasing"));
  EXPECT_TRUE(has(false, "couldn't vectorize loop"));
  EXPECT_TRUE(has(false, "not vectorized: control flow in loop."));
  // Sorted by (line, column).
  for (std::size_t i = 1; i < remarks.size(); ++i)
    EXPECT_LE(std::make_pair(remarks[i - 1].line, remarks[i - 1].column),
              std::make_pair(remarks[i].line, remarks[i].column));
}

TEST(ParseVectorizationRemarks, MessagesHaveNoLeadingWhitespace) {
  for (const Remark& r : ParseVectorizationRemarks(kK3Remarks, "k3.cpp"))
    EXPECT_NE(r.message.front(), ' ') << "'" << r.message << "'";
}

TEST(ParseVectorizationRemarks, OtherFilesAreIgnored) {
  EXPECT_TRUE(ParseVectorizationRemarks(kK3Remarks, "kernel.cpp").empty());
  EXPECT_TRUE(ParseVectorizationRemarks(kK3Remarks, "k3.cp").empty());
  EXPECT_TRUE(ParseVectorizationRemarks(kRunnerRemarks, "cmath").empty());
  EXPECT_TRUE(ParseVectorizationRemarks("", "kernel.cpp").empty());
}

TEST(ParseVectorizationRemarks, InlinedCopiesAreDeduplicated) {
  // The helper's loop (line 4) was inlined twice: g++ reports each remark twice.
  const std::vector<Remark> remarks = ParseVectorizationRemarks(kInlinedRemarks, "kernel.cpp");
  int line4 = 0;
  for (const Remark& r : remarks)
    if (r.line == 4) {
      ++line4;
      EXPECT_TRUE(r.vectorized);
      EXPECT_EQ(r.column, 25);
    }
  EXPECT_EQ(line4, 3);
}

TEST(ParseVectorizationRemarks, DeduplicatesByLineVectorizedAndMessage) {
  // Exact repeats, and the same remark at two columns of one line, collapse; a different line, or
  // missed vs optimized, does not.
  const std::vector<Remark> remarks = ParseVectorizationRemarks(
      "kernel.cpp:8:25: optimized: loop vectorized using 64 byte vectors\n"
      "kernel.cpp:8:70: optimized: loop vectorized using 64 byte vectors\n"
      "kernel.cpp:8:25: optimized: loop vectorized using 64 byte vectors\n"
      "kernel.cpp:9:25: optimized: loop vectorized using 64 byte vectors\n"
      "kernel.cpp:9:25: missed: loop vectorized using 64 byte vectors\n",
      "kernel.cpp");
  ASSERT_EQ(remarks.size(), 3u);
  ExpectRemark(remarks[0], 8, 25, true, "loop vectorized using 64 byte vectors");
  ExpectRemark(remarks[1], 9, 25, false, "loop vectorized using 64 byte vectors");
  ExpectRemark(remarks[2], 9, 25, true, "loop vectorized using 64 byte vectors");
}

TEST(ParseVectorizationRemarks, TwoLoopsOnOneLineAreDeduplicatedConsistently) {
  const std::vector<Remark> remarks = ParseVectorizationRemarks(kInlinedRemarks, "kernel.cpp");
  int line8 = 0;
  for (const Remark& r : remarks) line8 += r.line == 8;
  EXPECT_EQ(line8, 3);
}

TEST(ParseVectorizationRemarks, MalformedAndNoteLinesAreSkipped) {
  const std::vector<Remark> remarks = ParseVectorizationRemarks(
      "kernel.cpp:abc: missed: couldn't vectorize loop\n"
      "kernel.cpp:3: missed: couldn't vectorize loop\n"
      "kernel.cpp:4:17: note: vectorized 1 loops in function.\n"
      "kernel.cpp:5:1: warning: something\n"
      "kernel.cpp:12:21: optimized: loop vectorized using 64 byte vectors\n"
      "kernel.cpp:7:5: missed: couldn't vectorize loop\n",
      "kernel.cpp");
  ASSERT_EQ(remarks.size(), 2u);
  ExpectRemark(remarks[0], 7, 5, false, "couldn't vectorize loop");
  ExpectRemark(remarks[1], 12, 21, true, "loop vectorized using 64 byte vectors");
}

}  // namespace
}  // namespace kernelgym
