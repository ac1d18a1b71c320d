#!/usr/bin/env bash
# Installs what loom needs to build and test, when it is missing. Idempotent:
# a machine that has everything installs nothing.
set -euo pipefail
pkgs=(libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools libonnx-dev libprotobuf-dev
      protobuf-compiler libfmt-dev libtomlplusplus-dev nlohmann-json3-dev libgtest-dev cmake ninja-build ccache libopenblas-dev python3)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
