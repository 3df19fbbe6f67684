"""Launch-mode check of -t cuda's first calls under PyTorch (tests/gpu/cuda_first_calls.sh).

`import torch` loads its CUDA runtime (site-packages/nvidia/.../libcudart.so.N, found through
the run path of a library torch dlopens: a path known only at run time). Right after the
import, with no wait, this calls that very runtime through ctypes: cudaDriverGetVersion 200
times and cudaGetDeviceCount 100 times (torch has not initialized CUDA yet, so it made none
of these itself), then torch's own first CUDA work. Prints "mine SYMBOL N" and the runtime
it used as "cudart PATH".
"""
import ctypes
import sys

import torch

path = next((l.split()[-1] for l in open("/proc/self/maps") if "libcudart" in l.split()[-1]), None)
if not path:
    sys.exit("torch mapped no libcudart")
rt = ctypes.CDLL(path)
v = ctypes.c_int()
for _ in range(200):
    rt.cudaDriverGetVersion(ctypes.byref(v))
for _ in range(100):
    rt.cudaGetDeviceCount(ctypes.byref(v))
print("cudart", path)
print("mine cudaDriverGetVersion 200")
print("mine cudaGetDeviceCount 100")
x = torch.ones(1 << 20, device="cuda")
torch.cuda.synchronize()
print("torch", float(x.sum()))
