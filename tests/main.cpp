// The test executables' main: GoogleTest's, plus one flag for CTest. `--gdn_gpu_suite` marks a
// run of the CUDA suites alone (the `*_gpu` CTest entries): without a usable CUDA device there is
// nothing to run, so it prints one line and exits with kSkipExitCode, which CTest reports as
// skipped (SKIP_RETURN_CODE in tests/CMakeLists.txt) instead of as passed. On a machine with a
// device the suite runs as usual, and a test that skips (a head size not in the backend's table)
// leaves the suite counted as run.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>

#include "gdn/gdn.h"

namespace {
constexpr int kSkipExitCode = 77;  // the Automake convention
}

int main(int argc, char** argv) {
  bool gpu_suite = false;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--gdn_gpu_suite") == 0)
      gpu_suite = true;
    else
      argv[kept++] = argv[i];
  }
  argc = kept;
  if (gpu_suite && !gdn::cuda_available()) {
    std::printf("gdn: no CUDA device (or gdn was built without CUDA): GPU suite skipped\n");
    return kSkipExitCode;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
