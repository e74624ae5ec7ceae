#!/usr/bin/env bash
# Packs the sources of base revisions for the device's `ab` step (scripts/device.sh): the
# backend's check built from each is timed against this tree's, alternating, in one device call.
#   scripts/ab_base.sh <rev> [<rev> ...]   writes .ab/base.tar and .ab/base.rev for the first, and
#                                          .ab/v<i>.tar / .ab/v<i>.rev for the others (ignored; carry .ab)
# Several revisions time several changes apart in one call (e.g. main, main + patch 1, main +
# patches 1 and 2, this tree with all of them): each column's ratio is to the first revision.
set -euo pipefail
[[ $# -ge 1 ]] || { echo "usage: scripts/ab_base.sh <rev> [<rev> ...]" >&2; exit 2; }
cd "$(git rev-parse --show-toplevel)"
rm -rf .ab && mkdir -p .ab
i=0
for rev in "$@"; do
  name=base && [[ $i -gt 0 ]] && name=v$i
  git archive --format=tar -o ".ab/$name.tar" "$rev" CMakeLists.txt include src reference tools bench/CMakeLists.txt \
    "bench/*.cpp" "bench/*.txt"
  git rev-parse --short "$rev" >".ab/$name.rev"
  echo "wrote .ab/$name.tar ($(du -h ".ab/$name.tar" | cut -f1)) for $(cat ".ab/$name.rev")"
  i=$((i + 1))
done
echo "carry .ab to the device"
