# torch.optim.Adam(foreach=True) on the CPU: parameters per second, the baseline for cpu_adam_bench.
# Usage: python3 torch_adam_bench.py [n] [reps]. Same n, weight decay and L2 semantics as cpu_adam_bench.
import sys, time, torch

n = int(sys.argv[1]) if len(sys.argv) > 1 else 1 << 25
reps = int(sys.argv[2]) if len(sys.argv) > 2 else 10
torch.manual_seed(0)
p = torch.nn.Parameter(torch.randn(n, dtype=torch.float32))
p.grad = torch.randn(n, dtype=torch.float32)
opt = torch.optim.Adam([p], lr=1e-3, weight_decay=0.01, foreach=True)
times = []
for r in range(reps + 2):
    t0 = time.perf_counter()
    opt.step()
    t1 = time.perf_counter()
    if r >= 2:
        times.append(t1 - t0)
times.sort()
sec = times[len(times) // 2]
print(f"torch Adam(foreach=True): n={n} threads={torch.get_num_threads()} median {sec*1e3:.3f} ms params_per_s {n/sec:.4g}")
