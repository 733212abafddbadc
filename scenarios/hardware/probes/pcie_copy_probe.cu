// Measures pinned / pageable host<->device copies and device-to-device copies (GB/s = 1e9 bytes/s, bytes
// copied per second). Source of the pcie_GBps, pageable_pcie_fraction and hbm efficiency figures in the
// H100 profiles (docs/hardware-profiles.md). Build: nvcc -O2 -arch=sm_90 -o probe pcie_copy_probe.cu
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>
double T(void*d,const void*s,size_t n,cudaMemcpyKind k){cudaEvent_t a,b;cudaEventCreate(&a);cudaEventCreate(&b);cudaMemcpy(d,s,n,k);cudaEventRecord(a);for(int i=0;i<5;++i)cudaMemcpy(d,s,n,k);cudaEventRecord(b);cudaEventSynchronize(b);float ms;cudaEventElapsedTime(&ms,a,b);return n*5.0/(ms*1e-3)/1e9;}
int main(){size_t n=1ull<<30;void*d,*e,*p;cudaMalloc(&d,n);cudaMalloc(&e,n);cudaMallocHost(&p,n);void*q=malloc(n);memset(q,1,n);memset(p,1,n);
for(size_t z:{size_t(64)<<20,n})printf("%zuMiB h2d pinned %.1f pageable %.1f d2h pinned %.1f pageable %.1f d2d %.1f GB/s\n",z>>20,T(d,p,z,cudaMemcpyHostToDevice),T(d,q,z,cudaMemcpyHostToDevice),T(p,d,z,cudaMemcpyDeviceToHost),T(q,d,z,cudaMemcpyDeviceToHost),T(e,d,z,cudaMemcpyDeviceToDevice));}
