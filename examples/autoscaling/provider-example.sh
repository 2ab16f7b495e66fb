#!/bin/sh
# A NodePool provider script (spec.provider: exec:/path/to/this/script), the contract in one
# place: the autoscaler runs `SCRIPT create` or `SCRIPT delete` with a JSON description on
# stdin, like Slurm's ResumeProgram/SuspendProgram, and waits (5 minutes at most) for it:
#   {"action": "create", "pool": "h100-spot", "gpuType": "H100-80GB", "gpusPerNode": 8,
#    "billing": "spot", "nodes": ["h100-spot-0", "h100-spot-1"], "labels": {...},
#    "server": "https://cp:8443", "caFile": "...", "bootstrapTokenFile": "..."}
# Exit 0 when the machines are on their way (not when they are Ready: they join by themselves,
# running `gpucloud agent run --pool POOL --node-name NAME` with the bootstrap token); any other
# exit status fails the request (the pool backs off and the next pool is tried), with the end
# of stderr in the reason. `create` may print {"nodes": [...]}, the machines it did create:
# fewer than asked is a failure. `delete` deletes the named machines (some may never have come
# up). This example only logs what it is asked; replace the two branches with your cloud's CLI.
set -eu
input=$(cat)
log=${PROVIDER_LOG:-/tmp/gpucloud-provider.log}
case "$1" in
  create)
    echo "$(date -u +%FT%TZ) create $input" >> "$log"
    # e.g. for each node: aws ec2 run-instances ... --user-data "gpucloud agent run --server ..."
    ;;
  delete)
    echo "$(date -u +%FT%TZ) delete $input" >> "$log"
    # e.g. aws ec2 terminate-instances --instance-ids ...
    ;;
  *)
    echo "usage: $0 create|delete < request.json" >&2
    exit 2
    ;;
esac
