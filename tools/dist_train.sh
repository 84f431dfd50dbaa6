#!/usr/bin/env bash
# Train on the GPUs (or CPU processes) of this node with torchrun:
#
#   tools/dist_train.sh CONFIG NPROC [tools/train.py arguments...]
#   tools/dist_train.sh configs/digits/lenet_digits.py 2 --work-dir work_dirs/digits_2p
#
# Several nodes: run it on every node with the same MASTER_ADDR and PORT,
#   NNODES=2 NODE_RANK=0 MASTER_ADDR=10.0.0.1 PORT=29500 tools/dist_train.sh CONFIG 8
#   NNODES=2 NODE_RANK=1 MASTER_ADDR=10.0.0.1 PORT=29500 tools/dist_train.sh CONFIG 8
# On one node without PORT, torchrun picks a free port (two jobs do not collide).
# PYTHON selects the interpreter, with arguments if need be (default: python), e.g.
#   PYTHON="python -X faulthandler" tools/dist_train.sh CONFIG 2
set -euo pipefail

if [ $# -lt 2 ]; then
    echo "usage: $0 CONFIG NPROC [tools/train.py arguments...]" >&2
    exit 2
fi
CONFIG=$1
NPROC=$2
shift 2
NNODES=${NNODES:-1}
NODE_RANK=${NODE_RANK:-0}
MASTER_ADDR=${MASTER_ADDR:-127.0.0.1}
read -r -a PY <<< "${PYTHON:-python}"  # a command with arguments: one word each
TOOLS=$(cd "$(dirname "$0")" && pwd)

if [ "$NNODES" = 1 ] && [ -z "${PORT:-}" ]; then
    RDZV=(--standalone)
else
    RDZV=(--nnodes="$NNODES" --node_rank="$NODE_RANK" --master_addr="$MASTER_ADDR"
          --master_port="${PORT:-29500}")
fi

# PYTHONPATH: the configs' custom_imports can name modules of the repository root.
export PYTHONPATH="$TOOLS/..${PYTHONPATH:+:$PYTHONPATH}"
# A mistake in the config or --cfg-options: one clear line here, before torchrun would
# report it again as a failed process of every rank.
"${PY[@]}" "$TOOLS/train.py" "$CONFIG" --check-config "$@" || exit $?
# torchrun, minus its report of failed processes when they stopped on a user mistake
# (exit status 2): the first rank printed that in one line already.
exec "${PY[@]}" -c '
import sys
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
from torch.distributed.run import main
try:
    main()
except ChildFailedError as e:
    if 2 in {f.exitcode for f in e.failures.values()}:
        sys.exit(2)
    raise
' "${RDZV[@]}" --nproc_per_node="$NPROC" "$TOOLS/train.py" "$CONFIG" --launcher pytorch "$@"
