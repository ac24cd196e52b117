// An hpc-dialect function (not ONNX) compiled with --emit=exe: y = x * w with
// w = [1, 2, 3, 4] from the weights file, and a second result t = y + x.
// The result names hold characters that cannot be in a file name: the
// executable writes "out/y:0" to out_y_0.npy and "t 1" to t_1.npy.
//   x = [1, -2, 0.5, 10]: y = [1, -4, 1.5, 40], t = [2, -6, 2, 50]

// RUN: rm -rf %t.out
// RUN: hpc-opt %s --emit=exe -o %t.bin 2>&1 | FileCheck %s --check-prefix=COMPILE
// RUN: %python %S/Inputs/npy.py save %t.x.npy float32 4 1,-2,0.5,10
// RUN: %t.bin run --input x=%t.x.npy --output-dir %t.out | FileCheck %s --check-prefix=SUMMARY
// RUN: %python %S/Inputs/npy.py print %t.out/out_y_0.npy | FileCheck %s --check-prefix=Y
// RUN: %python %S/Inputs/npy.py print %t.out/t_1.npy | FileCheck %s --check-prefix=T

// COMPILE: hpc-opt: wrote {{.*}}.bin and {{.*}}.bin.safetensors (arena {{[0-9]+}} bytes)
// SUMMARY: out/y:0: f32 [4]
// SUMMARY: t 1: f32 [4]
// Y:      float32 [4]
// Y-NEXT: [1.0, -4.0, 1.5, 40.0]
// T:      float32 [4]
// T-NEXT: [2.0, -6.0, 2.0, 50.0]

func.func @main(%x: tensor<4xf32> {hpc.name = "x"})
    -> (tensor<4xf32> {hpc.name = "out/y:0"}, tensor<4xf32> {hpc.name = "t 1"}) {
  %w = hpc.weight "w" : tensor<4xf32> = dense<[1.0, 2.0, 3.0, 4.0]>
  %0 = hpc.mul %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %1 = hpc.add %0, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0, %1 : tensor<4xf32>, tensor<4xf32>
}
