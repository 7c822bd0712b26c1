# Every dependency comes from a Debian 12 package (scripts/install_deps.sh installs them).
find_package(Threads REQUIRED)
find_package(PkgConfig REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)        # nlohmann_json::nlohmann_json (task files, result JSON)
find_package(CLI11 REQUIRED)                     # CLI11::CLI11 (command line)
find_package(spdlog REQUIRED)                    # spdlog::spdlog (logging)
find_package(msgpack-cxx CONFIG QUIET)           # upstream name for msgpack-cxx >= 6
if(msgpack-cxx_FOUND)
  set(KERNELGYM_MSGPACK_TARGET msgpack-cxx)
else()
  find_package(msgpack 4 CONFIG REQUIRED)         # Debian 12 (4.1.3): target msgpackc-cxx
  set(KERNELGYM_MSGPACK_TARGET msgpackc-cxx)
endif()
find_package(cppzmq REQUIRED)                    # cppzmq (ZeroMQ C++ bindings over libzmq: client/server transport)
find_package(OpenSSL REQUIRED)                   # OpenSSL::Crypto (SHA-256: the compile cache, task digests)
pkg_check_modules(SECCOMP REQUIRED IMPORTED_TARGET libseccomp)   # PkgConfig::SECCOMP
pkg_check_modules(LIBELF REQUIRED IMPORTED_TARGET libelf)        # PkgConfig::LIBELF (symbol policy)
find_package(CURL REQUIRED)                      # CURL::libcurl (the LLM policies' chat-completions client)
# cpp-httplib: the scripted chat-completions endpoint the LLM policies are tested against.
pkg_check_modules(HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)  # PkgConfig::HTTPLIB

# libtorch is only linked by the harness (the process that runs the reference) and the tests
# that check it; nothing that forks candidates loads it (forking a torch process costs ~5 ms).
find_package(Torch REQUIRED)

find_program(KERNELGYM_BWRAP bwrap)
if(NOT KERNELGYM_BWRAP)
  message(WARNING "bubblewrap not found: compiles and kernel runs will not be namespaced")
endif()
