#!/usr/bin/env bash
# Build mmcv-full 1.7.2's CPU ops (mmcv._ext) against current torch, in its own venv.
#
# Why: the compiled reference for bench/compare_ops_compiled.py. mmcv-full 1.x has no
# wheels for torch 2.x and its setup.py asks for -std=c++14/c++17 while torch 2.14's
# headers need C++20; this script raises the standard and builds the CPU kernels only
# (MMCV_WITH_OPS=1 FORCE_CUDA=0). Objects are cached by ninja under build/, so a rerun
# after a failure only recompiles what changed.
#
# Usage: bash bench/build_mmcv_full_cpu.sh  (env: VENV, WORK, MAX_JOBS, NICE)
set -euo pipefail
VENV=${VENV:-/work/venv-mmcv-full}
WORK=${WORK:-/work/mmcv-full-build}
export MAX_JOBS=${MAX_JOBS:-2}
NICE=${NICE:-10}

[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
PIP="$VENV/bin/pip"
# setuptools<80: mmcv's setup.py imports pkg_resources.
"$PIP" install -q torch==2.14.1 torchvision==0.29.1 numpy "setuptools<80" wheel ninja \
    addict yapf packaging pyyaml opencv-python-headless pytest scipy

mkdir -p "$WORK" && cd "$WORK"
[ -f mmcv-full-1.7.2.tar.gz ] || "$PIP" download -q --no-deps --no-binary :all: \
    --no-build-isolation mmcv-full==1.7.2 -d .
[ -d mmcv-full-1.7.2 ] || tar xzf mmcv-full-1.7.2.tar.gz
cd mmcv-full-1.7.2

# The one source change: every -std=c++14 / c++17 flag becomes c++20.
sed -i -e "s/std=c++14/std=c++20/g; s/std=c++17/std=c++20/g" \
       -e "s#/std:c++14#/std:c++20#g; s#/std:c++17#/std:c++20#g" setup.py
grep -n "c++20" setup.py

# Python's own compile flags without debug info (-g costs a third of the compile time on 2
# cores). CFLAGS replaces them rather than adding to them, so -DNDEBUG -O3 are spelled out.
CFLAGS="${CFLAGS:--DNDEBUG -O3 -fwrapv -Wall -g0}" MMCV_WITH_OPS=1 FORCE_CUDA=0 nice -n "$NICE" "$VENV/bin/python" setup.py build_ext --inplace
# Make the in-place build importable from the venv (no second compile via pip).
SITE=$("$VENV/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
echo "$PWD" > "$SITE/mmcv_full_src.pth"
"$VENV/bin/python" -c "import mmcv, mmcv._ext as e; print(mmcv.__version__, e.__file__)"
