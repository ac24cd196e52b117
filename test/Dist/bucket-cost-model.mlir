// RUN: hpc-opt %s -split-input-file --dist-bucket=cluster=%S/Inputs/one-gbyte-link.json 2>/dev/null | FileCheck %s
// RUN: hpc-opt %s -split-input-file --dist-bucket=cluster=%S/Inputs/one-gbyte-link.json 2>&1 >/dev/null | FileCheck %s --check-prefix=LINE
// RUN: hpc-opt %s -split-input-file --dist-bucket 2>&1 | FileCheck %s --check-prefix=RULE
// RUN: not hpc-opt %s -split-input-file --dist-bucket=cluster=%S/Inputs/missing.json 2>&1 | FileCheck %s --check-prefix=BAD

// With a cluster the automatic bucket size comes from the cost model
// (hpc::cost::chooseBucketBytes): four 1 MiB gradients over a 1 GB/s link
// (about 1 ms each), each after a product of ~2 GFLOP on a 1 TFLOP/s
// device. The link keeps up with the backward pass, so what is exposed is
// the last bucket: each gradient goes alone.
// LINE: dist-bucket: buckets of at most 1.41 MiB from the cost model of one-gbyte-link: 4 bucket(s) of 4.19 MB
// CHECK-LABEL: func.func @spread
// CHECK-COUNT-4: dist.all_reduce %{{.+}} : tensor<512x512xf32>
// CHECK-NOT: hpc.concat

// The same gradients all computed at the end: every size exposes all of
// them, and one message pays the latency once: one bucket.
// LINE: dist-bucket: buckets of at most 25.00 MiB from the cost model of one-gbyte-link: 1 bucket(s) of 4.19 MB
// CHECK-LABEL: func.func @at_end
// CHECK: hpc.concat {{.*}} -> tensor<1048576xf32>
// CHECK: dist.all_reduce %{{.+}} : tensor<1048576xf32>

// Without a cluster: the fixed rule (1 MiB at least), the same for both.
// RULE-NOT: dist-bucket:
// RULE-LABEL: func.func @spread
// RULE-COUNT-4: dist.all_reduce %{{.+}} : tensor<512x512xf32>
// RULE-LABEL: func.func @at_end
// RULE-COUNT-4: dist.all_reduce %{{.+}} : tensor<512x512xf32>

// BAD: error: dist-bucket: {{.*}}missing.json

module attributes {dist.bytes_per_rank = 0 : i64, dist.mesh = #dist.mesh<dp = 2 : inter_node>} {
  func.func @spread(%a: tensor<512x4096xf32>, %b: tensor<4096x512xf32>) -> tensor<512x512xf32> {
    %g0 = hpc.matmul %a, %b : (tensor<512x4096xf32>, tensor<4096x512xf32>) -> tensor<512x512xf32>
    %r0 = dist.all_reduce %g0 over ["dp"] sum : tensor<512x512xf32> -> tensor<512x512xf32>
    %g1 = hpc.matmul %a, %b : (tensor<512x4096xf32>, tensor<4096x512xf32>) -> tensor<512x512xf32>
    %r1 = dist.all_reduce %g1 over ["dp"] sum : tensor<512x512xf32> -> tensor<512x512xf32>
    %g2 = hpc.matmul %a, %b : (tensor<512x4096xf32>, tensor<4096x512xf32>) -> tensor<512x512xf32>
    %r2 = dist.all_reduce %g2 over ["dp"] sum : tensor<512x512xf32> -> tensor<512x512xf32>
    %g3 = hpc.matmul %a, %b : (tensor<512x4096xf32>, tensor<4096x512xf32>) -> tensor<512x512xf32>
    %r3 = dist.all_reduce %g3 over ["dp"] sum : tensor<512x512xf32> -> tensor<512x512xf32>
    %s0 = hpc.add %r0, %r1 : (tensor<512x512xf32>, tensor<512x512xf32>) -> tensor<512x512xf32>
    %s1 = hpc.add %s0, %r2 : (tensor<512x512xf32>, tensor<512x512xf32>) -> tensor<512x512xf32>
    %s2 = hpc.add %s1, %r3 : (tensor<512x512xf32>, tensor<512x512xf32>) -> tensor<512x512xf32>
    return %s2 : tensor<512x512xf32>
  }
}

// -----

module attributes {dist.bytes_per_rank = 0 : i64, dist.mesh = #dist.mesh<dp = 2 : inter_node>} {
  func.func @at_end(%a: tensor<512x4096xf32>, %b: tensor<4096x512xf32>, %x: tensor<512x512xf32>)
      -> tensor<512x512xf32> {
    %m = hpc.matmul %a, %b : (tensor<512x4096xf32>, tensor<4096x512xf32>) -> tensor<512x512xf32>
    %g0 = hpc.relu %x : tensor<512x512xf32>
    %r0 = dist.all_reduce %g0 over ["dp"] sum : tensor<512x512xf32> -> tensor<512x512xf32>
    %g1 = hpc.neg %x : tensor<512x512xf32>
    %r1 = dist.all_reduce %g1 over ["dp"] sum : tensor<512x512xf32> -> tensor<512x512xf32>
    %g2 = hpc.abs %x : tensor<512x512xf32>
    %r2 = dist.all_reduce %g2 over ["dp"] sum : tensor<512x512xf32> -> tensor<512x512xf32>
    %g3 = hpc.exp %x : tensor<512x512xf32>
    %r3 = dist.all_reduce %g3 over ["dp"] sum : tensor<512x512xf32> -> tensor<512x512xf32>
    %s0 = hpc.add %r0, %r1 : (tensor<512x512xf32>, tensor<512x512xf32>) -> tensor<512x512xf32>
    %s1 = hpc.add %s0, %r2 : (tensor<512x512xf32>, tensor<512x512xf32>) -> tensor<512x512xf32>
    %s2 = hpc.add %s1, %r3 : (tensor<512x512xf32>, tensor<512x512xf32>) -> tensor<512x512xf32>
    %s3 = hpc.add %s2, %m : (tensor<512x512xf32>, tensor<512x512xf32>) -> tensor<512x512xf32>
    return %s3 : tensor<512x512xf32>
  }
}
