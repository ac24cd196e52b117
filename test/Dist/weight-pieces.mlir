// RUN: hpc-opt %s --dist-weight-pieces --split-input-file | FileCheck %s

// dist-weight-pieces: the pieces of weights a rank reads become stored data.

// A column-parallel piece (dim 1) is stored piece-major: row g holds rank
// g's columns, and the all_slice takes its row along dim 0 (a view at run
// time), reshaped to the piece.
// CHECK-LABEL: func.func @column
// CHECK: %[[W:.*]] = hpc.weight "w" {dist.pieces_of = {dim = 1 : i64, shape = array<i64: 2, 4>}} : tensor<2x2x2xf32> = dense<{{\[\[\[}}0.000000e+00, 1.000000e+00], [4.000000e+00, 5.000000e+00]], {{\[\[}}2.000000e+00, 3.000000e+00], [6.000000e+00, 7.000000e+00]]]>
// CHECK: %[[ROW:.*]] = dist.all_slice %[[W]] over ["tp"] dim 0 : tensor<2x2x2xf32> -> tensor<1x2x2xf32>
// CHECK: %[[P:.*]] = hpc.reshape %[[ROW]] {shape = array<i64: 2, 2>} : (tensor<1x2x2xf32>) -> tensor<2x2xf32>
// CHECK: hpc.matmul %{{.*}}, %[[P]]
// CHECK-NOT: hpc.weight "w"
module attributes {dist.mesh = #dist.mesh<tp = 2 : intra_node>} {
func.func @column(%x: tensor<3x2xf32>) -> tensor<3x2xf32> {
  %w = hpc.weight "w" : tensor<2x4xf32> = dense<[[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0]]>
  %p = dist.all_slice %w over ["tp"] dim 1 : tensor<2x4xf32> -> tensor<2x2xf32>
  %y = hpc.matmul %x, %p : (tensor<3x2xf32>, tensor<2x2xf32>) -> tensor<3x2xf32>
  return %y : tensor<3x2xf32>
}
}

// -----

// Over two axes the group has 4 ranks: 4 rows, one column each.
// CHECK-LABEL: func.func @two_axes
// CHECK: hpc.weight "w" {dist.pieces_of = {dim = 1 : i64, shape = array<i64: 2, 4>}} : tensor<4x2x1xf32> = dense<{{\[\[\[}}0.000000e+00], [4.000000e+00]], {{\[\[}}1.000000e+00], [5.000000e+00]], {{\[\[}}2.000000e+00], [6.000000e+00]], {{\[\[}}3.000000e+00], [7.000000e+00]]]>
// CHECK: dist.all_slice %{{.*}} over ["dp", "tp"] dim 0 : tensor<4x2x1xf32> -> tensor<1x2x1xf32>
module attributes {dist.mesh = #dist.mesh<dp = 2 : inter_node, tp = 2 : intra_node>} {
func.func @two_axes() -> tensor<2x1xf32> {
  %w = hpc.weight "w" : tensor<2x4xf32> = dense<[[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0]]>
  %p = dist.all_slice %w over ["dp", "tp"] dim 1 : tensor<2x4xf32> -> tensor<2x1xf32>
  return %p : tensor<2x1xf32>
}
}

// -----

// Pieces along the outermost dimension (leading dims of 1 count as outer)
// are contiguous already; a weight that something else reads whole, or
// two different splits of one weight, or a weight without data stay.
// CHECK-LABEL: func.func @unchanged
// CHECK-NOT: dist.pieces_of
// CHECK: dist.all_slice %{{.*}} over ["tp"] dim 0 : tensor<4x2xf32>
// CHECK: dist.all_slice %{{.*}} over ["tp"] dim 1 : tensor<1x4xf32>
// CHECK: dist.all_slice %{{.*}} over ["tp"] dim 1 : tensor<2x4xf32>
// CHECK: dist.all_slice %{{.*}} over ["tp"] dim 1 : tensor<2x4xf32>
// CHECK: dist.all_slice %{{.*}} over ["tp"] dim 0 : tensor<2x4xf32>
// CHECK: dist.all_slice %{{.*}} over ["tp"] dim 1 : tensor<2x4xf32>
module attributes {dist.mesh = #dist.mesh<tp = 2 : intra_node>} {
func.func @unchanged(%x: tensor<2x4xf32>) -> (tensor<2x2xf32>, tensor<1x2xf32>, tensor<2x2xf32>, tensor<2x4xf32>, tensor<2x2xf32>, tensor<1x4xf32>, tensor<2x2xf32>) {
  %a = hpc.weight "rows" : tensor<4x2xf32> = dense<1.0>
  %a1 = dist.all_slice %a over ["tp"] dim 0 : tensor<4x2xf32> -> tensor<2x2xf32>
  %b = hpc.weight "one_row" : tensor<1x4xf32> = dense<[[1.0, 2.0, 3.0, 4.0]]>
  %b1 = dist.all_slice %b over ["tp"] dim 1 : tensor<1x4xf32> -> tensor<1x2xf32>
  %c = hpc.weight "also_whole" : tensor<2x4xf32> = dense<2.0>
  %c1 = dist.all_slice %c over ["tp"] dim 1 : tensor<2x4xf32> -> tensor<2x2xf32>
  %c2 = hpc.add %c, %x : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %d = hpc.weight "two_splits" : tensor<2x4xf32> = dense<3.0>
  %d1 = dist.all_slice %d over ["tp"] dim 1 : tensor<2x4xf32> -> tensor<2x2xf32>
  %d2 = dist.all_slice %d over ["tp"] dim 0 : tensor<2x4xf32> -> tensor<1x4xf32>
  %e = hpc.weight "no_data" : tensor<2x4xf32>
  %e1 = dist.all_slice %e over ["tp"] dim 1 : tensor<2x4xf32> -> tensor<2x2xf32>
  return %a1, %b1, %c1, %c2, %d1, %d2, %e1 : tensor<2x2xf32>, tensor<1x2xf32>, tensor<2x2xf32>, tensor<2x4xf32>, tensor<2x2xf32>, tensor<1x4xf32>, tensor<2x2xf32>
}
}

// -----

// A splat stays a splat.
// CHECK-LABEL: func.func @splat
// CHECK: hpc.weight "s" {dist.pieces_of = {dim = 1 : i64, shape = array<i64: 2, 4>}} : tensor<2x2x2xf32> = dense<5.000000e-01>
module attributes {dist.mesh = #dist.mesh<tp = 2 : intra_node>} {
func.func @splat() -> tensor<2x2xf32> {
  %w = hpc.weight "s" : tensor<2x4xf32> = dense<0.5>
  %p = dist.all_slice %w over ["tp"] dim 1 : tensor<2x4xf32> -> tensor<2x2xf32>
  return %p : tensor<2x2xf32>
}
}

// -----

// A weight read only through static slices (QKV unfusing) becomes one
// weight per slice, named after the box; strided and backward slices too.
// A slice's weight that a rank reads a piece of is then stored piece-major.
// CHECK-LABEL: func.func @slices
// CHECK-DAG: hpc.weight "qkv[0:2,0:2]" : tensor<2x2xf32> = dense<{{\[\[}}0.000000e+00, 1.000000e+00], [6.000000e+00, 7.000000e+00]]>
// CHECK-DAG: hpc.weight "qkv[0:2,1:6:2]" : tensor<2x3xf32> = dense<{{\[\[}}1.000000e+00, 3.000000e+00, 5.000000e+00], [7.000000e+00, 9.000000e+00, 1.100000e+01]]>
// CHECK-DAG: hpc.weight "qkv[1:-1:-1,5:3:-1]" : tensor<2x2xf32> = dense<{{\[\[}}1.100000e+01, 1.000000e+01], [5.000000e+00, 4.000000e+00]]>
// CHECK-DAG: hpc.weight "qkv[0:2,2:6]" {dist.pieces_of = {dim = 1 : i64, shape = array<i64: 2, 4>}} : tensor<2x2x2xf32> = dense<{{\[\[\[}}2.000000e+00, 3.000000e+00], [8.000000e+00, 9.000000e+00]], {{\[\[}}4.000000e+00, 5.000000e+00], [1.000000e+01, 1.100000e+01]]]>
// CHECK-NOT: hpc.slice
// CHECK-NOT: hpc.weight "qkv" :
module attributes {dist.mesh = #dist.mesh<tp = 2 : intra_node>} {
func.func @slices() -> (tensor<2x2xf32>, tensor<2x3xf32>, tensor<2x2xf32>, tensor<2x2xf32>) {
  %w = hpc.weight "qkv" : tensor<2x6xf32> = dense<[[0.0, 1.0, 2.0, 3.0, 4.0, 5.0], [6.0, 7.0, 8.0, 9.0, 10.0, 11.0]]>
  %q = hpc.slice %w {starts = array<i64: 0, 0>, ends = array<i64: 2, 2>, steps = array<i64: 1, 1>} : (tensor<2x6xf32>) -> tensor<2x2xf32>
  %k = hpc.slice %w {starts = array<i64: 0, 1>, ends = array<i64: 2, 6>, steps = array<i64: 1, 2>} : (tensor<2x6xf32>) -> tensor<2x3xf32>
  %r = hpc.slice %w {starts = array<i64: 1, 5>, ends = array<i64: -1, 3>, steps = array<i64: -1, -1>} : (tensor<2x6xf32>) -> tensor<2x2xf32>
  %v = hpc.slice %w {starts = array<i64: 0, 2>, ends = array<i64: 2, 6>, steps = array<i64: 1, 1>} : (tensor<2x6xf32>) -> tensor<2x4xf32>
  %vp = dist.all_slice %v over ["tp"] dim 1 : tensor<2x4xf32> -> tensor<2x2xf32>
  return %q, %k, %r, %vp : tensor<2x2xf32>, tensor<2x3xf32>, tensor<2x2xf32>, tensor<2x2xf32>
}
}

// -----

// Data above 1 KiB goes on as resource blobs: w[i][j] = 32 i + j, so rank
// 0's piece starts 0, 1, ..., 15, 32.
// CHECK-LABEL: func.func @large
// CHECK: hpc.weight "big" {dist.pieces_of = {dim = 1 : i64, shape = array<i64: 16, 32>}} : tensor<2x16x16xf32> = dense_resource<big>
// CHECK: big: "0x08000000{{([0-9A-F]{8}){15}0000704100000042}}
module attributes {dist.mesh = #dist.mesh<tp = 2 : intra_node>} {
func.func @large(%x: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %w = hpc.weight "big" : tensor<16x32xf32> = dense_resource<big_in>
  %p = dist.all_slice %w over ["tp"] dim 1 : tensor<16x32xf32> -> tensor<16x16xf32>
  %y = hpc.matmul %x, %p : (tensor<4x16xf32>, tensor<16x16xf32>) -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}
}

{-#
  dialect_resources: {
    builtin: {
      big_in: "0x04000000000000000000803F0000004000004040000080400000A0400000C0400000E0400000004100001041000020410000304100004041000050410000604100007041000080410000884100009041000098410000A0410000A8410000B0410000B8410000C0410000C8410000D0410000D8410000E0410000E8410000F0410000F84100000042000004420000084200000C4200001042000014420000184200001C4200002042000024420000284200002C4200003042000034420000384200003C4200004042000044420000484200004C4200005042000054420000584200005C4200006042000064420000684200006C4200007042000074420000784200007C42000080420000824200008442000086420000884200008A4200008C4200008E42000090420000924200009442000096420000984200009A4200009C4200009E420000A0420000A2420000A4420000A6420000A8420000AA420000AC420000AE420000B0420000B2420000B4420000B6420000B8420000BA420000BC420000BE420000C0420000C2420000C4420000C6420000C8420000CA420000CC420000CE420000D0420000D2420000D4420000D6420000D8420000DA420000DC420000DE420000E0420000E2420000E4420000E6420000E8420000EA420000EC420000EE420000F0420000F2420000F4420000F6420000F8420000FA420000FC420000FE420000004300000143000002430000034300000443000005430000064300000743000008430000094300000A4300000B4300000C4300000D4300000E4300000F430000104300001143000012430000134300001443000015430000164300001743000018430000194300001A4300001B4300001C4300001D4300001E4300001F430000204300002143000022430000234300002443000025430000264300002743000028430000294300002A4300002B4300002C4300002D4300002E4300002F430000304300003143000032430000334300003443000035430000364300003743000038430000394300003A4300003B4300003C4300003D4300003E4300003F430000404300004143000042430000434300004443000045430000464300004743000048430000494300004A4300004B4300004C4300004D4300004E4300004F430000504300005143000052430000534300005443000055430000564300005743000058430000594300005A4300005B4300005C4300005D4300005E4300005F430000604300006143000062430000634300006443000065430000664300006743000068430000694300006A4300006B4300006C4300006D4300006E4300006F430000704300007143000072430000734300007443000075430000764300007743000078430000794300007A4300007B4300007C4300007D4300007E4300007F43000080430080804300008143008081430000824300808243000083430080834300008443008084430000854300808543000086430080864300008743008087430000884300808843000089430080894300008A4300808A4300008B4300808B4300008C4300808C4300008D4300808D4300008E4300808E4300008F4300808F43000090430080904300009143008091430000924300809243000093430080934300009443008094430000954300809543000096430080964300009743008097430000984300809843000099430080994300009A4300809A4300009B4300809B4300009C4300809C4300009D4300809D4300009E4300809E4300009F4300809F430000A0430080A0430000A1430080A1430000A2430080A2430000A3430080A3430000A4430080A4430000A5430080A5430000A6430080A6430000A7430080A7430000A8430080A8430000A9430080A9430000AA430080AA430000AB430080AB430000AC430080AC430000AD430080AD430000AE430080AE430000AF430080AF430000B0430080B0430000B1430080B1430000B2430080B2430000B3430080B3430000B4430080B4430000B5430080B5430000B6430080B6430000B7430080B7430000B8430080B8430000B9430080B9430000BA430080BA430000BB430080BB430000BC430080BC430000BD430080BD430000BE430080BE430000BF430080BF430000C0430080C0430000C1430080C1430000C2430080C2430000C3430080C3430000C4430080C4430000C5430080C5430000C6430080C6430000C7430080C7430000C8430080C8430000C9430080C9430000CA430080CA430000CB430080CB430000CC430080CC430000CD430080CD430000CE430080CE430000CF430080CF430000D0430080D0430000D1430080D1430000D2430080D2430000D3430080D3430000D4430080D4430000D5430080D5430000D6430080D6430000D7430080D7430000D8430080D8430000D9430080D9430000DA430080DA430000DB430080DB430000DC430080DC430000DD430080DD430000DE430080DE430000DF430080DF430000E0430080E0430000E1430080E1430000E2430080E2430000E3430080E3430000E4430080E4430000E5430080E5430000E6430080E6430000E7430080E7430000E8430080E8430000E9430080E9430000EA430080EA430000EB430080EB430000EC430080EC430000ED430080ED430000EE430080EE430000EF430080EF430000F0430080F0430000F1430080F1430000F2430080F2430000F3430080F3430000F4430080F4430000F5430080F5430000F6430080F6430000F7430080F7430000F8430080F8430000F9430080F9430000FA430080FA430000FB430080FB430000FC430080FC430000FD430080FD430000FE430080FE430000FF430080FF43"
    }
  }
#-}
