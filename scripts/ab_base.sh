#!/usr/bin/env bash
# Packs the sources of base revisions for the device's `ab` step (scripts/device.sh): the
# backend's check built from each is timed against this tree's, alternating, in one device call.
#   scripts/ab_base.sh <rev> [<rev> ...]   writes .ab/base.tar and .ab/base.rev for the first, and
#                                          .ab/v<i>.tar / .ab/v<i>.rev for the others (ignored; carry .ab)
# Several revisions time several changes apart in one call (e.g. main, main + patch 1, main +
# patches 1 and 2, this tree with all of them): each column's ratio is to the first revision.
# A revision may name patches to apply on it: REV+PATCH[+PATCH...] (e.g.
# main+docs/prepared/s39_stages_tf32.patch), with no commit made.
set -euo pipefail
[[ $# -ge 1 ]] || { echo "usage: scripts/ab_base.sh <rev> [<rev> ...]" >&2; exit 2; }
cd "$(git rev-parse --show-toplevel)"
rm -rf .ab && mkdir -p .ab
# What a side's check is built from (git pathspecs; globs in a patched copy).
paths=(CMakeLists.txt include src reference tools bench/CMakeLists.txt "bench/*.cpp" "bench/*.txt")
i=0
for rev in "$@"; do
  name=base && [[ $i -gt 0 ]] && name=v$i
  IFS=+ read -r -a parts <<<"$rev"
  if [[ ${#parts[@]} -gt 1 ]]; then  # REV+PATCH...: the patches applied to REV's files
    tmp=$(mktemp -d)
    label=$(git rev-parse --short "${parts[0]}")
    git archive --format=tar "${parts[0]}" | tar -xf - -C "$tmp"  # (whole: a patch may touch docs too)
    for patch in "${parts[@]:1}"; do
      (cd "$tmp" && git apply "$OLDPWD/$patch") || { echo "$patch: does not apply" >&2; exit 1; }
      label+="+$(basename "$patch")"
    done
    # shellcheck disable=SC2068  # (the bench globs expand in the patched copy)
    (cd "$tmp" && tar -cf - ${paths[@]}) >".ab/$name.tar"
    rm -rf "$tmp"
    echo "$label" >".ab/$name.rev"
  else
    git archive --format=tar -o ".ab/$name.tar" "$rev" "${paths[@]}"
    git rev-parse --short "$rev" >".ab/$name.rev"
  fi
  echo "wrote .ab/$name.tar ($(du -h ".ab/$name.tar" | cut -f1)) for $(cat ".ab/$name.rev")"
  i=$((i + 1))
done
echo "carry .ab to the device"
