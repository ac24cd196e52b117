// Four residual MLP blocks and a 10-class output layer on a batch of 8
// samples; weights without values, as in a --shapes-only import.
module {
  func.func @main(%x: tensor<8x512xf32>) -> tensor<8x10xf32> {
    %1 = hpc.weight "b0.fc1" : tensor<512x2048xf32>
    %2 = hpc.matmul %x, %1 : (tensor<8x512xf32>, tensor<512x2048xf32>) -> tensor<8x2048xf32>
    %3 = hpc.relu %2 : tensor<8x2048xf32>
    %4 = hpc.weight "b0.fc2" : tensor<2048x512xf32>
    %5 = hpc.matmul %3, %4 : (tensor<8x2048xf32>, tensor<2048x512xf32>) -> tensor<8x512xf32>
    %6 = hpc.add %x, %5 : (tensor<8x512xf32>, tensor<8x512xf32>) -> tensor<8x512xf32>
    %7 = hpc.weight "b1.fc1" : tensor<512x2048xf32>
    %8 = hpc.matmul %6, %7 : (tensor<8x512xf32>, tensor<512x2048xf32>) -> tensor<8x2048xf32>
    %9 = hpc.relu %8 : tensor<8x2048xf32>
    %10 = hpc.weight "b1.fc2" : tensor<2048x512xf32>
    %11 = hpc.matmul %9, %10 : (tensor<8x2048xf32>, tensor<2048x512xf32>) -> tensor<8x512xf32>
    %12 = hpc.add %6, %11 : (tensor<8x512xf32>, tensor<8x512xf32>) -> tensor<8x512xf32>
    %13 = hpc.weight "b2.fc1" : tensor<512x2048xf32>
    %14 = hpc.matmul %12, %13 : (tensor<8x512xf32>, tensor<512x2048xf32>) -> tensor<8x2048xf32>
    %15 = hpc.relu %14 : tensor<8x2048xf32>
    %16 = hpc.weight "b2.fc2" : tensor<2048x512xf32>
    %17 = hpc.matmul %15, %16 : (tensor<8x2048xf32>, tensor<2048x512xf32>) -> tensor<8x512xf32>
    %18 = hpc.add %12, %17 : (tensor<8x512xf32>, tensor<8x512xf32>) -> tensor<8x512xf32>
    %19 = hpc.weight "b3.fc1" : tensor<512x2048xf32>
    %20 = hpc.matmul %18, %19 : (tensor<8x512xf32>, tensor<512x2048xf32>) -> tensor<8x2048xf32>
    %21 = hpc.relu %20 : tensor<8x2048xf32>
    %22 = hpc.weight "b3.fc2" : tensor<2048x512xf32>
    %23 = hpc.matmul %21, %22 : (tensor<8x2048xf32>, tensor<2048x512xf32>) -> tensor<8x512xf32>
    %24 = hpc.add %18, %23 : (tensor<8x512xf32>, tensor<8x512xf32>) -> tensor<8x512xf32>
    %25 = hpc.weight "out" : tensor<512x10xf32>
    %26 = hpc.matmul %24, %25 : (tensor<8x512xf32>, tensor<512x10xf32>) -> tensor<8x10xf32>
    return %26 : tensor<8x10xf32>
  }
}
