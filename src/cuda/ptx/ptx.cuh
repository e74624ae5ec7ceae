// Every inline-PTX wrapper of the CUDA backend, by kind:
//   copy.cuh   cp.async (16 / 8 / 4 bytes, commit, wait), shared-memory addresses (a cluster
//              peer's too)
//   mma.cuh    ldmatrix, stmatrix, mma.sync m16n8k16 and m16n8k8 (tf32)
//   wgmma.cuh  warpgroup MMA (sm_90a): descriptors, the products, fence / commit / wait
//   sync.cuh   programmatic dependent launch, block barriers on mbarriers, the cluster barrier
#pragma once

#include "cuda/ptx/copy.cuh"
#include "cuda/ptx/mma.cuh"
#include "cuda/ptx/sync.cuh"
#include "cuda/ptx/wgmma.cuh"
