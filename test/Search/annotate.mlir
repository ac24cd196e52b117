// The plan is attached to the IR for dist-partition: a dictionary on the
// function and the stage and layer of every op (weights: their first user's).
// One stage of dp=8 (given: on 8 samples the searched plan is a pipeline,
// ZeRO's gathers being exposed), and four stages of tp=2.
// RUN: hpc-opt %S/Inputs/mlp.mlir --dist-search="cluster=dgx-a100-80g:1 global-batch=8 mesh=dp=8,tp=1,pp=1,zero=1,sp=0,recompute=0,mbs=1 table=0" | FileCheck %s --check-prefix=ONE
// RUN: hpc-opt %S/Inputs/mlp.mlir --dist-search="cluster=dgx-a100-80g:1 global-batch=8 mesh=dp=1,tp=2,pp=4,zero=0,sp=0,recompute=0,mbs=2 table=0" | FileCheck %s --check-prefix=PP

// ONE-LABEL: func.func @main
// ONE-SAME: hpc.plan = {bubble_s = 0.000000e+00 : f64, cluster = "dgx-a100-80g:1", compute_s = {{[0-9.eE+-]+}} : f64, devices = 8 : i64, devices_per_stage = 8 : i64, dtype = "bf16", exposed_comm_s = {{[0-9.eE+-]+}} : f64, global_batch = 8 : i64
// ONE-SAME: num_layers = 5 : i64
// ONE-SAME: schedule = "1f1b"
// ONE-SAME: stages = [{dp = 8 : i64, end_layer = 5 : i64, ep = 1 : i64, first_device = 0 : i64, first_layer = 0 : i64, memory_bytes = {{[0-9]+}} : i64, num_devices = 8 : i64, recompute = {{true|false}}, sp = false, stage = 0 : i64, tp = 1 : i64, zero = {{[0-3]}} : i64}]
// ONE: hpc.weight "b0.fc1" {hpc.layer = 0 : i64, hpc.stage = 0 : i64}
// ONE: hpc.matmul {{.*}} {hpc.layer = 0 : i64, hpc.stage = 0 : i64}
// ONE: hpc.weight "out" {hpc.layer = 4 : i64, hpc.stage = 0 : i64}

// Four stages of two devices: Megatron-style split of the four blocks, the
// output layer with the last one.
// PP-LABEL: func.func @main
// PP-SAME: micro_batch = 2 : i64
// PP-SAME: num_micro_batches = 4 : i64
// PP-SAME: stages = [{dp = 1 : i64, end_layer = 1 : i64, ep = 1 : i64, first_device = 0 : i64, first_layer = 0 : i64, memory_bytes = {{[0-9]+}} : i64, num_devices = 2 : i64, recompute = false, sp = false, stage = 0 : i64, tp = 2 : i64, zero = 0 : i64},
// PP-SAME: {dp = 1 : i64, end_layer = 2 : i64, ep = 1 : i64, first_device = 2 : i64, first_layer = 1 : i64,
// PP-SAME: {dp = 1 : i64, end_layer = 3 : i64, ep = 1 : i64, first_device = 4 : i64, first_layer = 2 : i64,
// PP-SAME: {dp = 1 : i64, end_layer = 5 : i64, ep = 1 : i64, first_device = 6 : i64, first_layer = 3 : i64,
// PP: hpc.weight "b0.fc1" {hpc.layer = 0 : i64, hpc.stage = 0 : i64}
// PP: hpc.weight "b1.fc1" {hpc.layer = 1 : i64, hpc.stage = 1 : i64}
// PP: hpc.weight "b2.fc1" {hpc.layer = 2 : i64, hpc.stage = 2 : i64}
// PP: hpc.weight "b3.fc1" {hpc.layer = 3 : i64, hpc.stage = 3 : i64}
// PP: hpc.add {{.*}} {hpc.layer = 3 : i64, hpc.stage = 3 : i64}
// PP: hpc.weight "out" {hpc.layer = 4 : i64, hpc.stage = 3 : i64}
// PP: hpc.matmul {{.*}} {hpc.layer = 4 : i64, hpc.stage = 3 : i64}
// PP: return
