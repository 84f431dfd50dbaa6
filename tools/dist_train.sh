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
# torchrun sets OMP_NUM_THREADS=1 for several processes per node, with a banner saying so;
# set it here the same way (export OMP_NUM_THREADS=N before this script to choose).
if [ "$NPROC" -gt 1 ] 2>/dev/null; then
    export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
fi
# A mistake in the config or --cfg-options is checked inside the run, on every rank before
# its first iteration, and printed in one line by one rank; the others stop with exit
# status 2 (tools/train.py announce_mistake). No separate checking process: it would build
# the model and the datasets once more. So torchrun, minus its report of failed processes
# (the agent's log lines and the ChildFailedError) when they stopped on a user mistake.
exec "${PY[@]}" -c '
import logging, sys
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
from torch.distributed.run import main

class HoldFailureLines(logging.Filter):
    """The agent lines about failed workers: shown unless they stopped on a user mistake."""
    TEMPLATES = ("failed (exitcode: %s)", "Sending process %s closing signal %s")
    held = []

    def filter(self, record):
        if str(record.msg).startswith(self.TEMPLATES):
            self.held.append(record)
            return False
        return True

agent = logging.getLogger("torch.distributed.elastic.multiprocessing.api")
hold = HoldFailureLines()
agent.addFilter(hold)
try:
    main()
except BaseException as e:
    if isinstance(e, ChildFailedError) and 2 in {f.exitcode for f in e.failures.values()}:
        sys.exit(2)
    agent.removeFilter(hold)
    for record in hold.held:
        agent.handle(record)
    raise
' "${RDZV[@]}" --nproc_per_node="$NPROC" "$TOOLS/train.py" "$CONFIG" --launcher pytorch "$@"
