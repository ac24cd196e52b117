"""Prints the tensor-parallel communication and memory of one stage in two
dist-search reports of the same plan, Megatron-LM's layout first, and
whether the compiled layout's are larger (extract-gpt.test)."""
import json
import sys


def stage(path):
    with open(path) as f:
        s = json.load(f)["plan"]["stages"][0]
    return s["time"]["tp_comm_s"], s["memory_bytes"]


(comm_m, mem_m), (comm_c, mem_c) = stage(sys.argv[1]), stage(sys.argv[2])
print(f"megatron: tp comm {comm_m:.6g}, memory {mem_m:.0f}")
print(f"compiled costs more: tp comm {comm_c > comm_m}, memory {mem_c > mem_m}")
