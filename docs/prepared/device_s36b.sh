#!/usr/bin/env bash
# Session 36, call 2 (prepared in session 35, ~8.5 min; carry .deps .whl): the GPU suites on the
# fp16 operands for bf16 inputs (s36_fp16_operands.patch, after device_s36a.sh showed it worth
# landing). `bash docs/prepared/device_s36b.sh <commit>` on the patched tree.
# What to look for: ctest -L gpu 9 of 9 (test_checkpoints: every mode keeps the same state
# arithmetic, so the rows stay bitwise a prefix call's; test_forward's vscale cases: v and the
# initial states at 1000x with g = 0 and 256x with beta = 2 stay within the bf16 bound on fp16
# operands), pytest 492 passed (the bf16 comparisons with fla now ~1.7e-3 against its ~4e-3).
set -u
export GDN_COMMIT=$1
GDN_PYTEST_TIMEOUT=320 bash scripts/device.sh build,pybuild,test,pytest
grep -E 'vscale|FAILED|Failure' "${OUT:-/tmp/gdn-out}/ctest.log" | head -20 >> "${OUT:-/tmp/gdn-out}/summary.txt"
