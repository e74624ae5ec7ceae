#!/usr/bin/env bash
# Packs the sources of a base revision for the device's `ab` step (scripts/device.sh): the
# backend's check built from <rev> is timed against this tree's, alternating, in one device call.
#   scripts/ab_base.sh <rev>      writes .ab/base.tar and .ab/base.rev (ignored; carry .ab)
set -euo pipefail
rev=${1:?usage: scripts/ab_base.sh <rev>}
cd "$(git rev-parse --show-toplevel)"
mkdir -p .ab
git archive --format=tar -o .ab/base.tar "$rev" CMakeLists.txt include src reference tools bench/CMakeLists.txt "bench/*.cpp" "bench/*.txt"
git rev-parse --short "$rev" >.ab/base.rev
echo "wrote .ab/base.tar ($(du -h .ab/base.tar | cut -f1)) for $(cat .ab/base.rev); carry .ab to the device"
