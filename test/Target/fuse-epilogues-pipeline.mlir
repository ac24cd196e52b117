// RUN: hpc-opt %s --emit=llvm | FileCheck %s --check-prefix=FUSED
// RUN: hpc-opt %s --emit=llvm --no-fuse | FileCheck %s --check-prefix=UNFUSED
// RUN: hpc-opt %s --emit=llvm --precision=bf16 | FileCheck %s --check-prefix=BF16

// hpc-compile fuses the MLP's bias adds and its GELU into two gemm calls
// (the reshapes around them are views); --no-fuse keeps one call per op.

// The first gemm applies the GELU (its sattrs), the second none.
// FUSED: @[[S1:str[0-9]+]] = internal constant [5 x i8] c"gelu\00"
// FUSED: @[[A1:sattrs[0-9]+]] = internal constant [1 x ptr] [ptr @[[S1]]]
// FUSED: @[[S2:str[0-9]+]] = internal constant [5 x i8] c"none\00"
// FUSED: @[[A2:sattrs[0-9]+]] = internal constant [1 x ptr] [ptr @[[S2]]]
// FUSED: define void @hpc_program_run(ptr %0)
// FUSED-NEXT: call void @hpcrt_gemm({{.*}}, ptr @[[A1]])
// FUSED-NEXT: call void @hpcrt_gemm({{.*}}, ptr @[[A2]])
// FUSED-NEXT: ret void

// UNFUSED: define void @hpc_program_run(ptr %0)
// UNFUSED-NEXT: call void @hpcrt_matmul(
// UNFUSED-NEXT: call void @hpcrt_add(
// UNFUSED-NEXT: call void @hpcrt_gelu(
// UNFUSED-NEXT: call void @hpcrt_matmul(
// UNFUSED-NEXT: call void @hpcrt_add(
// UNFUSED-NEXT: ret void

// In bf16 the same two gemms (bf16 operands, biases stored in bf16) after
// the input's cast to bf16: the second reads the first's bf16 result and
// writes the f32 result itself (no cast back after it).
// BF16: @[[S1:str[0-9]+]] = internal constant [5 x i8] c"gelu\00"
// BF16: @[[A1:sattrs[0-9]+]] = internal constant [1 x ptr] [ptr @[[S1]]]
// BF16: @[[S2:str[0-9]+]] = internal constant [5 x i8] c"none\00"
// BF16: @[[A2:sattrs[0-9]+]] = internal constant [1 x ptr] [ptr @[[S2]]]
// BF16: define void @hpc_program_run(ptr %0)
// BF16-NEXT: call void @hpcrt_cast(
// BF16-NEXT: call void @hpcrt_gemm({{.*}}, ptr @[[A1]])
// BF16-NEXT: call void @hpcrt_gemm({{.*}}, ptr @[[A2]])
// BF16-NEXT: ret void

func.func @main(%x: tensor<2x4x8xf32> {hpc.name = "x"}) -> (tensor<2x4x8xf32> {hpc.name = "y"}) {
  %w1 = hpc.weight "fc1.w" : tensor<8x16xf32> = dense<0.5>
  %b1 = hpc.weight "fc1.b" : tensor<16xf32> = dense<0.25>
  %w2 = hpc.weight "fc2.w" : tensor<16x8xf32> = dense<0.5>
  %b2 = hpc.weight "fc2.b" : tensor<8xf32> = dense<0.25>
  %0 = hpc.matmul %x, %w1 : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
  %1 = hpc.add %0, %b1 : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  %2 = hpc.gelu %1 : tensor<2x4x16xf32>
  %3 = hpc.matmul %2, %w2 : (tensor<2x4x16xf32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
  %4 = hpc.add %3, %b2 : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  return %4 : tensor<2x4x8xf32>
}
