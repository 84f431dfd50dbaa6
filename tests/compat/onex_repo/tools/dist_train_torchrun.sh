#!/usr/bin/env bash
GPUS=$1
PORT=${PORT:-29500}
torchrun --nproc_per_node=$GPUS --master_port=$PORT $(dirname "$0")/train.py --launcher pytorch ${@:2}
