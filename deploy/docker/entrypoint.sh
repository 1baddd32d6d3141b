#!/bin/sh
# `sounding <args>`, except that an orchestrator given SOUNDING_RAY_ADDRESS first joins that Ray
# cluster as a node of its own with no CPUs (a Ray driver runs on a node of the cluster); the
# strategy workers go to the RayCluster's worker pods, which offer the resources named in
# SOUNDING_RETRIEVAL__WORKER_RESOURCES.
set -eu
if [ "${1:-}" = serve ] && [ $# -eq 1 ] && [ -n "${SOUNDING_RAY_ADDRESS:-}" ]; then
  ray start --address="$SOUNDING_RAY_ADDRESS" --num-cpus=0 --disable-usage-stats
fi
exec sounding "$@"
