# Cross build for aarch64 Linux with Debian 12's cross compilers; programs run under user-mode qemu.
# Used by tests/run-aarch64.sh, which also passes where the arm64 packages' CMake configs live.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

# Plain qemu-aarch64, no -L and no LD_LIBRARY_PATH: the binaries ask for the multiarch loader
# (/lib/ld-linux-aarch64.so.1, from libc6:arm64), which finds the arm64 libraries by itself.
# Pointing qemu at the cross toolchain's libc instead mixes two libcs, and OpenMP programs hang.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64)

# List the gtest cases when ctest runs rather than after each link, so that building does not
# start every test binary under the emulator.
set(CMAKE_GTEST_DISCOVER_TESTS_DISCOVERY_MODE PRE_TEST)
