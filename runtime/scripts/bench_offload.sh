#!/usr/bin/env bash
# ZeRO-Offload's pieces inside zrun's step against raw rates measured in the same run (issue 14):
#   host copies (d2h gradients down, h2d 16-bit weights up) vs a raw pinned cudaMemcpyAsync of the same size,
#   CPU Adam inside the step vs kernels/bench/cpu_adam_bench at the same parameter count,
#   NVMe swaps (optimizer state read / write) vs raw O_DIRECT pread / pwrite of a file of the same size,
#   and the step's exposed offload time beside zsim's prediction for the same schedule; also with offload_param cpu.
# A ~120M-parameter Llama-shaped model (4 layers, hidden 1024, vocab 32000), ZeRO-3, bf16, one GPU.
# Usage (device tool): ZRUN_BIN_DIR=.devcarry/offload bash runtime/scripts/bench_offload.sh   [NVME_DIR=/path]
set -u
source "$(dirname "$0")/device_env.sh"
S=runtime/scenarios/tiny-zero3-offload-1xh100.yaml
NVME_DIR=${NVME_DIR:-/tmp/zrun_nvme_bench}
mkdir -p "$NVME_DIR"
echo "NVMe directory $NVME_DIR: $(df -T "$NVME_DIR" | tail -1 | awk '{print $2" on "$1", "$5" KiB free"}')"
echo "CPU: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
MODEL=(--set model.layers=4 --set model.hidden=1024 --set model.ffn_hidden=2816 --set model.heads=8 --set model.kv_heads=8
       --set model.vocab=32000 --set training.seq_len=512 --set training.micro_batch=4 --set training.grad_accum=1
       --set deepspeed.zero_optimization.stage=3)
# "<piece> <key>" of the JSON's measured.offload block (zrun writes one key per line).
field() { awk -v piece="\"$2\":" -v key="\"$3\":" '
  /"offload": \{/ {in_off = 1} in_off && $1 == piece {p = 1} p && $1 == key {gsub(/,/, "", $2); print $2; exit}
  p && /\}/ {p = 0}' "$1"; }
top() { awk -v key="\"$2\":" 'in_off && $1 == key {gsub(/,/, "", $2); print $2; exit} /"offload": \{/ {in_off = 1}' "$1"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.3f", a / b; else printf "n/a" }'; }
rate() { awk -v b="$1" -v s="$2" 'BEGIN { if (s > 0) printf "%.3f", b / s / 1e9; else printf "0" }'; }

# DEVS: which runs (cpu: offload_optimizer cpu; nvme: offload_optimizer nvme; param: offload_optimizer and
# offload_param cpu, the partitions' h2d staging before each gather counted with the h2d piece; pnvme:
# offload_optimizer cpu and offload_param nvme, each fetch's chunk reads and the step's 16-bit writes counted with the
# NVMe pieces).
for dev in ${DEVS:-cpu nvme param pnvme}; do
  extra=()
  opt=cpu
  [ $dev = nvme ] && { opt=nvme; extra=(--nvme-dir "$NVME_DIR"); }
  [ $dev = param ] && extra=(--set deepspeed.zero_optimization.offload_param.device=cpu)
  # pnvme: the swap-in pool holds the parameters the forward keeps for the backward (stage3_max_reuse_distance 1e9):
  # 30 buffers (zsim names the count DeepSpeed needs), each larger than the embedding's partition.
  [ $dev = pnvme ] && extra=(--set deepspeed.zero_optimization.offload_param.device=nvme
    --set deepspeed.zero_optimization.offload_param.max_in_cpu=0 --set deepspeed.zero_optimization.offload_param.buffer_count=30
    --set deepspeed.zero_optimization.offload_param.buffer_size=4e7 --nvme-dir "$NVME_DIR")
  echo "== zrun, offload_optimizer $opt${extra:+ (${extra[*]})}"
  "$BIN/zrun" $S --here "${MODEL[@]}" --set deepspeed.zero_optimization.offload_optimizer.device=$opt "${extra[@]}" \
      --steps 3 --warmup 1 --json "$OUT/offload_$dev.json" 2>&1 | tee "$OUT/offload_$dev.log" | grep -vE "^step " 
  J=$OUT/offload_$dev.json
  [ -s "$J" ] || { echo "no JSON from zrun ($dev)"; continue; }
  echo "-- ratios ($dev): the piece inside the step / the raw rate at the same size"
  for piece in d2h h2d; do
    ops=$(field "$J" $piece ops); bytes=$(field "$J" $piece bytes); sec=$(field "$J" $piece seconds)
    [ "${ops:-0}" -gt 0 ] || continue
    size=$((bytes / ops))
    raw=$("$BIN/offload_bench" copy $size | awk -v p=$piece '$2 == p {print $8}')
    in_step=$(rate $bytes $sec)
    echo "$piece: $ops op(s), $size bytes each on average: inside the step $in_step GB/s, raw pinned cudaMemcpyAsync $raw GB/s, ratio $(ratio $in_step $raw)"
    # An NVMe run's copies overlap its disk traffic: the same raw copies while another thread streams O_DIRECT writes,
    # then reads, in the swap directory.
    if [ $dev = nvme ] || [ $dev = pnvme ]; then
      under=$("$BIN/offload_bench" copy-under-disk "$NVME_DIR" $size)
      r_read=$(awk -v p=${piece}_under_disk_read '$2 == p {print $8}' <<< "$under")
      r_write=$(awk -v p=${piece}_under_disk_write '$2 == p {print $8}' <<< "$under")
      disk=$(awk '$2 ~ /beside_copies/ {printf "%s %s GB/s; ", $2, $8}' <<< "$under")
      echo "$piece under disk traffic (${disk% }): raw $r_read GB/s beside reads, ratio $(ratio $in_step $r_read); $r_write GB/s beside writes, ratio $(ratio $in_step $r_write)"
      # What else might slow an NVMe run's d2h (its ratio stays 0.86-0.88 where a run without NVMe gives 0.94): the GPU
      # idle before a copy (the waits for the disk), a stream blocked in a host function beside it (an NVMe transfer),
      # destinations spread over a large pinned allocation.
      [ $piece = d2h ] && "$BIN/offload_bench" d2h-probes $size | awk -v s=$in_step '$1 == "raw" && $8 > 0 {
        printf "d2h probe %s: raw %s GB/s, ratio of the step'"'"'s %.3f\n", $2, $8, s / $8 }'
    fi
  done
  ops=$(field "$J" cpu_optimizer ops); n=$(field "$J" cpu_optimizer elements); sec=$(field "$J" cpu_optimizer seconds)
  if [ "${ops:-0}" -gt 0 ]; then
    per_op=$((n / ops))
    in_step=$(awk -v n=$n -v s=$sec 'BEGIN { printf "%.4g", n / s }')
    raw=$("$BIN/cpu_adam_bench" $per_op 5 | sed -E 's/.*params_per_s ([0-9.e+]+).*/\1/')
    echo "CPU Adam: $ops op(s) of $per_op parameters: $in_step params/s inside the step, cpu_adam_bench $raw, ratio $(ratio $in_step $raw)"
  fi
  for piece in nvme_read nvme_write; do
    ops=$(field "$J" $piece ops); bytes=$(field "$J" $piece bytes); sec=$(field "$J" $piece seconds)
    [ "${ops:-0}" -gt 0 ] || continue
    size=$((bytes / ops))
    "$BIN/offload_bench" disk "$NVME_DIR" $size > "$OUT/offload_disk_$piece.log"
    cat "$OUT/offload_disk_$piece.log" >> "$OUT/offload_disk.log"
    raw=$(awk -v p=$piece '$2 == p {print $8}' "$OUT/offload_disk_$piece.log")
    q=${piece/nvme_/uring_}
    uring=$(awk -v p=$q '$2 == p {print $8}' "$OUT/offload_disk_$piece.log")
    in_step=$(rate $bytes $sec)
    echo "$piece: $ops op(s) of $size bytes: $in_step GB/s inside the step; raw O_DIRECT pread/pwrite (8 MiB, one at a time) $raw GB/s, ratio $(ratio $in_step $raw); raw io_uring (1 MiB x 32 in flight, zrun's reader outside the step) ${uring:-n/a} GB/s, ratio $(ratio $in_step ${uring:-0})"
  done
  echo "exposed offload: measured $(top "$J" exposed_s) s, zsim $(top "$J" zsim_exposed_s) s"
  echo "leftover files in $NVME_DIR: $(ls -A "$NVME_DIR" | wc -l)"
done
