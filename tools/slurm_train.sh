#!/usr/bin/env bash
# Train on a Slurm cluster, one task per GPU (the mmcv-era slurm_train.sh interface):
#
#   [GPUS=16] [GPUS_PER_NODE=8] [CPUS_PER_TASK=5] [SRUN_ARGS="..."] \
#       tools/slurm_train.sh PARTITION JOB_NAME CONFIG WORK_DIR [tools/train.py arguments...]
#
# Each task reads its rank from SLURM_PROCID, the master from SLURM_NODELIST
# (PORT, or dist_params.port, default 29500). --kill-on-bad-exit=1 ends the whole
# job when any task dies, even one that could not report its error.
set -euo pipefail

if [ $# -lt 4 ]; then
    echo "usage: $0 PARTITION JOB_NAME CONFIG WORK_DIR [tools/train.py arguments...]" >&2
    exit 2
fi
PARTITION=$1
JOB_NAME=$2
CONFIG=$3
WORK_DIR=$4
shift 4
GPUS=${GPUS:-8}
GPUS_PER_NODE=${GPUS_PER_NODE:-$(( GPUS < 8 ? GPUS : 8 ))}
CPUS_PER_TASK=${CPUS_PER_TASK:-5}
SRUN_ARGS=${SRUN_ARGS:-}
PYTHON=${PYTHON:-python}
TOOLS=$(cd "$(dirname "$0")" && pwd)
if [ -n "${PORT:-}" ]; then
    export MASTER_PORT=$PORT
fi

export PYTHONPATH="$TOOLS/..${PYTHONPATH:+:$PYTHONPATH}"
# SRUN_ARGS is split into words on purpose (e.g. SRUN_ARGS="--qos=high --time=2:00:00").
# shellcheck disable=SC2086
srun -p "$PARTITION" \
    --job-name="$JOB_NAME" \
    --gres=gpu:"$GPUS_PER_NODE" \
    --ntasks="$GPUS" \
    --ntasks-per-node="$GPUS_PER_NODE" \
    --cpus-per-task="$CPUS_PER_TASK" \
    --kill-on-bad-exit=1 \
    $SRUN_ARGS \
    "$PYTHON" -u "$TOOLS/train.py" "$CONFIG" --work-dir="$WORK_DIR" --launcher=slurm "$@"
