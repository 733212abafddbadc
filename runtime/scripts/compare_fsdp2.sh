#!/usr/bin/env bash
# zrun's ZeRO-3 step against PyTorch FSDP2 (fully_shard) on the same Llama-shaped model, batch, bf16, eager
# attention (materialised scores) and full checkpointing, on every visible GPU (issue 7 asks for 2 GPUs at about
# 1B and 6B parameters). Prints both step times, the ratio and TFLOPS per GPU (zsim's FLOP convention, from
# zrun's report). Usage (device tool): ZRUN_BIN_DIR=.devcarry/exec bash runtime/scripts/compare_fsdp2.sh SIZE
# with SIZE 1b (22 layers, hidden 2048, ffn 5632, 32 heads / 4 kv) or 6b (Llama-2 7B's shape, 32 layers).
set -u
source "$(dirname "$0")/device_env.sh"
case "${1:-1b}" in
  1b) SHAPE=(22 2048 5632 32 4 32000) ;;
  6b) SHAPE=(32 4096 11008 32 32 32000) ;;
  *) echo "SIZE is 1b or 6b"; exit 2 ;;
esac
SEQ=2048 MB=1
NGPU=$(nvidia-smi -L | wc -l)
read -r L H F A KV V <<<"${SHAPE[*]}"
"$BIN/zrun" $S --here --set deepspeed.zero_optimization.stage=3 --set model.layers=$L --set model.hidden=$H \
  --set model.ffn_hidden=$F --set model.heads=$A --set model.kv_heads=$KV --set model.vocab=$V \
  --set training.seq_len=$SEQ --set training.micro_batch=$MB --set training.activation_checkpointing=full \
  --steps 10 --warmup 3 --json "$OUT/zrun_${1:-1b}.json" > "$OUT/zrun_${1:-1b}.log" 2>&1 || { tail -5 "$OUT/zrun_${1:-1b}.log"; exit 1; }
/opt/torch/.venv/bin/torchrun --nproc_per_node "$NGPU" "$(dirname "$0")/fsdp2_step.py" $L $H $F $A $KV $V $SEQ $MB \
  > "$OUT/fsdp2_${1:-1b}.json" 2> "$OUT/fsdp2_${1:-1b}.err" || { tail -5 "$OUT/fsdp2_${1:-1b}.err"; exit 1; }
$PY - "$OUT/zrun_${1:-1b}.json" "$OUT/fsdp2_${1:-1b}.json" "$NGPU" <<'PY' | tee "$OUT/compare_${1:-1b}.txt"
import json, sys
m = json.load(open(sys.argv[1]))["measured"]
f = json.loads(open(sys.argv[2]).read().strip().splitlines()[-1])
n = int(sys.argv[3])
flops = m["tflops_per_gpu"] * 1e12 * m["step_time_s"] * n  # model FLOPs of one step, zsim's convention
print(f"{n} GPU(s), {f['params'] / 1e9:.2f}B parameters: zrun ZeRO-3 {m['step_time_s'] * 1e3:.1f} ms "
      f"({m['tflops_per_gpu']:.1f} TFLOPS/GPU), FSDP2 {f['step_time_s'] * 1e3:.1f} ms "
      f"({flops / f['step_time_s'] / n / 1e12:.1f} TFLOPS/GPU): zrun / FSDP2 = {m['step_time_s'] / f['step_time_s']:.2f}; "
      f"peak GPU zrun {m['gpu_peak_bytes'] / 2**30:.1f} GiB (arena) vs FSDP2 {f['peak_gpu_bytes'] / 2**30:.1f} GiB (allocated)")
PY
