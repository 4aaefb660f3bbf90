#!/usr/bin/env bash
# keras-tuner's distributed mode on one machine: a chief (the oracle) and two
# workers on loopback share one search directory. Checks that the search
# finishes its trials and that no trial is trained twice.
#   bash benchmarks/distributed_tune.sh DATA_DIR [OUT_DIR] [TRIALS] [EPOCHS]
set -euo pipefail
data=${1:?usage: distributed_tune.sh DATA_DIR [OUT_DIR] [TRIALS] [EPOCHS]}
out=${2:-/tmp/genni-distributed-tune}
trials=${3:-4}
epochs=${4:-1}
port=${KERASTUNER_ORACLE_PORT:-8123}
genni=${GENNI:-genni}
rm -rf "$out"
mkdir -p "$out/logs"
export KERASTUNER_ORACLE_IP=127.0.0.1 KERASTUNER_ORACLE_PORT=$port
common=(tune --data "$data" --output "$out" --max-trials "$trials" --epochs-per-trial "$epochs")
KERASTUNER_TUNER_ID=chief "$genni" "${common[@]}" > "$out/logs/chief.log" 2>&1 &
chief=$!
sleep 5
for w in 0 1; do
  KERASTUNER_TUNER_ID=tuner$w "$genni" "${common[@]}" > "$out/logs/tuner$w.log" 2>&1 &
done
wait
python3 - "$out" "$trials" <<'PY'
import json, os, sys
out, trials = sys.argv[1], int(sys.argv[2])
results = json.load(open(os.path.join(out, "results.json")))
ids = [t["trial"] for t in results["trials"]]
runs = sorted(os.listdir(os.path.join(out, "search", "trials")))
by_tuner = {}
for trial_id in runs:
    path = os.path.join(out, "search", "trials", trial_id, "trial_metrics.json")
    by_tuner.setdefault(json.load(open(path))["tuner_id"], []).append(trial_id)
print(f"completed trials: {len(ids)} of {trials}; distinct: {len(set(ids))}")
print(f"trial run directories: {len(runs)}; by worker: {by_tuner}")
ok = len(ids) == trials == len(set(ids)) == len(runs) and "chief" not in by_tuner
print("OK" if ok else "FAILED")
sys.exit(0 if ok else 1)
PY
